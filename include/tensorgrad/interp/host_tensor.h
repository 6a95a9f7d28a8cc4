#pragma once
// Host-side tensor values passed into and out of backends. Elements are stored as doubles whatever
// the dtype: i32 values are exact in a double and bools are 0 or 1, so one type carries the oracle's
// f64 results and the f32 backends' results alike.
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "tensorgrad/ir/graph.h"
#include "tensorgrad/ir/shape.h"

namespace tg {

struct HostTensor {
  TensorType type;
  std::vector<double> values;

  static HostTensor f32(Shape shape, const std::vector<float>& data);
  static HostTensor i32(Shape shape, const std::vector<std::int32_t>& data);
  static HostTensor of(TensorType type, std::vector<double> data);  // checks the element count
  static HostTensor filled(TensorType type, double value);
  std::int64_t size() const { return static_cast<std::int64_t>(values.size()); }
  double at(std::int64_t i) const { return values[static_cast<std::size_t>(i)]; }  // element i as a double
  std::vector<double> to_f64() const { return values; }
  std::vector<float> to_f32() const;
  std::vector<std::int32_t> to_i32() const;
  friend bool operator==(const HostTensor&, const HostTensor&) = default;
};

using TensorMap = std::map<std::string, HostTensor, std::less<>>;

// The input checks every backend makes before a run: no unknown names, no missing input, each of
// its graph type, i32 values integral and in range, bool values 0 or 1. Throws RuntimeError naming
// the input, what was expected and what came.
void validate_inputs(const Graph& graph, const TensorMap& inputs);
// The same checks, but only the inputs for which `required` holds must be present (a backend that
// keeps params and state resident takes only the data inputs on each run).
void validate_inputs(const Graph& graph, const TensorMap& inputs,
                     const std::function<bool(const GraphInput&)>& required);

}  // namespace tg
