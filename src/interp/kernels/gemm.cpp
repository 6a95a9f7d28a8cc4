// The blocked matrix product of gemm.h. Packing and blocking move data only: every C element still
// adds its products in ascending k into a single accumulator, so the bits are the plain loop's.
#include "gemm.h"

#include <algorithm>
#include <cstring>
#include <type_traits>

#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
#endif

namespace tg::interp {

namespace {

constexpr std::int64_t kMicroRows = kGemmMicroRows;
constexpr std::int64_t kColBlock = kGemmColBlock;
constexpr std::int64_t kDepthBlock = kGemmDepthBlock;
constexpr bool kHaveVectors = kGemmHaveVectors;
template <class T>
constexpr std::int64_t kMicroCols = kGemmMicroCols<T>;

#if defined(__GNUC__)
// GCC/Clang vector extensions: the auto-vectorizer picks the k loop of the micro kernel (needing
// shuffles) and runs ~4x slower. Lane-wise multiply then add rounds exactly as the scalar loop.
// The micro tile is 64 bytes of C columns per row, as four 16-byte (SSE2, every x86-64) or two
// 32-byte vectors (x86-64 with AVX2, chosen at run time for f32): 8 accumulators of 32 bytes fit AVX2's 16
// registers with the B row and the broadcast A element. AVX2 without FMA: a fused multiply-add
// would round once where the scalar loop rounds twice, so the bits stay the plain loop's.
template <class T, int kBytes>
struct Simd {
  typedef T type __attribute__((vector_size(kBytes)));
  static constexpr std::int64_t width = kBytes / sizeof(T);
};

// C[i0:i0+R, j0:j0+kMicroCols] += A[i0:i0+R, k0:k1] B[k0:k1, j0:...], accumulators in registers;
// B's rows for these columns read from `b_strip` (kMicroCols values per k, packed contiguously).
// Always inlined, so the AVX2 caller compiles it for AVX2.
template <class T, int kBytes>
[[gnu::always_inline]] inline void micro_kernel(const GemmView<T>& g, const T* b_strip, std::int64_t i0,
                                                std::int64_t j0, std::int64_t k0, std::int64_t k1) {
  using Vec = typename Simd<T, kBytes>::type;
  constexpr std::int64_t kWidth = Simd<T, kBytes>::width;
  constexpr std::int64_t kVectors = kMicroCols<T> / kWidth;
  Vec acc[kMicroRows][kVectors];
  for (std::int64_t r = 0; r < kMicroRows; ++r)
    for (std::int64_t v = 0; v < kVectors; ++v)
      std::memcpy(&acc[r][v], g.c + (i0 + r) * g.ldc + j0 + v * kWidth, sizeof(Vec));
  const T* a_rows = g.a + i0 * g.lda;
  for (std::int64_t k = k0; k < k1; ++k) {
    const T* b_row = b_strip + (k - k0) * kMicroCols<T>;
    Vec b[kVectors];
    for (std::int64_t v = 0; v < kVectors; ++v) std::memcpy(&b[v], b_row + v * kWidth, sizeof(Vec));
    for (std::int64_t r = 0; r < kMicroRows; ++r) {
      const T a = a_rows[r * g.lda + k];
      for (std::int64_t v = 0; v < kVectors; ++v) acc[r][v] += a * b[v];
    }
  }
  for (std::int64_t r = 0; r < kMicroRows; ++r)
    for (std::int64_t v = 0; v < kVectors; ++v)
      std::memcpy(g.c + (i0 + r) * g.ldc + j0 + v * kWidth, &acc[r][v], sizeof(Vec));
}
#else
template <class T, int kBytes>
void micro_kernel(const GemmView<T>&, const T*, std::int64_t, std::int64_t, std::int64_t, std::int64_t) {}
#endif

#if defined(__GNUC__) && defined(__x86_64__)
// micro_kernel with fused multiply-adds (GemmView::fused), f32 on AVX2 + FMA. Not inlined: a
// function compiled for FMA is called from the generic block code, once per micro tile and K block.
[[gnu::target("avx2,fma")]] void fused_micro_kernel(const GemmView<float>& g, const float* b_strip, std::int64_t i0,
                                                    std::int64_t j0, std::int64_t k0, std::int64_t k1) {
  static_assert(kMicroCols<float> == 16);
  __m256 acc[kMicroRows][2];
  for (std::int64_t r = 0; r < kMicroRows; ++r)
    for (std::int64_t v = 0; v < 2; ++v) acc[r][v] = _mm256_loadu_ps(g.c + (i0 + r) * g.ldc + j0 + v * 8);
  const float* a_rows = g.a + i0 * g.lda;
  for (std::int64_t k = k0; k < k1; ++k) {
    const float* b_row = b_strip + (k - k0) * 16;
    const __m256 b0 = _mm256_loadu_ps(b_row);
    const __m256 b1 = _mm256_loadu_ps(b_row + 8);
    for (std::int64_t r = 0; r < kMicroRows; ++r) {
      const __m256 a = _mm256_set1_ps(a_rows[r * g.lda + k]);
      acc[r][0] = _mm256_fmadd_ps(a, b0, acc[r][0]);
      acc[r][1] = _mm256_fmadd_ps(a, b1, acc[r][1]);
    }
  }
  for (std::int64_t r = 0; r < kMicroRows; ++r)
    for (std::int64_t v = 0; v < 2; ++v) _mm256_storeu_ps(g.c + (i0 + r) * g.ldc + j0 + v * 8, acc[r][v]);
}
#else
void fused_micro_kernel(const GemmView<float>&, const float*, std::int64_t, std::int64_t, std::int64_t, std::int64_t) {}
#endif

// The same for the ragged edges of a block, with run-time extents.
template <class T>
[[gnu::always_inline]] inline void edge_kernel(const GemmView<T>& g, std::int64_t i0, std::int64_t rows,
                                               std::int64_t j0, std::int64_t cols, std::int64_t k0, std::int64_t k1) {
  for (std::int64_t r = 0; r < rows; ++r) {
    T* c_row = g.c + (i0 + r) * g.ldc + j0;
    for (std::int64_t k = k0; k < k1; ++k) {
      const T a = g.a[(i0 + r) * g.lda + k];
      const T* b_row = g.b + k * g.ldb + j0;
      for (std::int64_t c = 0; c < cols; ++c) c_row[c] += a * b_row[c];
    }
  }
}

// B[k0:k1, j0:j0 + strips * kMicroCols] copied strip by strip (kMicroCols columns, all k, then the
// next strip), so the micro kernel reads consecutive memory: rows of B a power of two apart (n =
// 1024, 2048) otherwise share a few L1 sets and evict each other.
template <class T>
[[gnu::always_inline]] inline void pack_b(const GemmView<T>& g, T* packed, std::int64_t strips, std::int64_t j0,
                                          std::int64_t k0, std::int64_t k1) {
  for (std::int64_t s = 0; s < strips; ++s) {
    T* out = packed + s * (k1 - k0) * kMicroCols<T>;
    for (std::int64_t k = k0; k < k1; ++k, out += kMicroCols<T>) {
      std::memcpy(out, g.b + k * g.ldb + j0 + s * kMicroCols<T>, sizeof(T) * kMicroCols<T>);
    }
  }
}

// The C block [i0, i1) x [j0, j1), zeroed unless accumulating, then accumulated over K blocks in
// order.
template <class T, int kBytes, bool Fused = false>
[[gnu::always_inline]] inline void block_kernel(const GemmView<T>& g, std::int64_t i0, std::int64_t i1, std::int64_t j0,
                                                std::int64_t j1, bool accumulate) {
  alignas(64) thread_local T packed[kDepthBlock * kColBlock];
  if (!accumulate) {
    for (std::int64_t i = i0; i < i1; ++i) std::fill(g.c + i * g.ldc + j0, g.c + i * g.ldc + j1, T(0));
  }
  const std::int64_t strips = kHaveVectors && i1 - i0 >= kMicroRows ? (j1 - j0) / kMicroCols<T> : 0;
  for (std::int64_t k0 = 0; k0 < g.k; k0 += kDepthBlock) {
    const std::int64_t k1 = std::min(g.k, k0 + kDepthBlock);
    if (strips > 0) pack_b(g, packed, strips, j0, k0, k1);
    std::int64_t i = i0;
    for (; kHaveVectors && i + kMicroRows <= i1; i += kMicroRows) {
      std::int64_t j = j0;
      for (std::int64_t s = 0; s < strips; ++s, j += kMicroCols<T>) {
        if constexpr (Fused) {
          fused_micro_kernel(g, packed + s * (k1 - k0) * kMicroCols<T>, i, j, k0, k1);
        } else {
          micro_kernel<T, kBytes>(g, packed + s * (k1 - k0) * kMicroCols<T>, i, j, k0, k1);
        }
      }
      if (j < j1) edge_kernel(g, i, kMicroRows, j, j1 - j, k0, k1);
    }
    if (i < i1) edge_kernel(g, i, i1 - i, j0, j1 - j0, k0, k1);
  }
}

template <class T>
void block_baseline(const GemmView<T>& g, std::int64_t i0, std::int64_t i1, std::int64_t j0, std::int64_t j1,
                    bool accumulate) {
  block_kernel<T, 16>(g, i0, i1, j0, j1, accumulate);
}

#if defined(__GNUC__) && defined(__x86_64__)
// The f32 blocks for CPUs with AVX2 (avx2 implies avx, not fma: no contraction into fused
// multiply-adds, see above).
[[gnu::target("avx2")]] void block_avx2(const GemmView<float>& g, std::int64_t i0, std::int64_t i1, std::int64_t j0,
                                        std::int64_t j1, bool accumulate) {
  block_kernel<float, 32>(g, i0, i1, j0, j1, accumulate);
}
bool use_avx2() {
  static const bool supported = __builtin_cpu_supports("avx2");
  return supported;
}
// The fused blocks (GemmView::fused) for CPUs with AVX2 and FMA.
[[gnu::target("avx2,fma")]] void block_avx2_fma(const GemmView<float>& g, std::int64_t i0, std::int64_t i1,
                                                std::int64_t j0, std::int64_t j1, bool accumulate) {
  block_kernel<float, 32, true>(g, i0, i1, j0, j1, accumulate);
}
bool use_fma() {
  static const bool supported = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return supported;
}
#else
void block_avx2_fma(const GemmView<float>& g, std::int64_t i0, std::int64_t i1, std::int64_t j0, std::int64_t j1,
                    bool accumulate) {
  block_baseline(g, i0, i1, j0, j1, accumulate);
}
bool use_fma() { return false; }
void block_avx2(const GemmView<float>& g, std::int64_t i0, std::int64_t i1, std::int64_t j0, std::int64_t j1,
                bool accumulate) {
  block_baseline(g, i0, i1, j0, j1, accumulate);
}
bool use_avx2() { return false; }
#endif

}  // namespace

template <class T>
void gemm_block(const GemmView<T>& g, std::int64_t i0, std::int64_t i1, std::int64_t j0, std::int64_t j1,
                bool accumulate) {
  if constexpr (std::is_same_v<T, float>) {
    if (g.fused && use_fma()) return block_avx2_fma(g, i0, i1, j0, j1, accumulate);
    if (use_avx2()) return block_avx2(g, i0, i1, j0, j1, accumulate);
  }
  block_baseline(g, i0, i1, j0, j1, accumulate);
}

template <class T>
void gemm_serial(const GemmView<T>& g, bool accumulate) {
  if (g.m <= 0 || g.n <= 0) return;
  for (std::int64_t j0 = 0; j0 < g.n; j0 += kGemmColBlock) {
    const std::int64_t j1 = std::min(g.n, j0 + kGemmColBlock);
    for (std::int64_t i0 = 0; i0 < g.m; i0 += kGemmRowBlock) {
      gemm_block(g, i0, std::min(g.m, i0 + kGemmRowBlock), j0, j1, accumulate);
    }
  }
}

template void gemm_block<float>(const GemmView<float>&, std::int64_t, std::int64_t, std::int64_t, std::int64_t, bool);
template void gemm_block<double>(const GemmView<double>&, std::int64_t, std::int64_t, std::int64_t, std::int64_t, bool);
template void gemm_serial<float>(const GemmView<float>&, bool);
template void gemm_serial<double>(const GemmView<double>&, bool);

}  // namespace tg::interp
