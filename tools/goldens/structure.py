"""Golden cases of the structure family: narrow, pad, concat and the composites stack, split,
flatten, split_heads and merge_heads.

Calls are the front-end's (tests/golden/calls_structure.cpp), which take negative axes:
- narrow: `axis`, `start`, `length`; pad: `axis`, `before`, `after` (zero fill);
- concat and stack take every input of the case in order, with an optional `axis` (default 0);
- split: `sizes` (a list), optional `axis`, and `index`: the piece the call returns;
- flatten: optional `start_axis`; split_heads: `heads`; merge_heads: nothing.
"""

import torch
import torch.nn.functional as F

from goldens.spec import Case, f32, sixteen_bit_variants


def pad_axis(x, axis, before, after):
    """tensorgrad's pad: zeros along one axis. F.pad lists (before, after) pairs from the last axis."""
    spec = [0, 0] * (x.dim() - 1 - axis) + [before, after]
    return F.pad(x, spec)


def split_heads(x, heads):
    """[..., T, D] -> [..., H, T, D / H]."""
    *lead, t, d = x.shape
    return x.reshape(*lead, t, heads, d // heads).transpose(-3, -2)


def merge_heads(x):
    """[..., H, T, d] -> [..., T, H * d]."""
    *lead, h, t, d = x.shape
    return x.transpose(-3, -2).reshape(*lead, t, h * d)


def narrow_pad_cases():
    return [
        Case("narrow_middle_axis", "narrow", {"axis": 1, "start": 1, "length": 3}, {"x": f32([2, 5, 3])},
             lambda x: torch.narrow(x, 1, 1, 3)),
        Case("narrow_first_axis_to_end", "narrow", {"axis": 0, "start": 2, "length": 2}, {"x": f32([4, 3])},
             lambda x: torch.narrow(x, 0, 2, 2)),
        Case("narrow_negative_axis", "narrow", {"axis": -1, "start": 0, "length": 1}, {"x": f32([3, 2, 4])},
             lambda x: torch.narrow(x, -1, 0, 1)),
        Case("pad_last_axis", "pad", {"axis": 1, "before": 2, "after": 1}, {"x": f32([3, 4])},
             lambda x: pad_axis(x, 1, 2, 1)),
        Case("pad_first_axis_after_only", "pad", {"axis": 0, "before": 0, "after": 3}, {"x": f32([2, 3, 2])},
             lambda x: pad_axis(x, 0, 0, 3)),
        Case("pad_middle_axis", "pad", {"axis": 1, "before": 1, "after": 2}, {"x": f32([2, 3, 4])},
             lambda x: pad_axis(x, 1, 1, 2)),
    ]


def concat_stack_cases():
    return [
        Case("concat_two_axis0", "concat", {"axis": 0}, {"a": f32([2, 3]), "b": f32([4, 3])},
             lambda a, b: torch.cat([a, b], 0)),
        Case("concat_three_last_axis", "concat", {"axis": -1},
             {"a": f32([2, 3, 1]), "b": f32([2, 3, 4]), "c": f32([2, 3, 2])},
             lambda a, b, c: torch.cat([a, b, c], -1)),
        Case("concat_three_middle_axis", "concat", {"axis": 1},
             {"a": f32([2, 2, 3]), "b": f32([2, 1, 3]), "c": f32([2, 3, 3])},
             lambda a, b, c: torch.cat([a, b, c], 1)),
        Case("stack_axis0", "stack", {"axis": 0}, {"a": f32([2, 3]), "b": f32([2, 3])},
             lambda a, b: torch.stack([a, b], 0)),
        Case("stack_three_last_axis", "stack", {"axis": -1},
             {"a": f32([3, 2]), "b": f32([3, 2]), "c": f32([3, 2])},
             lambda a, b, c: torch.stack([a, b, c], -1)),
        Case("stack_middle_axis", "stack", {"axis": 1}, {"a": f32([2, 4]), "b": f32([2, 4])},
             lambda a, b: torch.stack([a, b], 1)),
    ]


def split_flatten_cases():
    return [
        Case("split_middle_piece", "split", {"sizes": [2, 3], "axis": 1, "index": 1}, {"x": f32([3, 5])},
             lambda x: torch.split(x, [2, 3], 1)[1]),
        Case("split_first_piece_axis0", "split", {"sizes": [1, 2, 1], "axis": 0, "index": 0},
             {"x": f32([4, 2, 3])}, lambda x: torch.split(x, [1, 2, 1], 0)[0]),
        Case("split_last_piece_negative_axis", "split", {"sizes": [3, 1, 2], "axis": -1, "index": 2},
             {"x": f32([2, 6])}, lambda x: torch.split(x, [3, 1, 2], -1)[2]),
        Case("flatten_all", "flatten", {}, {"x": f32([2, 3, 4])}, lambda x: torch.flatten(x)),
        Case("flatten_from_axis1", "flatten", {"start_axis": 1}, {"x": f32([2, 3, 2, 2])},
             lambda x: torch.flatten(x, 1)),
        Case("flatten_negative_start", "flatten", {"start_axis": -2}, {"x": f32([2, 3, 4])},
             lambda x: torch.flatten(x, -2)),
    ]


def heads_cases():
    return [
        Case("split_heads_batched", "split_heads", {"heads": 2}, {"x": f32([2, 3, 4])},
             lambda x: split_heads(x, 2)),
        Case("split_heads_rank2", "split_heads", {"heads": 3}, {"x": f32([4, 6])}, lambda x: split_heads(x, 3)),
        Case("split_heads_rank4", "split_heads", {"heads": 4}, {"x": f32([2, 1, 3, 8])},
             lambda x: split_heads(x, 4)),
        Case("merge_heads_batched", "merge_heads", {}, {"x": f32([2, 2, 3, 2])}, merge_heads),
        Case("merge_heads_rank3", "merge_heads", {}, {"x": f32([3, 4, 2])}, merge_heads),
    ]


CASES = narrow_pad_cases() + concat_stack_cases() + split_flatten_cases() + heads_cases()

# The 16-bit goldens (f16 and bf16 variants; goldens/spec.py, in_16bit).
CASES += sixteen_bit_variants(CASES, ["narrow_middle_axis", "pad_last_axis", "concat_three_middle_axis",
                                      "stack_axis0", "split_middle_piece", "flatten_from_axis1",
                                      "split_heads_batched", "merge_heads_batched"])
