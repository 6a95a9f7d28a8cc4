#pragma once
// The f32 interpreter's softmax and log_softmax over contiguous rows (the last axis), vectorized
// (AVX2 when the CPU has it, else the baseline x86-64 build's SSE2, which GCC lowers poorly: about
// 8x the AVX2 time, 1.7x a scalar expf loop, on the development VM).
//
// Precision: fp32 inputs, fp32 arithmetic. exp is computed by range reduction (x = n ln2 + r,
// |r| <= ln2/2) and a degree-7 polynomial, within 2 ulp of expf over the softmax domain (x - max
// <= 0, including the subnormal results); the row sum is accumulated in 8 interleaved fp32
// partial sums, added in a fixed order, so results do not depend on the thread count. The f64
// oracle keeps its own sequential std::exp path.
#include <cstdint>

namespace tg::interp {

// y[r, :] = softmax(x[r, :]) (or log_softmax when `log`) for rows [first, last) of `length`.
void softmax_rows_f32(const float* x, float* y, std::int64_t first, std::int64_t last, std::int64_t length, bool log);
// The same without AVX2 (what a CPU without it runs); the same bits as softmax_rows_f32.
void softmax_rows_f32_baseline(const float* x, float* y, std::int64_t first, std::int64_t last, std::int64_t length,
                               bool log);

}  // namespace tg::interp
