#pragma once
// Shared by the structure family's unit tests (tests/unit/structure_test.cpp for its ops,
// structure_composites_test.cpp for the composites built from them): values of every dtype, index
// helpers, running a traced graph, and gradients through tg::differentiate.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "support/library.h"
#include "support/shape_error.h"

namespace tg::test::structure {

using tg::ComputeType;
using tg::DType;
using tg::HostTensor;
using tg::Shape;
using tg::Tensor;
using tg::TensorType;

inline constexpr ComputeType kComputeTypes[] = {ComputeType::f64, ComputeType::f32};
inline constexpr DType kAllDtypes[] = {DType::f32, DType::i32, DType::boolean};

// Distinct exactly representable values per dtype (bool in a period-3 pattern), offset by `salt` so
// two inputs of one graph differ.
inline std::vector<double> sample_values(DType dtype, std::int64_t n, int salt = 0) {
  std::vector<double> v(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) {
    const auto d = static_cast<double>(i + 100 * salt);
    v[static_cast<std::size_t>(i)] = dtype == DType::f32   ? d * 0.25 - 3.0
                                     : dtype == DType::i32 ? d * 7 - 20
                                                           : ((i + salt) % 3 == 0);
  }
  return v;
}

// Row-major coordinates of a flat index, and back.
inline std::vector<std::int64_t> coords_of(const Shape& shape, std::int64_t flat) {
  std::vector<std::int64_t> c(shape.size());
  for (std::size_t a = shape.size(); a-- > 0;) {
    c[a] = flat % shape[a];
    flat /= shape[a];
  }
  return c;
}
inline std::int64_t flat_of(const Shape& shape, const std::vector<std::int64_t>& c) {
  std::int64_t flat = 0;
  for (std::size_t a = 0; a < shape.size(); ++a) flat = flat * shape[a] + c[a];
  return flat;
}

using Build = std::function<Tensor(const std::vector<Tensor>&)>;

// Traces build(inputs x0, x1, ...) and runs it with coverage checks on; returns output "y".
inline HostTensor run(const std::vector<HostTensor>& inputs, const Build& build, ComputeType compute) {
  tg::GraphBuilder b("g");
  tg::TracingScope scope(b);
  std::vector<Tensor> traced;
  tg::TensorMap values;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const std::string name = "x" + std::to_string(i);
    traced.push_back(b.input(name, inputs[i].type));
    values[name] = inputs[i];
  }
  b.output("y", build(traced));
  return tg::interpret(b.take(), values, {.compute = compute, .check_coverage = true}).outputs.at("y");
}

// Calls check(dtype, compute) for every dtype and compute type, labelled on failure.
inline void for_each_dtype_and_compute(const std::function<void(DType, ComputeType)>& check) {
  for (DType dtype : kAllDtypes) {
    for (ComputeType compute : kComputeTypes) {
      SCOPED_TRACE(std::string(tg::dtype_name(dtype)) + (compute == ComputeType::f64 ? " in f64" : " in f32"));
      check(dtype, compute);
    }
  }
}

using tg::test::expect_shape_error_at;

// d/dx_k of sum(build(x...) * w) for a fixed w: the cotangent w routed back to each input.
inline std::vector<HostTensor> gradients(const std::vector<HostTensor>& inputs, const Build& build) {
  tg::GraphBuilder b("g");
  tg::TracingScope scope(b);
  std::vector<Tensor> traced;
  tg::TensorMap values;
  std::vector<std::string> wrt;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    wrt.push_back("x" + std::to_string(i));
    traced.push_back(b.input(wrt.back(), inputs[i].type));
    values[wrt.back()] = inputs[i];
  }
  const Tensor y = build(traced);
  const Tensor w = b.input("w", y.type());
  values["w"] = HostTensor::of(y.type(), sample_values(DType::f32, y.size(), 7));
  b.output("loss", tg::sum(y * w));
  const tg::Graph grad = tg::differentiate(b.take(), {.wrt = wrt});
  std::vector<HostTensor> out;
  const auto result = tg::interpret(grad, values, {.compute = ComputeType::f64}).outputs;
  for (const auto& name : wrt) out.push_back(result.at("grad." + name));
  return out;
}

// The w that gradients() uses for an output of `shape`.
inline std::vector<double> weights(const Shape& shape) { return sample_values(DType::f32, tg::num_elements(shape), 7); }

}  // namespace tg::test::structure
