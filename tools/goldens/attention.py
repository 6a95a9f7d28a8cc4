"""Golden cases of the attention family: attention, attention_lse, attention_grad_q, attention_grad_kv.

Calls are the front-end's (tests/golden/calls_attention.cpp): `causal` (default false) and an
optional `scale`. Without `scale` the front-end takes 1/sqrt(head_dim); either way it rounds the
scale to float32 once, so the references here use the float32 value too (a case with scale 0.3,
which float32 does not hold, fails if the rounding is lost: the f64 bound is 1e-9).

PyTorch 1.13 (Debian's python3-torch) has no scaled_dot_product_attention, so the references are
the definition written in float64 torch ops: scores s = scale * q k^T, masked to -inf above the
diagonal when causal (top-left aligned: query i sees keys j <= i), softmax over the keys, times v.
The forward cases' gradients are torch.autograd of that composition, so they check attention's
gradient rule (attention_lse, attention_grad_q, attention_grad_kv and narrow) with the true lse and
o. The backward ops on their own are defined for any o, g and lse (docs/ops.md): their cases draw o,
g and lse at random and compute dq, dk and dv by torch.autograd of the probabilities
P = exp(s - lse) against fixed weights (dq, dk: sum P * (g v^T - rowsum(g * o)); dv: sum g * (P v)
with P fixed), not by the spec's formulas.
"""

import math
import struct

import torch

from goldens.spec import SIXTEEN_BIT, VIA_F32_NOTE, Case, InputSpec, f32, sixteen_bit_variants


def as_f32(v: float) -> float:
    return struct.unpack("<f", struct.pack("<f", v))[0]


def scale_of(attrs: dict, head_dim: int) -> float:
    """The scale the front-end applies: the given one or 1/sqrt(head_dim), rounded to float32."""
    return as_f32(attrs.get("scale", 1.0 / math.sqrt(head_dim)))


def scores(q, k, scale: float, causal: bool):
    """scale * q k^T over the last two axes, -inf where a causal query must not see the key."""
    s = scale * (q @ k.transpose(-1, -2))
    if causal:
        tq, tk = s.shape[-2], s.shape[-1]
        hidden = torch.ones(tq, tk, dtype=torch.bool).triu(1)
        s = s.masked_fill(hidden, float("-inf"))
    return s


def attention_ref(attrs):
    causal = attrs.get("causal", False)

    def run(q, k, v):
        return torch.softmax(scores(q, k, scale_of(attrs, q.shape[-1]), causal), dim=-1) @ v

    return run


def lse_ref(attrs):
    causal = attrs.get("causal", False)

    def run(q, k):
        s = scores(q, k, scale_of(attrs, q.shape[-1]), causal)
        m = s.max(dim=-1, keepdim=True).values  # finite: every query sees key 0
        return (m + torch.log(torch.exp(s - m).sum(dim=-1, keepdim=True))).squeeze(-1)

    return run


def backward_grads(attrs, q, k, v, o, g, lse):
    """dq, dk, dv of the backward ops for any o, g, lse, by autograd of P = exp(s - lse)."""
    causal = attrs.get("causal", False)
    with torch.enable_grad():
        q, k, v = (t.detach().clone().requires_grad_(True) for t in (q, k, v))
        p = torch.exp(scores(q, k, scale_of(attrs, q.shape[-1]), causal) - lse.unsqueeze(-1))
        # dS = P * (g v^T - delta): the weights of P are fixed, the probabilities depend on q and k.
        weights = (g @ v.transpose(-1, -2) - (g * o).sum(dim=-1, keepdim=True)).detach()
        dq, dk = torch.autograd.grad((p * weights).sum(), [q, k])
        (dv,) = torch.autograd.grad((g * (p.detach() @ v)).sum(), [v])
    return dq, dk, dv


def grad_q_ref(attrs):
    return lambda *args: backward_grads(attrs, *args)[0]


