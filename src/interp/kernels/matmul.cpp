// matmul (torch.matmul's semantics, src/ir/ops/matmul_layout.h): with an rhs that has no batch
// every lhs batch dim folds into the rows of one product; otherwise one product per output batch,
// each operand's matrix found through the layout's batch groups (stride 0 where it broadcasts).
// Blocked for cache with a register-tiled inner kernel (AVX2 for f32 where the CPU has it, else
// SSE2-sized vectors) reading B's block packed into contiguous strips; parallel over (batch, row
// block, column block) tiles, each written by one task. Every output element accumulates its K products in
// ascending k into a single accumulator, so the bits are those of the plain triple loop whatever
// the blocking or the thread count.
#include "tensorgrad/ir/ops/ids/matmul.h"

#include <algorithm>
#include <cstring>
#include <type_traits>
#include <utility>

#include "../parallel.h"
#include "families.h"
#include "ir/ops/matmul_layout.h"
#include "tensorgrad/ir/launch_paths.h"

namespace tg::interp {

namespace {

constexpr std::int64_t kRowBlock = 64;   // rows of C per task
constexpr std::int64_t kColBlock = 128;  // columns of C per task (the B panel stays in cache)
constexpr std::int64_t kDepthBlock = 128;
constexpr std::int64_t kMicroRows = 4;
constexpr std::int64_t kMicroBytes = 64;      // C columns per micro tile row: 16 floats, 8 doubles
constexpr std::int64_t kTaskFlops = 1 << 16;  // fewer multiply-adds than this run in one task

// Row-major operand views of one matrix product C[M,N] = A[M,K] B[K,N].
template <class T>
struct Gemm {
  const T* a;
  const T* b;
  T* c;
  std::int64_t m, n, k;
};

#if defined(__GNUC__)
// GCC/Clang vector extensions: the auto-vectorizer picks the k loop of the micro kernel (needing
// shuffles) and runs ~4x slower. Lane-wise multiply then add rounds exactly as the scalar loop.
// The micro tile is 64 bytes of C columns per row, as four 16-byte (SSE2, every x86-64) or two
// 32-byte vectors (x86-64 with AVX2, chosen at run time for f32): 8 accumulators of 32 bytes fit AVX2's 16
// registers with the B row and the broadcast A element. AVX2 without FMA: a fused multiply-add
// would round once where the scalar loop rounds twice, so the bits stay the plain loop's.
constexpr bool kHaveVectors = true;
template <class T, int kBytes>
struct Simd {
  typedef T type __attribute__((vector_size(kBytes)));
  static constexpr std::int64_t width = kBytes / sizeof(T);
};
template <class T>
constexpr std::int64_t kMicroCols = kMicroBytes / sizeof(T);

// C[i0:i0+R, j0:j0+kMicroCols] += A[i0:i0+R, k0:k1] B[k0:k1, j0:...], accumulators in registers;
// B's rows for these columns read from `b_strip` (kMicroCols values per k, packed contiguously).
// Always inlined, so the AVX2 caller compiles it for AVX2.
template <class T, int kBytes>
[[gnu::always_inline]] inline void micro_kernel(const Gemm<T>& g, const T* b_strip, std::int64_t i0, std::int64_t j0,
                                                std::int64_t k0, std::int64_t k1) {
  using Vec = typename Simd<T, kBytes>::type;
  constexpr std::int64_t kWidth = Simd<T, kBytes>::width;
  constexpr std::int64_t kVectors = kMicroCols<T> / kWidth;
  Vec acc[kMicroRows][kVectors];
  for (std::int64_t r = 0; r < kMicroRows; ++r)
    for (std::int64_t v = 0; v < kVectors; ++v)
      std::memcpy(&acc[r][v], g.c + (i0 + r) * g.n + j0 + v * kWidth, sizeof(Vec));
  const T* a_rows = g.a + i0 * g.k;
  for (std::int64_t k = k0; k < k1; ++k) {
    const T* b_row = b_strip + (k - k0) * kMicroCols<T>;
    Vec b[kVectors];
    for (std::int64_t v = 0; v < kVectors; ++v) std::memcpy(&b[v], b_row + v * kWidth, sizeof(Vec));
    for (std::int64_t r = 0; r < kMicroRows; ++r) {
      const T a = a_rows[r * g.k + k];
      for (std::int64_t v = 0; v < kVectors; ++v) acc[r][v] += a * b[v];
    }
  }
  for (std::int64_t r = 0; r < kMicroRows; ++r)
    for (std::int64_t v = 0; v < kVectors; ++v)
      std::memcpy(g.c + (i0 + r) * g.n + j0 + v * kWidth, &acc[r][v], sizeof(Vec));
}
#else
constexpr bool kHaveVectors = false;  // every tile takes the scalar edge kernel
template <class T>
constexpr std::int64_t kMicroCols = 1;
template <class T, int kBytes>
void micro_kernel(const Gemm<T>&, const T*, std::int64_t, std::int64_t, std::int64_t, std::int64_t) {}
#endif

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

// The same for the ragged edges of a block, with run-time extents.
template <class T>
[[gnu::always_inline]] inline void edge_kernel(const Gemm<T>& g, std::int64_t i0, std::int64_t rows, std::int64_t j0,
                                               std::int64_t cols, std::int64_t k0, std::int64_t k1) {
  for (std::int64_t r = 0; r < rows; ++r) {
    T* c_row = g.c + (i0 + r) * g.n + j0;
    for (std::int64_t k = k0; k < k1; ++k) {
      const T a = g.a[(i0 + r) * g.k + k];
      const T* b_row = g.b + k * g.n + j0;
      for (std::int64_t c = 0; c < cols; ++c) c_row[c] += a * b_row[c];
    }
  }
}

// B[k0:k1, j0:j0 + strips * kMicroCols] copied strip by strip (kMicroCols columns, all k, then the
// next strip), so the micro kernel reads consecutive memory: rows of B a power of two apart (n =
// 1024, 2048) otherwise share a few L1 sets and evict each other.
template <class T>
[[gnu::always_inline]] inline void pack_b(const Gemm<T>& g, T* packed, std::int64_t strips, std::int64_t j0,
                                          std::int64_t k0, std::int64_t k1) {
  for (std::int64_t s = 0; s < strips; ++s) {
    T* out = packed + s * (k1 - k0) * kMicroCols<T>;
    for (std::int64_t k = k0; k < k1; ++k, out += kMicroCols<T>) {
      std::memcpy(out, g.b + k * g.n + j0 + s * kMicroCols<T>, sizeof(T) * kMicroCols<T>);
    }
  }
}

// One task: the C block [i0, i1) x [j0, j1), zeroed and then accumulated over K blocks in order.
// Packing moves data only: every output still adds its products in ascending k.
template <class T, int kBytes>
[[gnu::always_inline]] inline void gemm_block(const Gemm<T>& g, std::int64_t i0, std::int64_t i1, std::int64_t j0,
                                              std::int64_t j1) {
  alignas(64) thread_local T packed[kDepthBlock * kColBlock];
  for (std::int64_t i = i0; i < i1; ++i) std::fill(g.c + i * g.n + j0, g.c + i * g.n + j1, T(0));
  const std::int64_t strips = kHaveVectors && i1 - i0 >= kMicroRows ? (j1 - j0) / kMicroCols<T> : 0;
  for (std::int64_t k0 = 0; k0 < g.k; k0 += kDepthBlock) {
    const std::int64_t k1 = std::min(g.k, k0 + kDepthBlock);
    if (strips > 0) pack_b(g, packed, strips, j0, k0, k1);
    std::int64_t i = i0;
    for (; kHaveVectors && i + kMicroRows <= i1; i += kMicroRows) {
      std::int64_t j = j0;
      for (std::int64_t s = 0; s < strips; ++s, j += kMicroCols<T>) {
        micro_kernel<T, kBytes>(g, packed + s * (k1 - k0) * kMicroCols<T>, i, j, k0, k1);
      }
      if (j < j1) edge_kernel(g, i, kMicroRows, j, j1 - j, k0, k1);
    }
    if (i < i1) edge_kernel(g, i, i1 - i, j0, j1 - j0, k0, k1);
  }
}

template <class T>
void gemm_block_baseline(const Gemm<T>& g, std::int64_t i0, std::int64_t i1, std::int64_t j0, std::int64_t j1) {
  gemm_block<T, 16>(g, i0, i1, j0, j1);
}

#if defined(__GNUC__) && defined(__x86_64__)
// The f32 blocks for CPUs with AVX2 (avx2 implies avx, not fma: no contraction into fused
// multiply-adds, see above).
[[gnu::target("avx2")]] void gemm_block_avx2(const Gemm<float>& g, std::int64_t i0, std::int64_t i1, std::int64_t j0,
                                             std::int64_t j1) {
  gemm_block<float, 32>(g, i0, i1, j0, j1);
}
bool use_avx2() {
  static const bool supported = __builtin_cpu_supports("avx2");
  return supported;
}
#else
void gemm_block_avx2(const Gemm<float>& g, std::int64_t i0, std::int64_t i1, std::int64_t j0, std::int64_t j1) {
  gemm_block_baseline(g, i0, i1, j0, j1);
}
bool use_avx2() { return false; }
#endif

// The block function for T on this CPU.
template <class T>
auto block_function() {
  if constexpr (std::is_same_v<T, float>) {
    if (use_avx2()) return &gemm_block_avx2;
  }
  return &gemm_block_baseline<T>;
}

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
  const auto block = block_function<T>();
  parallel_chunks(tasks, grain, [&](std::int64_t t0, std::int64_t t1) {
    for (std::int64_t t = t0; t < t1; ++t) {
      const std::int64_t batch = t / (row_blocks * col_blocks);
      const std::int64_t row_block = (t / col_blocks) % row_blocks;
      const std::int64_t col_block = t % col_blocks;
      const auto [a_offset, b_offset] = batch_offsets(layout, batch);
      const Gemm<T> g{a + a_offset, b + b_offset, c + batch * m * n, m, n, k};
      const std::int64_t i0 = row_block * kRowBlock;
      const std::int64_t j0 = col_block * kColBlock;
      block(g, i0, std::min(m, i0 + kRowBlock), j0, std::min(n, j0 + kColBlock));
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
