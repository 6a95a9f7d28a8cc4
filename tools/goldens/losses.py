"""Golden cases of the losses family: nll_loss and cross_entropy over the last axis of [..., C]
with i32 targets [...], for each reduction.

The ops are called in their IR form (no entry in tests/golden/calls_*.cpp): inputs (scores,
targets) and `reduction`, "none" | "mean" | "sum". PyTorch wants the class axis at 1, so the
reference flattens [..., C] to [N, C] and reshapes a "none" result back to [...].
"""

import torch.nn.functional as F

from goldens.spec import Case, f32, i32, sixteen_bit_variants


def over_last_axis(loss, reduction):
    def call(x, t):
        out = loss(x.reshape(-1, x.shape[-1]), t.reshape(-1), reduction=reduction)
        return out.reshape(t.shape) if reduction == "none" else out
    return call


def loss_case(name, call, reduction, shape, lo=-2.0, hi=2.0):
    torch_loss = F.nll_loss if call == "nll_loss" else F.cross_entropy
    return Case(name, call, {"reduction": reduction},
                {"x": f32(shape, lo, hi), "t": i32(shape[:-1], 0, shape[-1] - 1)},
                over_last_axis(torch_loss, reduction))


CASES = [
    # nll_loss takes log-probabilities; any reals work, but these look the part.
    loss_case("nll_loss_mean_2d", "nll_loss", "mean", [5, 4], -3.0, 0.0),
    loss_case("nll_loss_none_3d", "nll_loss", "none", [2, 3, 4], -3.0, 0.0),
    loss_case("nll_loss_sum_2d", "nll_loss", "sum", [6, 3], -3.0, 0.0),
    loss_case("nll_loss_mean_3d", "nll_loss", "mean", [3, 2, 5], -3.0, 0.0),
    loss_case("cross_entropy_mean_2d", "cross_entropy", "mean", [6, 5]),
    loss_case("cross_entropy_none_3d", "cross_entropy", "none", [2, 3, 5]),
    loss_case("cross_entropy_sum_3d", "cross_entropy", "sum", [2, 4, 3]),
    loss_case("cross_entropy_large_logits", "cross_entropy", "mean", [4, 6], -30.0, 30.0),
    loss_case("cross_entropy_unbatched", "cross_entropy", "none", [7]),
]

# The 16-bit goldens (f16 and bf16 variants; goldens/spec.py, in_16bit).
# F.cross_entropy is log_softmax then nll_loss: in bfloat16 the log-probabilities are rounded in
# between (cross_entropy_mean_2d: 1 ulp off the value rounded once); tensorgrad's is one op.
CROSS_ENTROPY_16 = ["cross_entropy_mean_2d", "cross_entropy_none_3d", "cross_entropy_large_logits"]
CASES += sixteen_bit_variants(
    CASES, ["nll_loss_mean_2d", "nll_loss_none_3d", "nll_loss_sum_2d"] + CROSS_ENTROPY_16,
    via_f32={name: {"bf16": "F.cross_entropy is log_softmax then nll_loss, which in bfloat16 rounds the "
                            "log-probabilities in between"} for name in CROSS_ENTROPY_16})
