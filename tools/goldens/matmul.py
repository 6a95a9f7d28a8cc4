"""Golden cases of the matmul family: [..., M, K] x [K, N] and batched [..., M, K] x [..., K, N].

Every call is the op itself (no entry in tests/golden/calls_*.cpp): inputs (a, b), no attributes.
"""

import torch

from goldens.spec import Case, f32

CASES = [
    Case("matmul_2d", "matmul", {}, {"a": f32([3, 4]), "b": f32([4, 5])}, torch.matmul),
    Case("matmul_lhs_leading_dims", "matmul", {}, {"a": f32([2, 3, 4]), "b": f32([4, 5])}, torch.matmul),
    Case("matmul_two_leading_dims", "matmul", {}, {"a": f32([2, 3, 2, 4]), "b": f32([4, 3])}, torch.matmul),
    Case("matmul_batched", "matmul", {}, {"a": f32([2, 3, 4]), "b": f32([2, 4, 2])}, torch.matmul),
    Case("matmul_batched_rank4", "matmul", {}, {"a": f32([2, 2, 3, 4]), "b": f32([2, 2, 4, 3])}, torch.matmul),
    Case("matmul_long_inner", "matmul", {}, {"a": f32([2, 256]), "b": f32([256, 3])}, torch.matmul),
    Case("matmul_vector_shapes", "matmul", {}, {"a": f32([1, 6]), "b": f32([6, 1])}, torch.matmul),
]
