"""Golden cases of the normalization composites: layer_norm and rms_norm over the last axis (front-end
functions built from ops, not an op family).

Calls and attributes are those of tests/golden/calls_normalization.cpp: booleans `gain` and `bias`
(default false) say which [D] inputs follow x, in that order; `eps` is optional. The front-end adds
eps as an f32 constant, so the torch side uses eps rounded to float32 as well.
"""

import struct

import torch
import torch.nn.functional as F

from goldens.spec import Case, f32, sixteen_bit_variants


def as_f32(v: float) -> float:
    return struct.unpack("<f", struct.pack("<f", v))[0]


def layer_norm_case(name, shape, gain, bias, eps=None):
    d = shape[-1]
    inputs = {"x": f32(shape)}
    if gain:
        inputs["g"] = f32([d])
    if bias:
        inputs["b"] = f32([d])
    attrs = {"gain": gain, "bias": bias}
    if eps is not None:
        attrs["eps"] = eps
    eps32 = as_f32(1e-5 if eps is None else eps)

    def expected(x, *affine):
        rest = list(affine)
        weight = rest.pop(0) if gain else None
        offset = rest.pop(0) if bias else None
        return F.layer_norm(x, (d,), weight, offset, eps32)

    return Case(name, "layer_norm", attrs, inputs, expected)


def rms_norm_case(name, shape, gain, eps=None):
    inputs = {"x": f32(shape)}
    if gain:
        inputs["g"] = f32([shape[-1]])
    attrs = {"gain": gain}
    if eps is not None:
        attrs["eps"] = eps
    eps32 = as_f32(1e-6 if eps is None else eps)

    def expected(x, *affine):
        y = x * torch.rsqrt((x * x).mean(dim=-1, keepdim=True) + eps32)
        return y * affine[0] if gain else y

    return Case(name, "rms_norm", attrs, inputs, expected)


CASES = [
    layer_norm_case("layer_norm_gain_bias", [4, 6], True, True),
    layer_norm_case("layer_norm_plain", [3, 5], False, False),
    layer_norm_case("layer_norm_gain_only_rank3", [2, 3, 8], True, False, eps=1e-5),
    layer_norm_case("layer_norm_bias_only_large_eps", [5, 4], False, True, eps=0.25),
    rms_norm_case("rms_norm_gain", [4, 6], True),
    rms_norm_case("rms_norm_plain_rank3", [2, 3, 5], False, eps=1e-6),
    rms_norm_case("rms_norm_gain_large_eps", [7], True, eps=0.5),
]

# The 16-bit goldens (f16 and bf16 variants; goldens/spec.py, in_16bit).
# rms_norm has no PyTorch 1.13 op: its reference formula run in 16 bits would round after every
# step, so it is computed in float32 and rounded once (tensorgrad's rms_norm is one rounding too).
CASES += sixteen_bit_variants(
    CASES, ["layer_norm_gain_bias", "layer_norm_plain", "layer_norm_gain_only_rank3", "rms_norm_gain",
            "rms_norm_plain_rank3"],
    via_f32={**{name: "PyTorch 1.13 has no rms_norm op; its formula in 16 bits would round every step"
                for name in ("rms_norm_gain", "rms_norm_plain_rank3")},
             **{name: {"bf16": "PyTorch 1.13's CPU bfloat16 layer_norm rounds intermediate results to bfloat16: "
                               "in these cases up to 16 ulp from the result rounded once"}
                for name in ("layer_norm_gain_bias", "layer_norm_plain", "layer_norm_gain_only_rank3")}})
