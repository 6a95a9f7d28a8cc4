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

}  // namespace tg::golden
