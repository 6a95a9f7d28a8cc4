#pragma once
// The f32 interpreter's softmax and log_softmax over contiguous rows (the last axis), vectorized
// (AVX2 when the CPU has it, else the baseline x86-64 build's SSE2, which GCC lowers poorly: about
// 8x the AVX2 time, 1.7x a scalar expf loop, on the development VM).
//
// Precision: fp32 inputs, fp32 arithmetic. exp is computed by range reduction (x = n ln2 + r,
// |r| <= ln2/2) and a degree-7 polynomial, within 1.25 ulp of the exact exp over the softmax domain
// (x - max <= 0, including the subnormal results; measured over every such f32 input: 1.22 ulp,
// 1 ulp from expf); the row sum is accumulated in 8 interleaved fp32 lanes,
// each a pairwise tree as tree_sum.h's (leaves of 8 of its terms), the lanes then added pairwise:
// at most about 7 + 2 log2(n / 64) + 4 roundings (2^24 terms: within 7.2e-8 relative measured,
// where 8 sequential lanes were off by 1.6e-2). The order depends only on the row length, so
// results do not depend on the thread count or the build. The f64 oracle keeps its own
// sequential std::exp path.
#include <cstdint>

namespace tg::interp {

// y[r, :] = softmax(x[r, :]) (or log_softmax when `log`) for rows [first, last) of `length`.
void softmax_rows_f32(const float* x, float* y, std::int64_t first, std::int64_t last, std::int64_t length, bool log);
// The same without AVX2 (what a CPU without it runs); the same bits as softmax_rows_f32.
void softmax_rows_f32_baseline(const float* x, float* y, std::int64_t first, std::int64_t last, std::int64_t length,
                               bool log);

// The row kernel's exp for x <= 0 (NaN stays NaN, below -104 gives 0), element by element, as the
// dispatched build computes it: exposed so tests can measure its accuracy (promise_fast_exp_test).
void exp_nonpositive_f32(const float* x, float* y, std::int64_t n);

}  // namespace tg::interp
