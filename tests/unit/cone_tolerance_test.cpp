// The per-output (cone) bound of tensorgrad/runtime/tolerance.h and compare_with_oracle, the check
// `tg check` runs: an output is judged by the ulps and magnitudes of the values it depends on, so
// a wrong optimizer update in a training step graph, ~1e-3 next to a batch size of 64, is caught.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include "support/library.h"
#include "tensorgrad/runtime/tolerance.h"

namespace tg {
namespace {

// small = x + x reads only x; big = y * y reads only y, a large value.
Graph two_cones() {
  GraphBuilder b("two_cones");
  TracingScope scope(b);
  Tensor x = b.input("x", {DType::f32, {3}});
  Tensor y = b.input("y", {DType::f32, {2}});
  b.output("small", x + x);
  b.output("big", y * y);
  return b.take();
}

TensorMap two_cones_inputs() {
  return {{"x", HostTensor::f32({3}, {0.5f, -1.5f, 0.25f})}, {"y", HostTensor::f32({2}, {64.f, -8.f})}};
}

std::vector<HostTensor> oracle_values(const Graph& g, const TensorMap& in) {
  return interpret(g, in, {.compute = ComputeType::f64, .keep_all_values = true}).values;
}

TEST(ConeTolerance, ValueConeHoldsTheValueAndEverythingItReads) {
  const Graph g = two_cones();
  const ValueId small = *g.find_output("small"), x = *g.find_input("x"), y = *g.find_input("y");
  const std::vector<bool> cone = value_cone(g, small);
  ASSERT_EQ(cone.size(), g.values().size());
  EXPECT_TRUE(cone[static_cast<std::size_t>(small)]);
  EXPECT_TRUE(cone[static_cast<std::size_t>(x)]);
  EXPECT_FALSE(cone[static_cast<std::size_t>(y)]);
  EXPECT_FALSE(cone[static_cast<std::size_t>(*g.find_output("big"))]);
  EXPECT_THROW(value_cone(g, static_cast<ValueId>(g.values().size())), Error);
  EXPECT_THROW(value_cone(g, -1), Error);
}

TEST(ConeTolerance, AnOutputIsScaledByItsOwnConeOnly) {
  const Graph g = two_cones();
  const std::vector<HostTensor> values = oracle_values(g, two_cones_inputs());
  const std::vector<OutputTolerance> bounds = output_tolerances(g, values);
  ASSERT_EQ(bounds.size(), 2u);
  // small's cone holds x (largest |x| 1.5) and 2x (3); big's holds y and y^2 = 4096.
  EXPECT_EQ(bounds[0].scale, 3.0);
  EXPECT_EQ(bounds[1].scale, 4096.0);
  EXPECT_EQ(oracle_scale(values), 4096.0);
  // One elementwise node each (4 ulps), the graph two.
  const double eps = std::numeric_limits<float>::epsilon();
  EXPECT_DOUBLE_EQ(bounds[0].relative, 4 * eps * 4);
  EXPECT_DOUBLE_EQ(graph_tolerance(g), 4 * eps * 8);
  EXPECT_THROW(output_tolerances(g, {}), Error);
}

TEST(ConeTolerance, ConstantsDoNotSetTheScale) {
  // x / 256 as mean's backward writes it: the constant 256 has the same bits in both runs.
  GraphBuilder b("constant");
  {
    TracingScope scope(b);
    Tensor x = b.input("x", {DType::f32, {2}});
    b.output("scaled", x / 256.0);
  }
  const Graph g = b.take();
  const std::vector<HostTensor> values = oracle_values(g, {{"x", HostTensor::f32({2}, {-3.f, 2.f})}});
  EXPECT_EQ(oracle_scale(values), 256.0);
  EXPECT_EQ(output_tolerances(g, values).at(0).scale, 3.0);
}

TEST(ConeTolerance, CompareWithOracleCountsElementsOffTheirConeBound) {
  const Graph g = two_cones();
  const TensorMap in = two_cones_inputs();
  const std::vector<HostTensor> values = oracle_values(g, in);
  TensorMap got = interpret(g, in, {.compute = ComputeType::f32}).outputs;
  for (const OutputComparison& c : compare_with_oracle(g, got, values)) EXPECT_TRUE(c.ok()) << c.name;
  // 2^-13 on small[1] = -3: far below the whole graph's bound (4096 scale), far above small's own.
  got.at("small") = HostTensor::f32({3}, {1.f, -3.f - 0x1p-13f, 0.5f});
  const std::vector<OutputComparison> off = compare_with_oracle(g, got, values);
  EXPECT_LT(0x1p-13, graph_tolerance(g) * oracle_scale(values));
  EXPECT_GT(0x1p-13, off[0].tolerance.absolute());
  EXPECT_FALSE(off[0].ok());
  EXPECT_EQ(off[0].elements_off, 1);
  ASSERT_EQ(off[0].worst.size(), 1u);
  EXPECT_EQ(off[0].worst[0].index, 1u);
  EXPECT_EQ(off[0].largest_error, 0x1p-13);
  EXPECT_DOUBLE_EQ(off[0].largest_relative_error, 0x1p-13 / 3);
  EXPECT_TRUE(off[1].ok());
  got.erase("big");
  EXPECT_THROW(compare_with_oracle(g, got, values), Error);
}

// A training step graph: a 2-16-1 MLP, mean squared error, Adam.
struct Mlp : Module {
  Linear l1{*this, "l1", 2, 16};
  Linear l2{*this, "l2", 16, 1};
};
// Mean's backward divides by the batch size, a constant of 64 in every gradient's and update's cone.
constexpr int kBatch = 64;

std::string step_graph_text() {
  Mlp model;
  const Training train = compile(TrainingSpec<Mlp>{
      .model = model,
      .loss =
          [](const Mlp& m, const Inputs& in) {
            Tensor r = m.l2(relu(m.l1(in.at("x")))) - in.at("y");
            return mean(r * r);
          },
      .inputs = {{"x", {{kBatch, 2}}}, {"y", {{kBatch, 1}}}},
      .optimizer = {.kind = AdamConfig{}},
      .lr = 1e-3,
      .seed = 1,
  });
  return print_graph(train.graph());  // what `tg check` reads: the graph text of the step
}

// The inputs of the step's first run, as a Training feeds it: params, zero optimizer state, the
// Adam scalars of step 1 at lr 1e-3, and data in [-1, 1).
TensorMap first_step_inputs(const Graph& g, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> unit(-1.f, 1.f);
  const OptimizerStepScalars scalars = scalars_for_step(OptimizerConfig{}, 1, 1e-3);
  TensorMap in;
  for (const GraphInput& input : g.inputs()) {
    const TensorType& type = g.type(input.value);
    std::vector<double> values(static_cast<std::size_t>(type.size()), 0.0);
    if (const auto scalar = scalars.values.find(input.name); scalar != scalars.values.end()) {
      values[0] = static_cast<float>(scalar->second);
    } else if (input.kind != InputKind::state) {
      for (double& v : values) v = unit(rng);
    }
    in.emplace(input.name, HostTensor::of(type, std::move(values)));
  }
  return in;
}

// `text` with the update of `param` (param - step) turned into param + step: the sign error of a
// wrong optimizer kernel.
std::string with_wrong_update(const std::string& text, const std::string& param) {
  std::smatch output;
  const std::string escaped = std::regex_replace(param, std::regex(R"(\.)"), R"(\.)");
  if (!std::regex_search(text, output, std::regex("[ ,]" + escaped + R"(\.new=(%\d+))"))) return text;
  const std::regex update("(\\n  " + output[1].str() + " = )sub\\(");
  return std::regex_replace(text, update, "$1add(");
}

TEST(ConeTolerance, CatchesAWrongAdamUpdateInATrainingStepGraph) {
  const std::string text = step_graph_text();
  const std::string wrong_text = with_wrong_update(text, "l1.b");
  ASSERT_NE(wrong_text, text) << "no 'l1.b.new = sub(...)' line in the step graph:\n" << text;
  const Graph step = parse_graph(text);
  const Graph wrong = parse_graph(wrong_text);
  for (std::uint32_t seed : {1u, 2u, 3u}) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    const TensorMap in = first_step_inputs(step, seed);
    const std::vector<HostTensor> oracle = oracle_values(step, in);
    // The right graph in f32 passes, every output.
    const TensorMap right = interpret(step, in, {.compute = ComputeType::f32}).outputs;
    for (const OutputComparison& c : compare_with_oracle(step, right, oracle)) {
      EXPECT_TRUE(c.ok()) << c.name << ": largest error " << c.largest_error << ", bound " << c.tolerance.absolute();
    }
    // A backend computing l1.b's update with the wrong sign fails l1.b.new, and only it.
    const TensorMap bad = interpret(wrong, in, {.compute = ComputeType::f32}).outputs;
    const double whole_graph_bound = graph_tolerance(step) * oracle_scale(oracle);
    for (const OutputComparison& c : compare_with_oracle(step, bad, oracle)) {
      EXPECT_EQ(c.ok(), c.name != "l1.b.new")
          << c.name << ": largest error " << c.largest_error << ", bound " << c.tolerance.absolute();
      // The whole graph's bound (scaled by the constant 64) lets it through: what the cone bound fixes.
      if (c.name == "l1.b.new") {
        EXPECT_LE(c.largest_error, whole_graph_bound);
      }
    }
  }
}

}  // namespace
}  // namespace tg
