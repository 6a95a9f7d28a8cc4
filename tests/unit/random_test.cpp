// The random family: Philox4x32-10 against Random123's published known answers, randn and dropout
// values against Box-Muller and the keep rule evaluated here, their statistics, thread-count and
// compute-type independence, the front-end (step seed input, fresh salts, p == 0), dropout's
// gradient (the same mask), bad input, and the OpDef parts.
#include "tensorgrad/ir/ops/ids/random.h"

#include <gtest/gtest.h>
#include <tbb/global_control.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "interp/philox.h"
#include "support/library.h"
#include "support/op_family.h"

namespace {

using tg::ComputeType;
using tg::DType;
using tg::HostTensor;
using tg::OpId;
namespace op = tg::op;
using tg::Shape;
using tg::Tensor;
namespace philox = tg::philox;

constexpr ComputeType kBothComputeTypes[] = {ComputeType::f64, ComputeType::f32};
constexpr double kTwoPi = 6.283185307179586;

const tg::TensorType kSeedType{DType::i32, {}};

HostTensor seed_value(std::int32_t seed) { return HostTensor::i32({}, {seed}); }

// Box-Muller on one element's words, in double, straight from the documented stream layout.
double expected_normal(std::int32_t seed, std::int64_t salt, std::uint64_t index) {
  const auto words =
      philox::philox4x32_10({static_cast<std::uint32_t>(index), static_cast<std::uint32_t>(index >> 32), 0, 0},
                            {static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(salt)});
  const double u1 = (static_cast<double>(words[0] >> 8) + 1.0) / 16777216.0;
  const double u2 = static_cast<double>(words[1] >> 8) / 16777216.0;
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(kTwoPi * u2);
}

bool expected_keep(std::int32_t seed, std::int64_t salt, std::uint64_t index, double p) {
  const auto words =
      philox::philox4x32_10({static_cast<std::uint32_t>(index), static_cast<std::uint32_t>(index >> 32), 0, 0},
                            {static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(salt)});
  return static_cast<double>(words[0] >> 8) / 16777216.0 >= p;
}

std::vector<float> ramp(std::int64_t n) {
  std::vector<float> v(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(0.25 + 0.01 * static_cast<double>(i));
  return v;
}

// A graph emitting the op directly with an explicit seed input "seed" (as the parser would).
tg::Graph randn_graph(Shape shape, std::int64_t salt) {
  tg::GraphBuilder b("g");
  const Tensor seed = b.input("seed", kSeedType);
  const Tensor inputs[] = {seed};
  b.output("y", b.emit(op::Randn, inputs, tg::Attrs{{"shape", std::move(shape)}, {"salt", salt}}, {}));
  return b.take();
}

tg::Graph dropout_graph(Shape shape, double p, std::int64_t salt) {
  tg::GraphBuilder b("g");
  const Tensor inputs[] = {b.input("x", {DType::f32, std::move(shape)}), b.input("seed", kSeedType)};
  b.output("y", b.emit(op::Dropout, inputs, tg::Attrs{{"p", p}, {"salt", salt}}, {}));
  return b.take();
}

HostTensor run(const tg::Graph& g, const tg::TensorMap& inputs, ComputeType compute) {
  return tg::interpret(g, inputs, {.compute = compute, .check_coverage = true}).outputs.at("y");
}

void expect_shape_error(const std::function<void()>& trace, std::string_view op, std::string_view rule_part) {
  try {
    trace();
    ADD_FAILURE() << "expected a ShapeError from " << op;
  } catch (const tg::ShapeError& e) {
    EXPECT_EQ(e.op(), op);
    EXPECT_NE(std::string(e.what()).find(rule_part), std::string::npos) << e.what();
  }
}

TEST(Philox, MatchesRandom123KnownAnswers) {
  EXPECT_EQ(philox::philox4x32_10({0, 0, 0, 0}, {0, 0}),
            (philox::Counter{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}));
  EXPECT_EQ(philox::philox4x32_10({0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}, {0xffffffffu, 0xffffffffu}),
            (philox::Counter{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}));
  EXPECT_EQ(philox::philox4x32_10({0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}, {0xa4093822u, 0x299f31d0u}),
            (philox::Counter{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}));
}

TEST(Philox, StreamLayoutPutsTheIndexInTheFirstTwoCounterWords) {
  const philox::Key key = philox::stream_key(-3, 7);
  EXPECT_EQ(key, (philox::Key{0xfffffffdu, 7u}));
  const std::uint64_t index = (std::uint64_t{1} << 32) + 5;
  EXPECT_EQ(philox::draw(key, index), philox::philox4x32_10({5u, 1u, 0u, 0u}, key));
}

TEST(Philox, UniformsAreExactMultiplesOfTwoToMinus24InBothRanges) {
  EXPECT_EQ(philox::uniform_closed_open<float>(0u), 0.0f);
  EXPECT_EQ(philox::uniform_closed_open<float>(0xffffffffu), 1.0f - 1.0f / 16777216.0f);
  EXPECT_EQ(philox::uniform_open_closed<float>(0u), 1.0f / 16777216.0f);
  EXPECT_EQ(philox::uniform_open_closed<float>(0xffffffffu), 1.0f);
  EXPECT_EQ(philox::uniform_open_closed<double>(0xfffffeffu), 1.0 - 1.0 / 16777216.0);
  EXPECT_TRUE(std::isfinite(philox::box_muller<float>(0u, 0u)));  // u1 = 2^-24: no log(0)
}

TEST(Randn, MatchesBoxMullerOfThePhiloxStreamInBothComputeTypes) {
  const Shape shape{3, 7};
  for (std::int32_t seed : {0, 42, -1}) {
    for (std::int64_t salt : {std::int64_t{0}, std::int64_t{5}, std::int64_t{4294967295}}) {
      const tg::Graph g = randn_graph(shape, salt);
      for (ComputeType compute : kBothComputeTypes) {
        const HostTensor y = run(g, {{"seed", seed_value(seed)}}, compute);
        ASSERT_EQ(y.type, (tg::TensorType{DType::f32, shape}));
        const double tol = compute == ComputeType::f64 ? 1e-13 : 2e-5;
        for (std::size_t i = 0; i < y.size(); ++i) {
          EXPECT_NEAR(y.at(i), expected_normal(seed, salt, i), tol)
              << "seed " << seed << " salt " << salt << " i " << i;
        }
      }
    }
  }
}

TEST(Randn, DrawsLookStandardNormal) {
  constexpr std::int64_t n = 1 << 16;
  const HostTensor y = run(randn_graph({n}, 3), {{"seed", seed_value(11)}}, ComputeType::f64);
  double sum = 0, sum_sq = 0, within_one = 0;
  for (double v : y.to_f64()) {
    sum += v;
    sum_sq += v * v;
    within_one += std::fabs(v) < 1.0 ? 1 : 0;
  }
  const double mean = sum / n;
  EXPECT_NEAR(mean, 0.0, 0.02);
  EXPECT_NEAR(sum_sq / n - mean * mean, 1.0, 0.03);
  EXPECT_NEAR(within_one / n, 0.6827, 0.01);
}

TEST(Randn, SameBitsForAnyThreadCountAndLargeOutputs) {
  const tg::Graph g = randn_graph({5, 4099}, 1);  // several parallel chunks
  for (ComputeType compute : kBothComputeTypes) {
    const HostTensor many = run(g, {{"seed", seed_value(9)}}, compute);
    tbb::global_control single(tbb::global_control::max_allowed_parallelism, 1);
    EXPECT_EQ(run(g, {{"seed", seed_value(9)}}, compute).to_f64(), many.to_f64());
  }
}

TEST(Randn, FrontEndUsesTheStepSeedInputAndAFreshSaltPerCall) {
  tg::GraphBuilder b("g");
  tg::TracingScope scope(b);
  b.output("a", tg::randn({4, 4}));
  b.output("b", tg::randn({4, 4}));
  const tg::Graph g = b.take();
  ASSERT_EQ(g.inputs().size(), 1u);  // one shared step seed
  EXPECT_EQ(g.inputs()[0].name, tg::kStepSeedInput);
  EXPECT_EQ(g.type(g.inputs()[0].value), kSeedType);
  ASSERT_EQ(g.nodes().size(), 2u);
  EXPECT_NE(g.nodes()[0].attrs.integer("salt"), g.nodes()[1].attrs.integer("salt"));

  const auto first = tg::interpret(g, {{tg::kStepSeedInput, seed_value(1)}}).outputs;
  const auto again = tg::interpret(g, {{tg::kStepSeedInput, seed_value(1)}}).outputs;
  const auto other = tg::interpret(g, {{tg::kStepSeedInput, seed_value(2)}}).outputs;
  EXPECT_EQ(first.at("a"), again.at("a"));
  EXPECT_NE(first.at("a").to_f64(), first.at("b").to_f64());  // different salts, different draws
  EXPECT_NE(first.at("a").to_f64(), other.at("a").to_f64());  // different seeds, different draws
}

TEST(Randn, BadInputIsAShapeErrorNamingTheOp) {
  expect_shape_error([] { randn_graph({2, -1}, 0); }, "randn", "negative dimension -1");
  expect_shape_error([] { randn_graph({2}, -1); }, "randn", "salt must be in [0, 4294967295], got -1");
  expect_shape_error([] { randn_graph({2}, std::int64_t{1} << 32); }, "randn", "got 4294967296");
  expect_shape_error(
      [] {
        tg::GraphBuilder b("g");
        const Tensor seed[] = {b.input("seed", {DType::f32, {}})};
        b.emit(op::Randn, seed, tg::Attrs{{"shape", Shape{2}}, {"salt", std::int64_t{0}}}, {});
      },
      "randn", "the seed must be a 0-d i32 tensor, got f32[]");
}

TEST(Dropout, KeepsExactlyTheElementsWhoseUniformReachesPAndScalesThem) {
  const Shape shape{6, 9};
  const std::vector<float> x = ramp(54);
  for (double p : {0.0, 0.3, 0.75}) {
    const tg::Graph g = dropout_graph(shape, p, 4);
    for (ComputeType compute : kBothComputeTypes) {
      const HostTensor y = run(g, {{"x", HostTensor::f32(shape, x)}, {"seed", seed_value(17)}}, compute);
      for (std::size_t i = 0; i < x.size(); ++i) {
        const bool keep = expected_keep(17, 4, i, p);
        const double expected = keep ? static_cast<double>(x[i]) / (1.0 - p) : 0.0;
        if (keep) {
          EXPECT_NEAR(y.at(i), expected, 1e-6 * std::fabs(expected)) << "p " << p << " i " << i;
        } else {
          EXPECT_EQ(y.at(i), 0.0) << "p " << p << " i " << i;
        }
      }
    }
  }
}

TEST(Dropout, KeepsAboutOneMinusPOfTheElements) {
  constexpr std::int64_t n = 1 << 15;
  const std::vector<float> x(n, 1.0f);
  for (double p : {0.1, 0.5, 0.9}) {
    const HostTensor y =
        run(dropout_graph({n}, p, 0), {{"x", HostTensor::f32({n}, x)}, {"seed", seed_value(5)}}, ComputeType::f64);
    double kept = 0;
    for (double v : y.to_f64()) kept += v != 0.0 ? 1 : 0;
    EXPECT_NEAR(kept / n, 1.0 - p, 0.015) << "p " << p;
  }
}

TEST(Dropout, SameMaskInF32AndF64AndForAnyThreadCount) {
  const Shape shape{3, 5000};
  const std::vector<float> x(15000, -1.5f);
  const tg::TensorMap inputs{{"x", HostTensor::f32(shape, x)}, {"seed", seed_value(-77)}};
  // p = 0.3 is not a float: the keep test must not round it differently in the two modes.
  const tg::Graph g = dropout_graph(shape, 0.3, 12);
  const HostTensor in_f64 = run(g, inputs, ComputeType::f64);
  const HostTensor in_f32 = run(g, inputs, ComputeType::f32);
  for (std::size_t i = 0; i < x.size(); ++i) ASSERT_EQ(in_f64.at(i) == 0.0, in_f32.at(i) == 0.0) << i;
  tbb::global_control single(tbb::global_control::max_allowed_parallelism, 1);
  EXPECT_EQ(run(g, inputs, ComputeType::f64).to_f64(), in_f64.to_f64());
  EXPECT_EQ(run(g, inputs, ComputeType::f32).to_f64(), in_f32.to_f64());
}

TEST(Dropout, GradientAppliesTheSameMaskAndScaleToTheCotangent) {
  const Shape shape{4, 6};
  constexpr double p = 0.4;
  tg::GraphBuilder b("g");
  tg::Graph forward;
  {
    tg::TracingScope scope(b);
    const Tensor x = b.input("x", {DType::f32, shape});
    const Tensor w = b.input("w", {DType::f32, shape});
    const Tensor y = tg::dropout(x, p);
    b.output("y", y);
    b.output("loss", tg::sum(y * w));
    forward = b.take();
  }
  const tg::Graph grad = tg::differentiate(forward, {.loss = "loss", .wrt = {"x"}});
  int dropout_nodes = 0;
  for (const tg::Node& node : grad.nodes()) {
    if (node.op != op::Dropout) continue;
    ++dropout_nodes;
    EXPECT_EQ(node.attrs, forward.nodes()[0].attrs);
    EXPECT_EQ(node.inputs[1], *grad.find_input(tg::kStepSeedInput));
  }
  EXPECT_EQ(dropout_nodes, 2);  // the forward call and its gradient

  std::vector<float> w(24);
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i % 5) - 2.0f;
  const std::int64_t salt = forward.nodes()[0].attrs.integer("salt");
  for (ComputeType compute : kBothComputeTypes) {
    const auto out = tg::interpret(grad,
                                   {{"x", HostTensor::f32(shape, ramp(24))},
                                    {"w", HostTensor::f32(shape, w)},
                                    {tg::kStepSeedInput, seed_value(3)}},
                                   {.compute = compute})
                         .outputs;
    const HostTensor& gx = out.at("grad.x");
    for (std::size_t i = 0; i < w.size(); ++i) {
      const double expected = expected_keep(3, salt, i, p) ? w[i] / (1.0 - p) : 0.0;
      EXPECT_NEAR(gx.at(i), expected, 1e-6) << i;
      // x is nonzero everywhere, so the forward output is zero exactly where the mask dropped.
      if (out.at("y").at(i) == 0.0) {
        EXPECT_EQ(gx.at(i), 0.0) << i;
      }
    }
  }
}

TEST(Dropout, FrontEndSkipsPZeroAndSaltsEachCall) {
  tg::GraphBuilder b("g");
  tg::TracingScope scope(b);
  const Tensor x = b.input("x", {DType::f32, {3}});
  const Tensor same = tg::dropout(x, 0.0);
  EXPECT_EQ(same.id(), x.id());
  EXPECT_TRUE(b.graph().nodes().empty());
  EXPECT_FALSE(b.graph().find_input(tg::kStepSeedInput).has_value());
  tg::dropout(x, 0.5);
  tg::dropout(x, 0.5);
  ASSERT_EQ(b.graph().nodes().size(), 2u);
  EXPECT_NE(b.graph().nodes()[0].attrs.integer("salt"), b.graph().nodes()[1].attrs.integer("salt"));
}

TEST(Dropout, BadProbabilityIsAShapeErrorAtTheCallSite) {
  tg::GraphBuilder b("g");
  tg::TracingScope scope(b);
  const Tensor x = b.input("x", {DType::f32, {3}});
  for (double p : {1.0, -0.25, 1.5, std::numeric_limits<double>::quiet_NaN()}) {
    try {
      tg::dropout(x, p);
      ADD_FAILURE() << "expected a ShapeError for p = " << p;
    } catch (const tg::ShapeError& e) {
      EXPECT_EQ(e.op(), "dropout");
      EXPECT_NE(std::string(e.what()).find("p must be in [0, 1), got " + tg::attr_value_to_string(p)),
                std::string::npos)
          << e.what();
      EXPECT_NE(std::string(e.what()).find("random_test.cpp"), std::string::npos) << e.what();
    }
  }
  EXPECT_TRUE(b.graph().nodes().empty());
}

TEST(Dropout, ShapeRuleRefusesWhatTheParserCouldFeedIt) {
  expect_shape_error([] { dropout_graph({2}, 1.0, 0); }, "dropout", "p must be in [0, 1), got 1");
  expect_shape_error([] { dropout_graph({2}, 0.5, -4); }, "dropout", "salt must be in [0, 4294967295], got -4");
  expect_shape_error(
      [] {
        tg::GraphBuilder b("g");
        const Tensor inputs[] = {b.input("x", {DType::f32, {2}}), b.input("seed", {DType::i32, {1}})};
        b.emit(op::Dropout, inputs, tg::Attrs{{"p", 0.5}, {"salt", std::int64_t{0}}}, {});
      },
      "dropout", "the seed must be a 0-d i32 tensor, got i32[1]");
  expect_shape_error(
      [] {
        tg::GraphBuilder b("g");
        const Tensor inputs[] = {b.input("x", {DType::i32, {2}}), b.input("seed", kSeedType)};
        b.emit(op::Dropout, inputs, tg::Attrs{{"p", 0.5}, {"salt", std::int64_t{0}}}, {});
      },
      "dropout", "input 0 must be f32");
}

constexpr std::string_view kFamily = "random";

// Every op of the family (from the registry) has every part; a random op draws from the step seed
// with a per-call salt attribute.
TEST(RandomOps, DefinitionsHaveEveryPart) {
  tg::test::expect_ops_in_family(std::vector<OpId>{op::Randn, op::Dropout}, kFamily);
  for (OpId op : tg::test::expect_family_defs(kFamily, 1, 50)) {
    const tg::OpDef& def = tg::op_def(op);
    SCOPED_TRACE(std::string(def.name));
    EXPECT_TRUE(std::any_of(def.attrs.begin(), def.attrs.end(), [](const auto& a) { return a.name == "salt"; }));
  }
  EXPECT_EQ(tg::op_def(op::Randn).attrs.size(), 2u);
  EXPECT_EQ(tg::op_def(op::Dropout).attrs.size(), 2u);
  EXPECT_FALSE(tg::op_def(op::Randn).differentiable);
  EXPECT_EQ(tg::op_def(op::Randn).tolerance, tg::ToleranceClass::transcendental);
  EXPECT_TRUE(tg::op_def(op::Dropout).differentiable);
  EXPECT_NE(tg::op_def(op::Dropout).grad, nullptr);
  EXPECT_EQ(tg::op_def(op::Dropout).tolerance, tg::ToleranceClass::elementwise);
  tg::SampleRng rng(1);
  EXPECT_FALSE(tg::op_def(op::Dropout).samples(rng, tg::TensorType{DType::i32, {2}}).has_value());
  const auto given = tg::op_def(op::Dropout).samples(rng, tg::TensorType{DType::f32, {2, 3}});
  ASSERT_TRUE(given.has_value());
  EXPECT_EQ(given->inputs[0], (tg::TensorType{DType::f32, {2, 3}}));
}

TEST(RandomOps, F32RunsMatchTheOracleWithinTheToleranceClass) {
  tg::test::expect_family_runs_match_oracle(kFamily, 7, 20);
}

TEST(RandomGrads, GradRulesMatchFiniteDifferences) {
  tg::test::expect_family_grads_match_finite_differences(kFamily, 21, 4);
}

}  // namespace
