#pragma once
// The interpreter's blocked matrix product, shared by matmul (src/interp/kernels/matmul.cpp) and
// the f32 convolutions (conv_gemm.cpp): C[M,N] = A[M,K] B[K,N] (or C += A B) on row-major operands
// with leading dimensions, so a product can read and write sub-matrices of larger arrays in place.
//
// Blocked for cache with a register-tiled micro kernel (AVX2 for f32 where the CPU has it, else
// SSE2-sized vectors) reading B's block packed into contiguous strips. Every C element adds its K
// products in ascending k into one accumulator, which starts at 0 (overwrite) or at C's value
// (accumulate): the bits are the plain loop's `for k: c += a[i][k] * b[k][j]` whatever the
// blocking, and an accumulated product continues that loop exactly (two calls over K = [0, k1)
// and [k1, K) give the bits of one call over [0, K)). No fused multiply-adds, unless the view asks
// for them (`fused`: the f32 convolutions, on CPUs with FMA): the same order, each product added
// with one rounding instead of two, twice the multiply-add rate.
#include <cstdint>

namespace tg::interp {

inline constexpr std::int64_t kGemmRowBlock = 64;     // rows of C per block (matmul: per task)
inline constexpr std::int64_t kGemmColBlock = 128;    // columns of C per block (the B panel stays in cache)
inline constexpr std::int64_t kGemmDepthBlock = 128;  // K per packed B block
inline constexpr std::int64_t kGemmMicroRows = 4;
inline constexpr std::int64_t kGemmMicroBytes = 64;  // C columns per micro tile row: 16 floats, 8 doubles
#if defined(__GNUC__)
inline constexpr bool kGemmHaveVectors = true;
template <class T>
inline constexpr std::int64_t kGemmMicroCols = kGemmMicroBytes / sizeof(T);
#else
inline constexpr bool kGemmHaveVectors = false;  // every tile takes the scalar edge kernel
template <class T>
inline constexpr std::int64_t kGemmMicroCols = 1;
#endif

// Row-major views: element (i, j) of A is a[i * lda + j], of B b[i * ldb + j], of C c[i * ldc + j].
template <class T>
struct GemmView {
  const T* a;
  const T* b;
  T* c;
  std::int64_t m, n, k;
  std::int64_t lda, ldb, ldc;
  bool fused = false;  // f32 on a CPU with AVX2 and FMA: c += a * b as one fused multiply-add
};

// The C block [i0, i1) x [j0, j1) on the calling thread.
template <class T>
void gemm_block(const GemmView<T>& g, std::int64_t i0, std::int64_t i1, std::int64_t j0, std::int64_t j1,
                bool accumulate);

// The whole of C on the calling thread, block by block.
template <class T>
void gemm_serial(const GemmView<T>& g, bool accumulate);

}  // namespace tg::interp
