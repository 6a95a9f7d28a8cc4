#pragma once
// How one matmul maps onto matrix products, shared by its shape rule (src/ir/ops/matmul.cpp) and
// the kernels of every backend (src/interp/kernels/matmul.cpp, src/vk/kernels/matmul.cpp), so the
// rule and the kernels cannot disagree about which rows meet which columns.
//
// torch.matmul's semantics: a 1-D lhs [K] is a row [1, K] and a 1-D rhs [K] a column [K, 1], the
// promoted dim dropped from the result; every dim before the last two is a batch dim, and the two
// operands' batch dims broadcast by NumPy's rules (right-aligned, a missing dim or a dim of 1
// repeats). [2, 1, 3, 4] x [5, 4, 6] -> [2, 5, 3, 6]; [K] x [K] -> [] (a dot product).
//
// A kernel then runs `batches` products C[M, N] = A[M, K] B[K, N], one per output batch in
// row-major order (C's batch b starts at b * M * N). Batch b's A starts at sum_g i_g *
// groups[g].lhs_stride, where i_g is b's index in group g (b decomposed over the group extents,
// outermost first), and likewise its B: a broadcast dim has stride 0. Batch dims whose strides
// continue one another are merged into one group, so an equal-batch product has a single group
// and [2, 1, 3, 4] x [5, 4, 6] has two ({2, 12, 0}, {5, 0, 24}).
#include <cstdint>
#include <vector>

#include "tensorgrad/ir/shape.h"

namespace tg {

struct MatmulLayout {
  struct Group {
    std::int64_t extent = 1;
    std::int64_t lhs_stride = 0;  // elements of A between consecutive indices of this group
    std::int64_t rhs_stride = 0;  // the same for B; 0 where that operand broadcasts
  };
  Shape out;  // the result's shape
  std::int64_t m = 0, k = 0, n = 0;
  std::int64_t batches = 1;  // products to run (0 when a batch dim is 0)
  // The rhs has no batch dim above 1: the lhs's batch dims fold into its rows (m counts them all,
  // batches = 1, no groups), one product with a shared B, as for [..., M, K] x [K, N].
  bool folded = false;
  bool broadcast = false;     // some batch dim of one operand repeats (a 0 stride in `groups`)
  std::vector<Group> groups;  // outermost first; empty when folded or without batches
};

// The layout of lhs x rhs; rule_broken() (RuleBroken) names the operand, its shape and the dim when
// the shapes do not multiply: a 0-d operand, different K, or batch dims that do not broadcast.
MatmulLayout matmul_layout(const Shape& lhs, const Shape& rhs);

}  // namespace tg