def grad_kv_ref(attrs):
    def run(*args):
        _, dk, dv = backward_grads(attrs, *args)
        return torch.cat([dk, dv], dim=-1)

    return run


def forward_case(name, batch, tq, tk, d, dv, attrs, qk_range=2.0, note=None, min_gap=None):
    inputs = {"q": f32(batch + [tq, d], -qk_range, qk_range), "k": f32(batch + [tk, d], -qk_range, qk_range),
              "v": f32(batch + [tk, dv])}
    reference = attention_ref(attrs)
    if min_gap is not None:
        reference = well_separated(attrs, reference, min_gap)
    return Case(name, "attention", dict(attrs), inputs, reference, note=note)


def well_separated(attrs, reference, min_gap):
    """The reference, failing the case unless every row's two largest scores are min_gap apart: then
    the softmax is one-hot to float64 precision and an f32 score error of |s| * 2^-24 moves nothing."""
    def run(q, k, v):
        s = scores(q.detach(), k.detach(), scale_of(attrs, q.shape[-1]), attrs.get("causal", False))
        if s.shape[-1] > 1:
            top = s.topk(2, dim=-1).values
            gaps = (top[..., 0] - top[..., 1])[top[..., 1] > float("-inf")]  # rows that see two keys or more
            if gaps.numel() and float(gaps.min()) < min_gap:
                raise ValueError(f"two scores of a row are {float(gaps.min())} apart, under {min_gap}")
        return reference(q, k, v)

    return run


def lse_case(name, batch, tq, tk, d, attrs, qk_range=2.0):
    inputs = {"q": f32(batch + [tq, d], -qk_range, qk_range), "k": f32(batch + [tk, d], -qk_range, qk_range)}
    return Case(name, "attention_lse", dict(attrs), inputs, lse_ref(attrs), grad=False)


def backward_inputs(batch, tq, tk, d, dv):
    # lse near the scores' log-sum-exp (|s| <= a few units here), so P neither overflows nor vanishes.
    return {"q": f32(batch + [tq, d]), "k": f32(batch + [tk, d]), "v": f32(batch + [tk, dv]),
            "o": f32(batch + [tq, dv]), "g": f32(batch + [tq, dv]), "lse": f32(batch + [tq], 0.0, 3.0)}


def grad_q_case(name, batch, tq, tk, d, dv, attrs):
    return Case(name, "attention_grad_q", dict(attrs), backward_inputs(batch, tq, tk, d, dv), grad_q_ref(attrs),
                grad=False)


def grad_kv_case(name, batch, tq, tk, d, dv, attrs):
    return Case(name, "attention_grad_kv", dict(attrs), backward_inputs(batch, tq, tk, d, dv), grad_kv_ref(attrs),
                grad=False)


LARGE_SCORES = ("q and k in [-64, 64] with scale 1: scores of about 1e2 to 7e3 in magnitude (median about 2e3), "
                "whose exp overflows unless the row maximum is taken out first; the generator checks that each "
                "row's two largest scores are at least 20 apart, so the result is well conditioned")

