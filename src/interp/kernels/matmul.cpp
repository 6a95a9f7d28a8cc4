// matmul (torch.matmul's semantics, src/ir/ops/matmul_layout.h): with an rhs that has no batch
// every lhs batch dim folds into the rows of one product; otherwise one product per output batch,
// each operand's matrix found through the layout's batch groups (stride 0 where it broadcasts).
// Each product runs on the blocked, register-tiled kernel of gemm.h, parallel over (batch, row
// block, column block) tiles, each written by one task. Every output element accumulates its K
// products in ascending k into a single accumulator, so the bits are those of the plain triple loop
// whatever the blocking or the thread count.
#include "tensorgrad/ir/ops/ids/matmul.h"

#include <algorithm>
#include <utility>

#include "../parallel.h"
#include "families.h"
#include "gemm.h"
#include "ir/ops/matmul_layout.h"
#include "tensorgrad/ir/launch_paths.h"

namespace tg::interp {

namespace {

constexpr std::int64_t kRowBlock = kGemmRowBlock;  // rows of C per task
constexpr std::int64_t kColBlock = kGemmColBlock;  // columns of C per task
constexpr std::int64_t kDepthBlock = kGemmDepthBlock;
constexpr std::int64_t kMicroRows = kGemmMicroRows;
constexpr bool kHaveVectors = kGemmHaveVectors;
template <class T>
constexpr std::int64_t kMicroCols = kGemmMicroCols<T>;
constexpr std::int64_t kTaskFlops = 1 << 16;  // fewer multiply-adds than this run in one task

const SizeThreshold kRowBlockThreshold("interp", "matmul", "row block", kRowBlock);
const SizeThreshold kColBlockThreshold("interp", "matmul", "column block", kColBlock);
const SizeThreshold kDepthBlockThreshold("interp", "matmul", "depth block", kDepthBlock);
const SizeThreshold kMicroRowsThreshold("interp", "matmul", "micro tile rows", kMicroRows);
const SizeThreshold kMicroColsF32Threshold("interp", "matmul", "micro tile columns (f32)", kMicroCols<float>);
const SizeThreshold kMicroColsF64Threshold("interp", "matmul", "micro tile columns (f64)", kMicroCols<double>);
const SizeThreshold kTaskFlopsThreshold("interp", "matmul", "task multiply-adds", kTaskFlops);

// Leading lhs dims folded into M (an rhs without batch dims above 1), batches paired up, or batches
// where an operand repeats along a broadcast dim; a call also takes every gemm_block
// branch its extents reach: register micro tiles, edge columns beside them, edge rows below
// them, and more than one K block accumulated into C.
const LaunchPath kFoldedRows("interp", "matmul", "folded_rows");
const LaunchPath kBatched("interp", "matmul", "batched");
const LaunchPath kBroadcastBatches("interp", "matmul", "broadcast_batches");
const LaunchPath kMicroTiles("interp", "matmul", "micro_tiles");
const LaunchPath kEdgeColumns("interp", "matmul", "edge_columns");
const LaunchPath kEdgeRows("interp", "matmul", "edge_rows");
const LaunchPath kDepthBlocks("interp", "matmul", "depth_blocks");

// The offsets of batch `batch`'s lhs and rhs matrices: its index decomposed over the groups.
std::pair<std::int64_t, std::int64_t> batch_offsets(const MatmulLayout& layout, std::int64_t batch) {
  std::int64_t a = 0;
  std::int64_t b = 0;
  for (auto g = layout.groups.rbegin(); g != layout.groups.rend(); ++g) {
    const std::int64_t i = batch % g->extent;
    batch /= g->extent;
    a += i * g->lhs_stride;
    b += i * g->rhs_stride;
  }
  return {a, b};
}

template <class T>
void matmul_kernel(const KernelCall<T>& call) {
  const MatmulLayout layout = matmul_layout(call.in_type(0).shape, call.in_type(1).shape);
  const std::int64_t m = layout.m;
  const std::int64_t k = layout.k;
  const std::int64_t n = layout.n;
  const std::int64_t batches = layout.batches;
  if (k == 0) {  // empty sums: C is all zeros
    std::fill(call.output.real.begin(), call.output.real.end(), T(0));
    return;
  }
  const T* a = call.real(0).data();
  const T* b = call.real(1).data();
  T* c = call.output.real.data();
  if (m * n * batches == 0) return;  // no outputs (a zero dim: no named path)
  (layout.folded ? kFoldedRows : layout.broadcast ? kBroadcastBatches : kBatched).hit();
  // Blocks are multiples of the micro tile, so the branches depend on m and n alone.
  const bool micro_rows = kHaveVectors && m >= kMicroRows;
  if (micro_rows && n >= kMicroCols<T>) kMicroTiles.hit();
  if (micro_rows && n % kMicroCols<T> != 0) kEdgeColumns.hit();
  if (!kHaveVectors || m % kMicroRows != 0) kEdgeRows.hit();
  if (k > kDepthBlock) kDepthBlocks.hit();

  const std::int64_t row_blocks = (m + kRowBlock - 1) / kRowBlock;
  const std::int64_t col_blocks = (n + kColBlock - 1) / kColBlock;
  const std::int64_t tasks = batches * row_blocks * col_blocks;
  const std::int64_t task_flops = std::min(m, kRowBlock) * std::min(n, kColBlock) * k;
  const std::int64_t grain = std::max<std::int64_t>(1, kTaskFlops / std::max<std::int64_t>(task_flops, 1));
  parallel_chunks(tasks, grain, [&](std::int64_t t0, std::int64_t t1) {
    for (std::int64_t t = t0; t < t1; ++t) {
      const std::int64_t batch = t / (row_blocks * col_blocks);
      const std::int64_t row_block = (t / col_blocks) % row_blocks;
      const std::int64_t col_block = t % col_blocks;
      const auto [a_offset, b_offset] = batch_offsets(layout, batch);
      const GemmView<T> g{a + a_offset, b + b_offset, c + batch * m * n, m, n, k, k, n, n};
      const std::int64_t i0 = row_block * kRowBlock;
      const std::int64_t j0 = col_block * kColBlock;
      gemm_block(g, i0, std::min(m, i0 + kRowBlock), j0, std::min(n, j0 + kColBlock), false);
    }
  });
}

}  // namespace

template <class T>
void register_matmul_kernels(KernelTable<T>& table) {
  table[static_cast<std::size_t>(op::Matmul)] = matmul_kernel<T>;
}

template void register_matmul_kernels<float>(KernelTable<float>&);
template void register_matmul_kernels<double>(KernelTable<double>&);

}  // namespace tg::interp
