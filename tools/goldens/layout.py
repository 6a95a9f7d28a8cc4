"""Golden cases of the layout family: reshape, permute, swap_axes, broadcast_to and sum_to_shape.

Calls: reshape (`shape`, one -1 inferred), permute (`perm`) and swap_axes (`axis0`, `axis1`) take
the front-end's forms with negative axes (tests/golden/calls_layout.cpp); broadcast_to and
sum_to_shape are the ops themselves, with their `shape` attribute.
"""

import torch

from goldens.spec import Case, f32, sixteen_bit_variants


def sum_to(x, shape):
    """tensorgrad's sum_to_shape: sums the leading axes and the axes where `shape` has 1."""
    lead = x.dim() - len(shape)
    out = x.sum(dim=tuple(range(lead))) if lead > 0 else x
    axes = tuple(i for i, d in enumerate(shape) if d == 1 and out.shape[i] != 1)
    return out.sum(dim=axes, keepdim=True) if axes else out


CASES = [
    Case("reshape", "reshape", {"shape": [4, 6]}, {"x": f32([2, 3, 4])}, lambda x: x.reshape(4, 6)),
    Case("reshape_infer_dim", "reshape", {"shape": [6, -1]}, {"x": f32([2, 3, 4])}, lambda x: x.reshape(6, -1)),
    Case("reshape_to_0d", "reshape", {"shape": []}, {"x": f32([1, 1])}, lambda x: x.reshape(())),
    Case("permute", "permute", {"perm": [2, 0, 1]}, {"x": f32([2, 3, 4])}, lambda x: x.permute(2, 0, 1)),
    Case("permute_negative", "permute", {"perm": [-1, 0, 1, 2]}, {"x": f32([2, 3, 1, 4])},
         lambda x: x.permute(3, 0, 1, 2)),
    Case("swap_axes", "swap_axes", {"axis0": 0, "axis1": 2}, {"x": f32([2, 3, 4])}, lambda x: x.transpose(0, 2)),
    Case("swap_axes_negative", "swap_axes", {"axis0": -1, "axis1": -2}, {"x": f32([2, 3, 4])},
         lambda x: x.transpose(-1, -2)),
    Case("broadcast_to", "broadcast_to", {"shape": [2, 3, 4]}, {"x": f32([3, 1])},
         lambda x: torch.broadcast_to(x, (2, 3, 4))),
    Case("broadcast_to_from_0d", "broadcast_to", {"shape": [2, 2]}, {"x": f32([])},
         lambda x: torch.broadcast_to(x, (2, 2))),
    Case("sum_to_shape", "sum_to_shape", {"shape": [3, 1]}, {"x": f32([2, 3, 4])}, lambda x: sum_to(x, [3, 1])),
    Case("sum_to_shape_0d", "sum_to_shape", {"shape": []}, {"x": f32([2, 3])}, lambda x: sum_to(x, [])),
    Case("sum_to_shape_inner_ones", "sum_to_shape", {"shape": [2, 1, 4]}, {"x": f32([3, 2, 5, 4])},
         lambda x: sum_to(x, [2, 1, 4])),
]

# The 16-bit goldens (f16 and bf16 variants; goldens/spec.py, in_16bit).
CASES += sixteen_bit_variants(CASES, ["reshape", "permute", "swap_axes", "broadcast_to", "sum_to_shape",
                                      "sum_to_shape_inner_ones"],
                              via_f32={name: "the reference is two torch.sum calls, which in 16 bits round between them"
                                       for name in ("sum_to_shape", "sum_to_shape_inner_ones")})
