// interp_f32's broadcast runs (src/interp/kernels/elementwise_binary.cpp): operands read run by run
// with pointer steps of 0 or 1 must give, element for element, what the f64 oracle's per-element
// index gives. One f32 add, maximum or select is exact in f64 and rounds once, so the bits must be
// equal. The shapes put runs on both sides of the 8-element threshold, size-1 axes between others,
// one-element operands, empty outputs, and thread chunks that start inside a run.
#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <string>
#include <vector>

#include "support/library.h"
#include "tensorgrad/ir/launch_paths.h"

namespace tg {
namespace {

struct ShapePair {
  Shape a, b;
};

std::vector<double> ramp(const Shape& shape, double start) {
  std::vector<double> v(static_cast<std::size_t>(num_elements(shape)));
  // f32 values, so the f64 run starts from the same numbers as the f32 one.
  for (std::size_t i = 0; i < v.size(); ++i)
    v[i] = static_cast<float>(start + 0.37 * static_cast<double>(i % 101) - 9.0);
  return v;
}

std::uint64_t hits(const std::string& name) {
  for (const LaunchPathCount& p : launch_path_counts())
    if (p.name() == name) return p.hits;
  return 0;
}

TEST(BroadcastRuns, GiveTheOraclesBitsOnEveryShape) {
  const std::vector<ShapePair> pairs = {
      {{2, 3, 4, 2}, {3, 1, 1}},  // runs of 8: a bias over planes
      {{2, 3, 7}, {3, 1}},        // runs of 7: the per-element index
      {{5, 8}, {8}},              // a row vector, step 1
      {{5, 1, 9}, {4, 1}},        // both operands broadcast, runs of 9 and 1 (outer)
      {{3, 1, 16}, {1, 2, 16}},   // size-1 axes between, runs of 16
      {{1}, {6, 11}},             // a one-element operand
      {{2, 1, 3, 1, 8}, {2, 5, 3, 1, 1}},
      {{0, 9}, {9}},                   // no outputs
      {{70, 3, 40}, {3, 1}},           // 8400 outputs: thread chunks start inside a run
      {{4096 + 5, 3}, {4096 + 5, 1}},  // many short runs
  };
  for (const ShapePair& p : pairs) {
    GraphBuilder builder("runs");
    TracingScope scope(builder);
    const Tensor a = builder.input("a", {DType::f32, p.a});
    const Tensor b = builder.input("b", {DType::f32, p.b});
    builder.output("sum", a + b);
    builder.output("max", maximum(b, a));
    builder.output("select", where(greater(a, b), a, b));
    const Graph g = builder.take();
    const TensorMap inputs = {{"a", HostTensor::of({DType::f32, p.a}, ramp(p.a, 0.5))},
                              {"b", HostTensor::of({DType::f32, p.b}, ramp(p.b, -0.25))}};
    const InterpResult f64 = interpret(g, inputs, {.compute = ComputeType::f64});
    const InterpResult f32 = interpret(g, inputs, {.compute = ComputeType::f32});
    for (const auto& [name, want] : f64.outputs) {
      const HostTensor& got = f32.outputs.at(name);
      ASSERT_EQ(got.size(), want.size()) << name;
      for (std::size_t i = 0; i < want.size(); ++i) {
        ASSERT_EQ(std::bit_cast<std::uint32_t>(static_cast<float>(got.at(i))),
                  std::bit_cast<std::uint32_t>(static_cast<float>(want.at(i))))
            << name << "[" << i << "] of " << shape_to_string(p.a) << " and " << shape_to_string(p.b);
      }
    }
  }
}

TEST(BroadcastRuns, OnlyTheFloatInterpreterReadsRuns) {
  GraphBuilder builder("bias");
  TracingScope scope(builder);
  const Shape x_shape{2, 4, 3, 3}, bias_shape{4, 1, 1};
  const Tensor x = builder.input("x", {DType::f32, x_shape});
  const Tensor bias = builder.input("bias", {DType::f32, bias_shape});
  builder.output("y", x + bias);
  const Graph g = builder.take();
  const TensorMap inputs = {{"x", HostTensor::of({DType::f32, x_shape}, ramp(x_shape, 1.0))},
                            {"bias", HostTensor::of({DType::f32, bias_shape}, ramp(bias_shape, 2.0))}};
  reset_launch_path_counts();
  interpret(g, inputs, {.compute = ComputeType::f64});
  EXPECT_EQ(hits("interp/elementwise_binary/broadcast_runs"), 0u);
  EXPECT_GT(hits("interp/elementwise_binary/broadcast"), 0u);
  reset_launch_path_counts();
  interpret(g, inputs, {.compute = ComputeType::f32});
  EXPECT_GT(hits("interp/elementwise_binary/broadcast_runs"), 0u);
  EXPECT_EQ(hits("interp/elementwise_binary/broadcast"), 0u);
}

}  // namespace
}  // namespace tg
