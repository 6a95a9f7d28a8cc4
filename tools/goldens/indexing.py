"""Golden cases of the indexing family: one_hot, embedding, take_along_axis, scatter_add,
softmax_causal and where_causal.

Calls and their attributes:
- in their IR form (no entry in tests/golden/calls_*.cpp): one_hot `depth`; embedding, inputs
  (table, indices); softmax_causal, nothing (the last axis of [..., T, T]); where_causal `value`,
  the fill for j > i (a float32 value: the front-end rounds it);
- the front-end's form, with negative axes (tests/golden/calls_indexing.cpp): take_along_axis
  `axis` (PyTorch's torch.gather with equal other dims); scatter_add `axis` and `size` (the
  output's extent along axis).
Index inputs are drawn inside their valid range.
"""

import torch
import torch.nn.functional as F

from goldens.spec import Case, f32, i32, sixteen_bit_variants


def above_diagonal(x):
    """True where column j > row i of the last two axes."""
    t = x.shape[-1]
    return torch.triu(torch.ones(t, t, dtype=torch.bool), diagonal=1)


def softmax_causal(x):
    return x.masked_fill(above_diagonal(x), float("-inf")).softmax(-1)


def where_causal(x, value):
    return x.masked_fill(above_diagonal(x), value)


def scatter_add(updates, indices, axis, size):
    shape = list(indices.shape)
    shape[axis] = size
    return torch.zeros(shape, dtype=updates.dtype).scatter_add(axis, indices, updates)


def one_hot_cases():
    return [
        Case("one_hot_matrix", "one_hot", {"depth": 5}, {"i": i32([2, 3], 0, 4)},
             lambda i: F.one_hot(i, 5).to(torch.float64)),
        Case("one_hot_vector_depth_not_reached", "one_hot", {"depth": 6}, {"i": i32([7], 0, 3)},
             lambda i: F.one_hot(i, 6).to(torch.float64)),
    ]


def embedding_cases():
    return [
        Case("embedding_matrix_of_indices", "embedding", {}, {"table": f32([7, 4]), "i": i32([2, 5], 0, 6)},
             lambda table, i: F.embedding(i, table)),
        Case("embedding_repeated_rows", "embedding", {}, {"table": f32([3, 5]), "i": i32([9], 0, 2)},
             lambda table, i: F.embedding(i, table)),
        Case("embedding_rank3_indices", "embedding", {}, {"table": f32([6, 2]), "i": i32([2, 2, 3], 0, 5)},
             lambda table, i: F.embedding(i, table)),
    ]


def take_scatter_cases():
    return [
        Case("take_along_axis_first_axis", "take_along_axis", {"axis": 0}, {"x": f32([4, 3]), "i": i32([6, 3], 0, 3)},
             lambda x, i: torch.gather(x, 0, i)),
        Case("take_along_axis_middle_axis", "take_along_axis", {"axis": 1},
             {"x": f32([2, 5, 3]), "i": i32([2, 2, 3], 0, 4)}, lambda x, i: torch.gather(x, 1, i)),
        Case("take_along_axis_negative_axis", "take_along_axis", {"axis": -1},
             {"x": f32([3, 4]), "i": i32([3, 7], 0, 3)}, lambda x, i: torch.gather(x, -1, i)),
        Case("scatter_add_first_axis", "scatter_add", {"axis": 0, "size": 4},
             {"u": f32([5, 3]), "i": i32([5, 3], 0, 3)}, lambda u, i: scatter_add(u, i, 0, 4)),
        Case("scatter_add_middle_axis", "scatter_add", {"axis": 1, "size": 3},
             {"u": f32([2, 6, 2]), "i": i32([2, 6, 2], 0, 2)}, lambda u, i: scatter_add(u, i, 1, 3)),
        Case("scatter_add_negative_axis_grows", "scatter_add", {"axis": -1, "size": 7},
             {"u": f32([3, 4]), "i": i32([3, 4], 0, 6)}, lambda u, i: scatter_add(u, i, 1, 7)),
    ]


def causal_cases():
    return [
        Case("softmax_causal_square", "softmax_causal", {}, {"x": f32([4, 4], -3.0, 3.0)}, softmax_causal),
        Case("softmax_causal_heads", "softmax_causal", {}, {"x": f32([2, 3, 5, 5], -3.0, 3.0)}, softmax_causal),
        Case("softmax_causal_one_step", "softmax_causal", {}, {"x": f32([3, 1, 1])}, softmax_causal),
        Case("where_causal_negative_fill", "where_causal", {"value": -1.5}, {"x": f32([3, 3])},
             lambda x: where_causal(x, -1.5)),
        Case("where_causal_large_fill", "where_causal", {"value": -1e9}, {"x": f32([2, 4, 4])},
             lambda x: where_causal(x, -1e9)),
        Case("where_causal_zero_fill", "where_causal", {"value": 0.0}, {"x": f32([2, 2, 3, 3])},
             lambda x: where_causal(x, 0.0)),
    ]


CASES = one_hot_cases() + embedding_cases() + take_scatter_cases() + causal_cases()

# The 16-bit goldens (f16 and bf16 variants; goldens/spec.py, in_16bit).
CASES += sixteen_bit_variants(CASES, ["embedding_matrix_of_indices", "take_along_axis_middle_axis",
                                      "scatter_add_first_axis", "softmax_causal_square", "where_causal_negative_fill"])
