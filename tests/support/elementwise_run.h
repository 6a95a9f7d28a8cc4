#pragma once
// Running small traced graphs for the elementwise families' unit tests
// (tests/unit/elementwise_unary_test.cpp, elementwise_binary_test.cpp): a graph built by a lambda
// over named inputs, its output "y", and the relative bound of a compute type.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "support/library.h"

namespace tg::test {

inline constexpr ComputeType kBothComputeTypes[] = {ComputeType::f64, ComputeType::f32};

struct NamedInput {
  std::string name;
  HostTensor value;
};
using Build = std::function<Tensor(const std::vector<Tensor>&)>;

// Traces `build` over inputs of the given values' types and runs the graph; returns output "y".
inline HostTensor run(const std::vector<NamedInput>& inputs, const Build& build, ComputeType compute) {
  GraphBuilder b("g");
  TracingScope scope(b);
  std::vector<Tensor> xs;
  TensorMap feed;
  for (const auto& in : inputs) {
    xs.push_back(b.input(in.name, in.value.type));
    feed.emplace(in.name, in.value);
  }
  b.output("y", build(xs));
  const Graph g = b.take();
  return interpret(g, feed, {.compute = compute, .check_coverage = true}).outputs.at("y");
}

// f32 mode rounds inputs to float and computes in float: a relative bound of a few dozen ulp.
inline double tolerance(ComputeType compute, double expected) {
  const double rel = compute == ComputeType::f64 ? 1e-13 : 4e-6;
  return rel * (1.0 + std::fabs(expected));
}

inline void expect_values(const HostTensor& got, const std::vector<double>& expected, ComputeType compute) {
  ASSERT_EQ(got.size(), expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    EXPECT_NEAR(got.at(i), expected[i], tolerance(compute, expected[i])) << "element " << i;
  }
}

}  // namespace tg::test
