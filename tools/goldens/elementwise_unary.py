"""Golden cases of the elementwise_unary family: f32 math (neg ... silu, clamp) and stop_gradient.

Every call is the op itself (no entry in tests/golden/calls_*.cpp): one input, and clamp's `lo`
and `hi` attributes. Inputs avoid each function's kinks and poles: untied values for abs, relu and
clamp, positive ones for sqrt, rsqrt and log.
"""

import torch
import torch.nn.functional as F

from goldens.spec import Case, f32, sixteen_bit_variants

POSITIVE = dict(lo=0.5, hi=3.0)
KINK = dict(untied=True)

CASES = [
    Case("neg", "neg", {}, {"x": f32([3, 4])}, torch.neg),
    Case("abs", "abs", {}, {"x": f32([3, 5], **KINK)}, torch.abs),
    Case("square", "square", {}, {"x": f32([4, 3])}, torch.square),
    Case("sqrt", "sqrt", {}, {"x": f32([2, 5], **POSITIVE)}, torch.sqrt),
    Case("rsqrt", "rsqrt", {}, {"x": f32([2, 5], **POSITIVE)}, torch.rsqrt),
    Case("exp", "exp", {}, {"x": f32([2, 3, 4])}, torch.exp),
    Case("log", "log", {}, {"x": f32([3, 4], lo=0.1, hi=4.0)}, torch.log),
    Case("sin", "sin", {}, {"x": f32([3, 4], lo=-4.0, hi=4.0)}, torch.sin),
    Case("cos", "cos", {}, {"x": f32([3, 4], lo=-4.0, hi=4.0)}, torch.cos),
    Case("tanh", "tanh", {}, {"x": f32([3, 4], lo=-3.0, hi=3.0)}, torch.tanh),
    Case("tanh_0d", "tanh", {}, {"x": f32([])}, torch.tanh),
    Case("sigmoid", "sigmoid", {}, {"x": f32([3, 4], lo=-5.0, hi=5.0)}, torch.sigmoid),
    Case("relu", "relu", {}, {"x": f32([4, 5], **KINK)}, torch.relu),
    Case("gelu_tanh", "gelu", {}, {"x": f32([4, 5], lo=-4.0, hi=4.0)},
         lambda x: F.gelu(x, approximate="tanh")),
    Case("silu", "silu", {}, {"x": f32([4, 5], lo=-4.0, hi=4.0)}, F.silu),
    Case("clamp", "clamp", {"lo": -0.5, "hi": 0.75}, {"x": f32([4, 5], untied=True)},
         lambda x: torch.clamp(x, -0.5, 0.75)),
    Case("clamp_lower_only", "clamp", {"lo": 0.0, "hi": 100.0}, {"x": f32([3, 3], untied=True)},
         lambda x: torch.clamp(x, 0.0, 100.0)),
    Case("stop_gradient", "stop_gradient", {}, {"x": f32([2, 3])}, lambda x: x.detach()),
]

# The 16-bit goldens (f16 and bf16 variants; goldens/spec.py, in_16bit).
CASES += sixteen_bit_variants(CASES, ["neg", "abs", "square", "sqrt", "rsqrt", "exp", "log", "sin", "cos", "tanh",
                                      "sigmoid", "relu", "gelu_tanh", "silu", "clamp", "stop_gradient"],
                              via_f32={"gelu_tanh": {"bf16": "PyTorch 1.13's CPU bfloat16 GELU (tanh form) rounds its "
                                                             "intermediate results to bfloat16: 11 of 20 outputs off, by "
                                                             "up to 26 ulp, from the value rounded once"},
                                       "silu": {"bf16": "PyTorch 1.13's CPU bfloat16 SiLU rounds an intermediate result "
                                                        "to bfloat16: 9 of 20 outputs 1 ulp off the value rounded once"},
                                       "rsqrt": {"bf16": "PyTorch 1.13's CPU bfloat16 rsqrt rounds an intermediate result "
                                                         "to bfloat16: 5 of 10 outputs 1 ulp off the value rounded once"}})
