"""Golden cases of the matmul family (torch.matmul's semantics): [..., M, K] x [K, N], batched
[..., M, K] x [..., K, N] with batch dims equal or broadcasting, and 1-D operands.

Every call is the op itself (no entry in tests/golden/calls_*.cpp): inputs (a, b), no attributes.
"""

import torch

from goldens.spec import Case, f32, sixteen_bit_variants

CASES = [
    Case("matmul_2d", "matmul", {}, {"a": f32([3, 4]), "b": f32([4, 5])}, torch.matmul),
    Case("matmul_lhs_leading_dims", "matmul", {}, {"a": f32([2, 3, 4]), "b": f32([4, 5])}, torch.matmul),
    Case("matmul_two_leading_dims", "matmul", {}, {"a": f32([2, 3, 2, 4]), "b": f32([4, 3])}, torch.matmul),
    Case("matmul_batched", "matmul", {}, {"a": f32([2, 3, 4]), "b": f32([2, 4, 2])}, torch.matmul),
    Case("matmul_batched_rank4", "matmul", {}, {"a": f32([2, 2, 3, 4]), "b": f32([2, 2, 4, 3])}, torch.matmul),
    Case("matmul_long_inner", "matmul", {}, {"a": f32([2, 256]), "b": f32([256, 3])}, torch.matmul),
    Case("matmul_vector_shapes", "matmul", {}, {"a": f32([1, 6]), "b": f32([6, 1])}, torch.matmul),
    # Batch dims that broadcast: torch's own example, a shared 2-D lhs, a batch dim of 1 per side,
    # and an rhs batch of 1s; the gradients sum over the repeated dims.
    Case("matmul_broadcast_both", "matmul", {}, {"a": f32([2, 1, 3, 4]), "b": f32([5, 4, 2])}, torch.matmul),
    Case("matmul_broadcast_2d_lhs", "matmul", {}, {"a": f32([3, 4]), "b": f32([2, 4, 5])}, torch.matmul),
    Case("matmul_broadcast_ones", "matmul", {}, {"a": f32([1, 3, 3, 4]), "b": f32([2, 1, 4, 2])}, torch.matmul),
    Case("matmul_broadcast_rhs_ones", "matmul", {}, {"a": f32([2, 3, 4]), "b": f32([1, 1, 4, 3])}, torch.matmul),
    # 1-D operands: promoted to a row (lhs) or a column (rhs), that dim dropped from the result.
    Case("matmul_dot", "matmul", {}, {"a": f32([6]), "b": f32([6])}, torch.matmul),
    Case("matmul_vector_matrix", "matmul", {}, {"a": f32([4]), "b": f32([4, 3])}, torch.matmul),
    Case("matmul_matrix_vector", "matmul", {}, {"a": f32([3, 4]), "b": f32([4])}, torch.matmul),
    Case("matmul_batched_vector", "matmul", {}, {"a": f32([2, 3, 4]), "b": f32([4])}, torch.matmul),
    Case("matmul_vector_batched", "matmul", {}, {"a": f32([4]), "b": f32([2, 4, 3])}, torch.matmul),
]

# The 16-bit goldens (f16 and bf16 variants; goldens/spec.py, in_16bit).
BF16_MATMUL = ("PyTorch 1.13's CPU bfloat16 matmul rounds partial sums to bfloat16: in these cases up to 39 ulp "
               "from the product rounded once")
MATMUL_16 = ["matmul_2d", "matmul_batched", "matmul_long_inner", "matmul_broadcast_both", "matmul_dot",
             "matmul_matrix_vector"]
CASES += sixteen_bit_variants(CASES, MATMUL_16, via_f32={name: {"bf16": BF16_MATMUL} for name in MATMUL_16})
