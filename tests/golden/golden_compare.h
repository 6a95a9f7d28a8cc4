#pragma once
// Element-by-element comparison of a backend's result with stored expected values, shared by the
// golden runner and the regression runner.
#include <optional>
#include <string>
#include <vector>

#include "support/library.h"

namespace tg::golden {

// The f64 interpreter against stored f64 values (PyTorch's, or the oracle's when a regression file
// was written): |got - expected| <= kF64Relative * (1 + scale). Both compute the same formulas in
// double; they differ only in summation order and libm rounding, ~1e-16 relative per operation.
inline constexpr double kF64Relative = 1e-9;

// Largest |v| over the tensors' finite values (0 when none).
double max_magnitude(const std::vector<const HostTensor*>& tensors);
double max_magnitude(const TensorMap& tensors);

// nullopt when `got` has `expected`'s type and every element is within `tolerance` (exactly equal
// for i32 and bool; NaN matches NaN and an infinity matches itself). Otherwise a message with the
// number of differing elements and the worst one: its flat and multi-dimensional index, the
// expected and the computed value, the difference and the tolerance.
std::optional<std::string> compare_tensors(const HostTensor& expected, const HostTensor& got, double tolerance);

std::string format_number(double v);  // 17 significant digits

// ---- 16-bit goldens (docs/testing.md, "2026-11-28: 16-bit goldens") ------------------------------
// PyTorch's f16/bf16 result is its f32-internal result rounded once to the dtype; the oracle's is
// its f64 result rounded once. Rounding to nearest is monotone and moves a value by at most half an
// ulp, so two values a and b round to results at most |a - b| + 1 ulp apart: 1 ulp of the dtype
// where a rounding boundary falls between them, plus PyTorch's f32 arithmetic error. That error is
// bounded as our own f32 run's is (f32_arithmetic_tolerance times the oracle's scale). Our f32 run
// carries the same error once more, so it gets twice the arithmetic part.

// The spacing of the 16-bit dtype's values at magnitude |v|: 2^(e - 10) for f16, 2^(e - 7) for
// bf16, e = floor(log2 |v|), and the subnormal spacing (2^-24, 2^-133) below the normals.
double ulp_of(DType dtype, double v);

// graph_tolerance(g) without its 16-bit rounding-flip allowance: 4 eps_f32 times the sum of the
// nodes' tolerance_ulps (at least 1), the bound of g's arithmetic in f32 relative to the scale.
double f32_arithmetic_tolerance(const Graph& g);

// As compare_tensors, with element i allowed ulp_of(dtype, max(|expected|, |got|)) + `arithmetic`.
std::optional<std::string> compare_16bit(const HostTensor& expected, const HostTensor& got, double arithmetic);

// Bit for bit: equal values with equal signs (-0 is not +0), a NaN matching a NaN (casts).
std::optional<std::string> compare_bits(const HostTensor& expected, const HostTensor& got);

}  // namespace tg::golden
