// The normalization composites: layer_norm (with and without gain and bias) and rms_norm against
// loops written here, in both compute types; their gradients through tg::differentiate against
// central finite differences in f64 (composites are outside the per-op property suite); and the
// ShapeErrors for a gain or bias that is not [D], a 0-d input and a non-f32 input.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "support/library.h"
#include "support/test_values.h"

namespace {

using tg::ComputeType;
using tg::DType;
using tg::HostTensor;
using tg::Shape;
using tg::Tensor;

constexpr ComputeType kBothComputeTypes[] = {ComputeType::f64, ComputeType::f32};

// Values in [-2, 2] (tests/support/test_values.h), this file's own stream.
std::vector<float> test_values(std::int64_t n, std::uint64_t seed) { return tg::testing::test_values(n, seed, 99); }

struct Case {
  Shape shape;
  bool with_gain = false;
  bool with_bias = false;
};

enum class Norm { layer, rms };

// Builds y = norm(x[, g][, b]) with inputs "x", "g", "b" as asked.
tg::Graph norm_graph(Norm norm, const Case& c, double eps) {
  tg::GraphBuilder b("g");
  tg::TracingScope scope(b);
  const Tensor x = b.input("x", {DType::f32, c.shape});
  const Shape affine{c.shape.back()};
  std::optional<Tensor> gain, bias;
  if (c.with_gain) gain = b.input("g", {DType::f32, affine});
  if (c.with_bias) bias = b.input("b", {DType::f32, affine});
  b.output("y", norm == Norm::layer ? tg::layer_norm(x, gain, bias, eps) : tg::rms_norm(x, gain, eps));
  return b.take();
}

tg::TensorMap norm_inputs(const Case& c) {
  tg::TensorMap inputs;
  std::int64_t n = 1;
  for (auto d : c.shape) n *= d;
  const std::int64_t d = c.shape.back();
  inputs.emplace("x", HostTensor::f32(c.shape, test_values(n, 1)));
  if (c.with_gain) inputs.emplace("g", HostTensor::f32({d}, test_values(d, 2)));
  if (c.with_bias) inputs.emplace("b", HostTensor::f32({d}, test_values(d, 3)));
  return inputs;
}

// The normalizations written out row by row in double.
std::vector<double> reference(Norm norm, const Case& c, const tg::TensorMap& inputs, double eps) {
  const auto x = inputs.at("x").to_f64();
  const auto d = static_cast<std::size_t>(c.shape.back());
  std::vector<double> y(x.size());
  for (std::size_t row = 0; row < x.size() / d; ++row) {
    const double* xr = &x[row * d];
    double mean = 0;
    if (norm == Norm::layer) {
      for (std::size_t j = 0; j < d; ++j) mean += xr[j];
      mean /= static_cast<double>(d);
    }
    double second_moment = 0;
    for (std::size_t j = 0; j < d; ++j) second_moment += (xr[j] - mean) * (xr[j] - mean);
    second_moment /= static_cast<double>(d);
    const double inv = 1.0 / std::sqrt(second_moment + eps);
    for (std::size_t j = 0; j < d; ++j) {
      double v = (xr[j] - mean) * inv;
      if (c.with_gain) v *= inputs.at("g").at(j);
      if (c.with_bias) v += inputs.at("b").at(j);
      y[row * d + j] = v;
    }
  }
  return y;
}

void check_values(Norm norm, const Case& c, double eps) {
  const tg::Graph g = norm_graph(norm, c, eps);
  const tg::TensorMap inputs = norm_inputs(c);
  // eps reaches the graph as an f32 constant, so the reference uses the same rounded value.
  const std::vector<double> expected = reference(norm, c, inputs, static_cast<float>(eps));
  for (ComputeType compute : kBothComputeTypes) {
    SCOPED_TRACE(compute == ComputeType::f64 ? "f64" : "f32");
    const HostTensor y = tg::interpret(g, inputs, {.compute = compute, .check_coverage = true}).outputs.at("y");
    ASSERT_EQ(y.type, (tg::TensorType{DType::f32, c.shape}));
    const double tol = compute == ComputeType::f64 ? 1e-12 : 2e-5;
    for (std::size_t i = 0; i < expected.size(); ++i) {
      EXPECT_NEAR(y.at(i), expected[i], tol * (1 + std::fabs(expected[i]))) << "element " << i;
    }
  }
}

TEST(LayerNorm, MatchesLoopsWithAndWithoutGainAndBias) {
  check_values(Norm::layer, {{3, 5}, true, true}, 1e-5);
  check_values(Norm::layer, {{4, 6}, true, false}, 1e-5);
  check_values(Norm::layer, {{2, 3, 4}, false, true}, 1e-3);
  check_values(Norm::layer, {{7}, false, false}, 0.1);
  check_values(Norm::layer, {{2, 1}, true, true}, 1e-5);  // one feature: centered is 0, y is the bias
}

TEST(LayerNorm, NormalizedRowsHaveZeroMeanAndUnitVariance) {
  const Case c{{5, 16}};
  const HostTensor y = tg::interpret(norm_graph(Norm::layer, c, 0.0), norm_inputs(c)).outputs.at("y");
  for (std::size_t row = 0; row < 5; ++row) {
    double sum = 0, sum_sq = 0;
    for (std::size_t j = 0; j < 16; ++j) {
      sum += y.at(row * 16 + j);
      sum_sq += y.at(row * 16 + j) * y.at(row * 16 + j);
    }
    EXPECT_NEAR(sum / 16, 0.0, 1e-12);
    EXPECT_NEAR(sum_sq / 16, 1.0, 1e-12);
  }
}

TEST(RmsNorm, MatchesLoopsWithAndWithoutGain) {
  check_values(Norm::rms, {{3, 5}, true, false}, 1e-6);
  check_values(Norm::rms, {{2, 3, 4}, false, false}, 1e-6);
  check_values(Norm::rms, {{6}, true, false}, 0.5);
}

// Autodiff of sum(norm(...) * w) against central differences over every element of every input.
void check_gradient(Norm norm, const Case& c, double eps) {
  tg::GraphBuilder b("g");
  tg::Graph forward;
  {
    tg::TracingScope scope(b);
    b.mutable_graph() = norm_graph(norm, c, eps);
    const Tensor y = b.wrap(*b.graph().find_output("y"));
    b.output("loss", tg::sum(y * b.input("w", {DType::f32, c.shape})));
    forward = b.take();
  }
  std::vector<std::string> wrt{"x"};
  if (c.with_gain) wrt.push_back("g");
  if (c.with_bias) wrt.push_back("b");
  const tg::Graph grad = tg::differentiate(forward, {.loss = "loss", .wrt = wrt});

  tg::TensorMap inputs = norm_inputs(c);
  std::int64_t n = 1;
  for (auto d : c.shape) n *= d;
  inputs.emplace("w", HostTensor::f32(c.shape, test_values(n, 4)));
  const auto analytic = tg::interpret(grad, inputs).outputs;
  const auto loss_at = [&](const tg::TensorMap& at) { return tg::interpret(forward, at).outputs.at("loss").at(0); };
  constexpr double h = 1e-6;
  for (const auto& name : wrt) {
    const auto g = analytic.at("grad." + name).to_f64();
    ASSERT_EQ(g.size(), inputs.at(name).size());
    for (std::size_t i = 0; i < g.size(); ++i) {
      tg::TensorMap plus = inputs, minus = inputs;
      plus.at(name).mutable_wide()[i] += h;
      minus.at(name).mutable_wide()[i] -= h;
      const double numeric = (loss_at(plus) - loss_at(minus)) / (2 * h);
      EXPECT_NEAR(g[i], numeric, 1e-6 * (1 + std::fabs(numeric))) << "d loss / d " << name << "[" << i << "]";
    }
  }
}

TEST(LayerNorm, GradientsMatchCentralDifferences) {
  check_gradient(Norm::layer, {{3, 5}, true, true}, 1e-5);
  check_gradient(Norm::layer, {{2, 2, 3}, false, true}, 1e-3);
  check_gradient(Norm::layer, {{4}, true, false}, 1e-5);
}

TEST(RmsNorm, GradientsMatchCentralDifferences) {
  check_gradient(Norm::rms, {{3, 5}, true, false}, 1e-6);
  check_gradient(Norm::rms, {{2, 2, 3}, false, false}, 1e-2);
}

void expect_shape_error(const std::function<void(tg::GraphBuilder&)>& trace, std::string_view op,
                        std::string_view rule_part) {
  tg::GraphBuilder b("g");
  tg::TracingScope scope(b);
  try {
    trace(b);
    ADD_FAILURE() << "expected a ShapeError from " << op;
  } catch (const tg::ShapeError& e) {
    EXPECT_EQ(e.op(), op);
    EXPECT_NE(std::string(e.what()).find(rule_part), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("normalization_test.cpp"), std::string::npos) << e.what();
  }
}

TEST(Normalization, AffineParametersMustBeShapedLikeTheLastAxis) {
  const tg::TensorType x{DType::f32, {2, 5}};
  expect_shape_error(
      [&](tg::GraphBuilder& b) {
        tg::layer_norm(b.input("x", x), b.input("g", {DType::f32, {4}}), {});
      },
      "layer_norm", "gain must have shape [5] (the last axis of the input), got [4]");
  expect_shape_error(
      [&](tg::GraphBuilder& b) {
        tg::layer_norm(b.input("x", x), {}, b.input("b", {DType::f32, {1, 5}}));
      },
      "layer_norm", "bias must have shape [5] (the last axis of the input), got [1,5]");
  expect_shape_error(
      [&](tg::GraphBuilder& b) {
        tg::rms_norm(b.input("x", x), b.input("g", {DType::f32, {2}}));
      },
      "rms_norm", "gain must have shape [5] (the last axis of the input), got [2]");
  expect_shape_error(
      [&](tg::GraphBuilder& b) {
        tg::layer_norm(b.input("x", x), b.input("g", {DType::i32, {5}}), {});
      },
      "layer_norm", "gain is i32 but the input is f32");
}

TEST(Normalization, InputMustBeFloatWithAnAxis) {
  expect_shape_error(
      [](tg::GraphBuilder& b) {
        tg::layer_norm(b.input("x", {DType::f32, {}}), {}, {});
      },
      "layer_norm", "at least one axis");
  expect_shape_error(
      [](tg::GraphBuilder& b) {
        tg::rms_norm(b.input("x", {DType::i32, {3}}), {});
      },
      "rms_norm", "input must be a float dtype (f32, f16, bf16), got i32");
}

}  // namespace