CASES = [
    forward_case("attention_cross", [], 3, 5, 4, 3, {}),
    forward_case("attention_causal", [], 4, 4, 3, 2, {"causal": True}),
    forward_case("attention_batch_heads_head_dim5", [2, 3], 4, 6, 5, 7, {"scale": 0.3},
                 note="scale 0.3 is not a float32: the front-end applies 0.30000001192092896"),
    forward_case("attention_causal_batch_heads", [2, 3], 5, 5, 5, 4, {"causal": True}),
    forward_case("attention_negative_scale", [2], 3, 4, 6, 2, {"scale": -0.75}),
    forward_case("attention_one_query_one_key", [2], 1, 1, 3, 2, {"causal": True}),
    forward_case("attention_one_query", [3], 1, 4, 2, 3, {"scale": 1.0}),
    forward_case("attention_large_scores", [2], 6, 6, 4, 3, {"causal": True, "scale": 1.0}, qk_range=64.0,
                 note=LARGE_SCORES, min_gap=20.0),
    forward_case("attention_large_scores_cross", [], 3, 7, 4, 2, {"scale": 1.0}, qk_range=64.0,
                 note=LARGE_SCORES, min_gap=20.0),
    lse_case("attention_lse_cross", [2], 3, 5, 4, {}),
    lse_case("attention_lse_causal_batch_heads", [2, 3], 4, 4, 5, {"causal": True, "scale": 0.3}),
    lse_case("attention_lse_one_key", [], 2, 1, 3, {}),
    lse_case("attention_lse_large_scores", [2], 5, 5, 4, {"causal": True, "scale": 1.0}, qk_range=64.0),
    grad_q_case("attention_grad_q_cross", [2], 3, 5, 4, 3, {}),
    grad_q_case("attention_grad_q_causal_batch_heads", [2, 3], 4, 4, 5, 2, {"causal": True, "scale": 0.3}),
    grad_q_case("attention_grad_q_one_query", [], 1, 3, 2, 4, {"scale": -0.5}),
    grad_kv_case("attention_grad_kv_cross", [2], 3, 5, 4, 3, {}),
    grad_kv_case("attention_grad_kv_causal_batch_heads", [2, 3], 4, 4, 5, 2, {"causal": True, "scale": 0.3}),
    grad_kv_case("attention_grad_kv_one_key", [], 3, 1, 2, 4, {"scale": -0.5}),
]


# ---- 16-bit variants -----------------------------------------------------------------------------
# tensorgrad's attention on f16/bf16 is one op computed in f32 (f64 in the oracle) and rounded once;
# PyTorch 1.13 has no such op, and its composition in 16 bits would round after the product, the
# softmax and the second product. So the references come from float32 and are rounded once.
COMPOSED = "PyTorch 1.13 has no attention op; its matmul-softmax-matmul composition in 16 bits rounds every step"


def backward_16bit(case: Case, kind: str) -> Case:
    """A backward-op case with q, k, v, o, g drawn as `kind` and lse still f32 (the ops take an f32 lse):
    the reference in float32 from those values, rounded once to `kind`."""
    dtype = {"f16": torch.float16, "bf16": torch.bfloat16}[kind]
    inputs = {n: (InputSpec(kind, s.shape, s.lo, s.hi) if n != "lse" else s) for n, s in case.inputs.items()}

    def run(*args):
        return case.torch(*[a.float() for a in args]).to(dtype)

    return Case(case.name + "_" + kind, case.call, dict(case.attrs), inputs, run, grad=False,
                note=VIA_F32_NOTE.format(dtype=kind, why=COMPOSED))


def lse_16bit(case: Case, kind: str) -> Case:
    """An attention_lse case with q and k drawn as `kind`: the output stays f32, so the reference is the
    float64 one on those values (compared as an f32 output: within 1e-9 of the f64 oracle)."""
    inputs = {n: InputSpec(kind, s.shape, s.lo, s.hi) for n, s in case.inputs.items()}

    def run(*args):
        return case.torch(*[a.double() for a in args])

    return Case(case.name + "_" + kind, case.call, dict(case.attrs), inputs, run, grad=False,
                note=f"q and k are {kind}; the log-sum-exp is f32 whatever their dtype")


FORWARD_16BIT = ["attention_cross", "attention_causal_batch_heads", "attention_batch_heads_head_dim5",
                 "attention_large_scores"]
CASES += sixteen_bit_variants(CASES, FORWARD_16BIT, via_f32={name: COMPOSED for name in FORWARD_16BIT})
_BY_NAME = {c.name: c for c in CASES}
CASES += [lse_16bit(_BY_NAME[n], kind) for n in ("attention_lse_causal_batch_heads",) for kind in SIXTEEN_BIT]
CASES += [backward_16bit(_BY_NAME[n], kind)
          for n in ("attention_grad_q_causal_batch_heads", "attention_grad_kv_causal_batch_heads")
          for kind in SIXTEEN_BIT]
