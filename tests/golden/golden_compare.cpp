#include "golden_compare.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

#include "tensorgrad/ir/ops/op_def.h"

namespace tg::golden {

namespace {

std::string multi_index(const Shape& shape, std::size_t flat) {
  std::vector<std::int64_t> index(shape.size());
  for (std::size_t k = shape.size(); k-- > 0;) {
    const auto dim = static_cast<std::size_t>(shape[k]);
    index[k] = static_cast<std::int64_t>(flat % dim);
    flat /= dim;
  }
  std::string s = "[";
  for (std::size_t k = 0; k < index.size(); ++k) s += (k ? "," : "") + std::to_string(index[k]);
  return s + "]";
}

// How far `got` is from `expected`: 0 when equal (non-finite values included), infinity when one
// is finite and the other is not.
double distance(double expected, double got) {
  if (expected == got || (std::isnan(expected) && std::isnan(got))) return 0;
  if (!std::isfinite(expected) || !std::isfinite(got)) return INFINITY;
  return std::fabs(expected - got);
}

}  // namespace

std::string format_number(double v) {
  std::ostringstream out;
  out.precision(17);
  out << v;
  return out.str();
}

double max_magnitude(const std::vector<const HostTensor*>& tensors) {
  double m = 0;
  for (const HostTensor* t : tensors)
    for (const double v : t->to_f64())
      if (std::isfinite(v)) m = std::max(m, std::fabs(v));
  return m;
}

double max_magnitude(const TensorMap& tensors) {
  std::vector<const HostTensor*> all;
  for (const auto& [name, t] : tensors) all.push_back(&t);
  return max_magnitude(all);
}

namespace {

// The shared loop: element i passes when allowed(expected, got) holds; `tolerance` is what the
// message reports for the worst element.
template <typename Allowed, typename Tolerance>
std::optional<std::string> compare_each(const HostTensor& expected, const HostTensor& got, bool exact, Allowed allowed,
                                        Tolerance tolerance_at) {
  if (got.type != expected.type) {
    return "type " + got.type.to_string() + " where " + expected.type.to_string() + " was expected";
  }
  std::size_t bad = 0;
  std::size_t worst = 0;
  double worst_distance = -1;
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const double d = distance(expected.at(i), got.at(i));
    if (allowed(expected.at(i), got.at(i), d)) continue;
    ++bad;
    if (d > worst_distance) {
      worst_distance = d;
      worst = i;
    }
  }
  if (bad == 0) return std::nullopt;
  return std::to_string(bad) + " of " + std::to_string(expected.size()) + " elements differ; worst at [" +
         std::to_string(worst) + "] = index " + multi_index(expected.type.shape, worst) + ": expected " +
         format_number(expected.at(worst)) + ", got " + format_number(got.at(worst)) + " (difference " +
         format_number(worst_distance) + ", tolerance " +
         (exact ? std::string("exact") : format_number(tolerance_at(expected.at(worst), got.at(worst)))) + ")";
}

}  // namespace

std::optional<std::string> compare_tensors(const HostTensor& expected, const HostTensor& got, double tolerance) {
  const bool exact = !is_float(expected.type.dtype);
  return compare_each(
      expected, got, exact, [&](double, double, double d) { return exact ? d == 0 : d <= tolerance; },
      [&](double, double) { return tolerance; });
}

double ulp_of(DType dtype, double v) {
  const int significand_bits = dtype == DType::f16 ? 10 : 7;  // stored, after the leading 1
  const int min_exponent = dtype == DType::f16 ? -14 : -126;  // of the smallest normal
  int e = min_exponent + 1;  // 0 (frexp gives e = 0 there) and non-finite values: the subnormal spacing
  if (std::isfinite(v) && v != 0.0) (void)std::frexp(std::fabs(v), &e);  // |v| = m * 2^e, m in [0.5, 1)
  return std::ldexp(1.0, std::max(e - 1, min_exponent) - significand_bits);
}

double f32_arithmetic_tolerance(const Graph& g) {
  double ulps = 0;
  std::vector<TensorType> types;
  for (const Node& node : g.nodes()) {  // as tensorgrad/runtime/tolerance.cpp's node_ulps, less the 16-bit term
    const OpDef& def = op_def(node.op);
    types.clear();
    for (ValueId v : node.inputs) types.push_back(g.type(v));
    std::int64_t n = 1;
    if (def.reduction_length) {
      n = def.reduction_length(node.attrs, types);
    } else if (!types.empty() && g.type(node.output).size() > 0) {
      n = std::max<std::int64_t>(1, types[0].size() / g.type(node.output).size());
    }
    ulps += tolerance_ulps(def.tolerance, n);
  }
  return 4.0 * std::numeric_limits<float>::epsilon() * std::max(ulps, 1.0);
}

std::optional<std::string> compare_16bit(const HostTensor& expected, const HostTensor& got, double arithmetic) {
  const DType dtype = expected.type.dtype;
  const auto allowed_at = [&](double e, double g) {
    return ulp_of(dtype, std::max(std::fabs(e), std::isfinite(g) ? std::fabs(g) : 0.0)) + arithmetic;
  };
  return compare_each(
      expected, got, false, [&](double e, double g, double d) { return d <= allowed_at(e, g); }, allowed_at);
}

std::optional<std::string> compare_bits(const HostTensor& expected, const HostTensor& got) {
  return compare_each(
      expected, got, true,
      [](double e, double g, double) {
        return (std::isnan(e) && std::isnan(g)) || (e == g && std::signbit(e) == std::signbit(g));
      },
      [](double, double) { return 0.0; });
}

}  // namespace tg::golden
