#include "golden_compare.h"

#include <cmath>
#include <sstream>

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

std::optional<std::string> compare_tensors(const HostTensor& expected, const HostTensor& got, double tolerance) {
  if (got.type != expected.type) {
    return "type " + got.type.to_string() + " where " + expected.type.to_string() + " was expected";
  }
  const bool exact = !is_float(expected.type.dtype);
  std::size_t bad = 0;
  std::size_t worst = 0;
  double worst_distance = -1;
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const double d = distance(expected.at(i), got.at(i));
    if (exact ? d == 0 : d <= tolerance) continue;
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
         format_number(worst_distance) + ", tolerance " + (exact ? std::string("exact") : format_number(tolerance)) +
         ")";
}

}  // namespace tg::golden
