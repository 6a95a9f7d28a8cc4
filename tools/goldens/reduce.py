"""Golden cases of the reduce family: sum, mean, max, min, argmax and argmin.

Calls (tests/golden/calls_reduce.cpp) are the front-end's forms, which the IR does not take:
- sum/mean/max/min: an optional `axes` list or one `axis` integer (neither: every axis), negative
  axes counting from the end, optional `keep_dims` (default false);
- argmax/argmin: an optional `axis` (none: over the flattened input), optional `keep_dims`.
max, min, argmax and argmin inputs are untied: with ties the chosen element depends on the tie rule.
"""

import torch

from goldens.spec import Case, f32, sixteen_bit_variants

UNTIED = dict(untied=True)


def sum_mean_cases():
    return [
        Case("sum_all", "sum", {}, {"x": f32([3, 4])}, torch.sum),
        Case("sum_axis", "sum", {"axis": 1}, {"x": f32([2, 3, 4])}, lambda x: x.sum(dim=1)),
        Case("sum_negative_axis", "sum", {"axis": -1}, {"x": f32([2, 3, 4])}, lambda x: x.sum(dim=-1)),
        Case("sum_axes_keep_dims", "sum", {"axes": [0, 2], "keep_dims": True}, {"x": f32([2, 3, 4])},
             lambda x: x.sum(dim=(0, 2), keepdim=True)),
        Case("sum_0d", "sum", {}, {"x": f32([])}, torch.sum),
        Case("sum_long", "sum", {"axis": 0}, {"x": f32([1000, 2])}, lambda x: x.sum(dim=0)),
        Case("mean_all", "mean", {}, {"x": f32([3, 4])}, torch.mean),
        Case("mean_axes_keep_dims", "mean", {"axes": [1, 2], "keep_dims": True}, {"x": f32([2, 3, 4])},
             lambda x: x.mean(dim=(1, 2), keepdim=True)),
        Case("mean_negative_axis", "mean", {"axis": -2}, {"x": f32([2, 5, 3])}, lambda x: x.mean(dim=-2)),
    ]


def max_min_cases():
    return [
        Case("max_all", "max", {}, {"x": f32([3, 4], **UNTIED)}, torch.amax),
        Case("max_axis", "max", {"axis": 1}, {"x": f32([3, 5], **UNTIED)}, lambda x: torch.amax(x, dim=1)),
        Case("max_axes_keep_dims", "max", {"axes": [0, 2], "keep_dims": True}, {"x": f32([2, 3, 4], **UNTIED)},
             lambda x: torch.amax(x, dim=(0, 2), keepdim=True)),
        Case("min_all", "min", {}, {"x": f32([3, 4], **UNTIED)}, torch.amin),
        Case("min_axis", "min", {"axis": 0}, {"x": f32([4, 3], **UNTIED)}, lambda x: torch.amin(x, dim=0)),
        Case("min_axes_keep_dims", "min", {"axes": [1], "keep_dims": True}, {"x": f32([2, 3, 4], **UNTIED)},
             lambda x: torch.amin(x, dim=1, keepdim=True)),
    ]


def arg_cases():
    return [
        Case("argmax_flat", "argmax", {}, {"x": f32([3, 4], **UNTIED)}, torch.argmax),
        Case("argmax_flat_keep_dims", "argmax", {"keep_dims": True}, {"x": f32([2, 3], **UNTIED)},
             lambda x: torch.argmax(x).reshape(1, 1)),
        Case("argmax_axis", "argmax", {"axis": 1}, {"x": f32([3, 5], **UNTIED)},
             lambda x: torch.argmax(x, dim=1)),
        Case("argmax_axis_keep_dims", "argmax", {"axis": -1, "keep_dims": True}, {"x": f32([2, 3, 4], **UNTIED)},
             lambda x: torch.argmax(x, dim=-1, keepdim=True)),
        Case("argmin_flat", "argmin", {}, {"x": f32([4, 3], **UNTIED)}, torch.argmin),
        Case("argmin_axis", "argmin", {"axis": 0}, {"x": f32([4, 3], **UNTIED)}, lambda x: torch.argmin(x, dim=0)),
        Case("argmin_axis_keep_dims", "argmin", {"axis": 1, "keep_dims": True}, {"x": f32([2, 3, 4], **UNTIED)},
             lambda x: torch.argmin(x, dim=1, keepdim=True)),
    ]


CASES = sum_mean_cases() + max_min_cases() + arg_cases()

# The 16-bit goldens (f16 and bf16 variants; goldens/spec.py, in_16bit).
CASES += sixteen_bit_variants(CASES, ["sum_axis", "sum_all", "sum_long", "mean_axes_keep_dims", "max_axis",
                                      "min_axes_keep_dims", "argmax_axis", "argmin_flat"])
