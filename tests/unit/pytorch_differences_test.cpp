// Behaviours where docs/ops.md's "PyTorch:" lines say tensorgrad differs from PyTorch (or agrees at
// an edge where one might expect otherwise) and no other test pins them. The kinks and ties
// (abs, relu, clamp, minimum/maximum, max/min, argmax, max_pool2d, sqrt/rsqrt/log at 0, div by 0)
// are pinned on every backend by tests/support/convention_cases.h; the Axes spelling by
// axes_spelling_test.cpp. Each expectation here runs on interp_f64 and interp_f32.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <numbers>
#include <string>
#include <vector>

#include "support/library.h"

namespace {

using tg::ComputeType;
using tg::DType;
using tg::HostTensor;
using tg::Shape;
using tg::Tensor;

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr float kInfF = std::numeric_limits<float>::infinity();
constexpr ComputeType kBoth[] = {ComputeType::f64, ComputeType::f32};

// One input `x`, one output `y`, and with `grad` the gradient of sum(y) as "grad.x".
tg::TensorMap run(const HostTensor& x, const std::function<Tensor(const Tensor&)>& build, ComputeType compute,
                  bool grad = false) {
  tg::GraphBuilder b("torch_diff");
  tg::TracingScope scope(b);
  const Tensor in = grad ? b.param("x", x.type) : b.input("x", x.type);
  const Tensor y = build(in);
  b.output("y", y);
  if (grad) b.output("loss", tg::sum(y));
  tg::Graph g = b.take();
  if (grad) g = tg::differentiate(g, {.loss = "loss"});
  tg::InterpOptions options;
  options.compute = compute;
  return tg::interpret(g, {{"x", x}}, options).outputs;
}

// A row of only -inf has no maximum to subtract: softmax and log_softmax give NaN there, as
// torch.softmax does; a -inf entry beside a finite one gets 0 (log: -inf), the rest sums to 1.
TEST(PyTorchDifferences, SoftmaxOfMinusInfinityRows) {
  const HostTensor x = HostTensor::f32({2, 2}, {-kInfF, -kInfF, 0.f, -kInfF});
  for (ComputeType compute : kBoth) {
    const HostTensor p = run(
                             x, [](const Tensor& t) { return tg::softmax(t, -1); }, compute)
                             .at("y");
    EXPECT_TRUE(std::isnan(p.at(0)) && std::isnan(p.at(1)));
    EXPECT_EQ(p.at(2), 1.0);
    EXPECT_EQ(p.at(3), 0.0);
    const HostTensor lp = run(
                              x, [](const Tensor& t) { return tg::log_softmax(t, -1); }, compute)
                              .at("y");
    EXPECT_TRUE(std::isnan(lp.at(0)) && std::isnan(lp.at(1)));
    EXPECT_EQ(lp.at(2), 0.0);
    EXPECT_EQ(lp.at(3), -kInf);
  }
}

// Over an empty axis, sum is 0 and mean is 0/0 = NaN, as torch.sum and torch.mean.
TEST(PyTorchDifferences, SumAndMeanOverAnEmptyAxis) {
  const HostTensor x = HostTensor::f32({2, 0}, std::vector<float>{});
  for (ComputeType compute : kBoth) {
    const HostTensor s = run(
                             x, [](const Tensor& t) { return tg::sum(t, 1); }, compute)
                             .at("y");
    EXPECT_EQ(s.type.shape, Shape({2}));
    EXPECT_EQ(s.to_f64(), (std::vector<double>{0, 0}));
    const HostTensor m = run(
                             x, [](const Tensor& t) { return tg::mean(t, 1); }, compute)
                             .at("y");
    ASSERT_EQ(m.size(), 2);
    EXPECT_TRUE(std::isnan(m.at(0)) && std::isnan(m.at(1)));
  }
}

// There is no ignore_index: PyTorch's default -100 skips such a target, tensorgrad fails the run
// naming the target, for both losses.
TEST(PyTorchDifferences, NoIgnoreIndexForTheLosses) {
  using LossFn = Tensor (*)(const Tensor&, const Tensor&, tg::LossOptions, tg::CallSite);
  for (auto [loss, name] :
       {std::pair{LossFn{tg::cross_entropy}, "cross_entropy"}, std::pair{LossFn{tg::nll_loss}, "nll_loss"}}) {
    SCOPED_TRACE(name);
    tg::GraphBuilder b("ignore_index");
    tg::TracingScope scope(b);
    const Tensor logits = b.input("logits", {DType::f32, {2, 3}});
    const Tensor targets = b.input("targets", {DType::i32, {2}});
    b.output("loss", loss(logits, targets, {}, tg::CallSite::current()));
    const tg::Graph g = b.take();
    try {
      tg::interpret(
          g, {{"logits", HostTensor::f32({2, 3}, {1, 2, 3, 4, 5, 6})}, {"targets", HostTensor::i32({2}, {0, -100})}});
      ADD_FAILURE() << name << " accepted the target -100";
    } catch (const tg::RuntimeError& e) {
      EXPECT_NE(std::string(e.what()).find("target -100"), std::string::npos) << e.what();
    }
  }
}

// The class axis is the last one ([..., C]), where PyTorch takes dim 1 ([N, C, d...]): logits
// [2, 3, 4] with targets [2, 3] give one loss per (n, t) over 4 classes.
TEST(PyTorchDifferences, LossClassAxisIsTheLast) {
  std::vector<float> logits(24);
  for (std::size_t i = 0; i < logits.size(); ++i) logits[i] = static_cast<float>(i % 5) * 0.5f;
  const std::vector<std::int32_t> targets = {0, 1, 2, 3, 0, 1};
  tg::GraphBuilder b("class_axis");
  tg::TracingScope scope(b);
  const Tensor x = b.input("x", {DType::f32, {2, 3, 4}});
  const Tensor t = b.input("t", {DType::i32, {2, 3}});
  b.output("loss", tg::cross_entropy(x, t, {.reduction = tg::Reduction::none}));
  const HostTensor loss =
      tg::interpret(b.take(), {{"x", HostTensor::f32({2, 3, 4}, logits)}, {"t", HostTensor::i32({2, 3}, targets)}})
          .outputs.at("loss");
  ASSERT_EQ(loss.type.shape, Shape({2, 3}));
  for (std::size_t row = 0; row < 6; ++row) {
    double log_sum = 0;
    for (std::size_t c = 0; c < 4; ++c) log_sum += std::exp(static_cast<double>(logits[row * 4 + c]));
    const double want =
        std::log(log_sum) - static_cast<double>(logits[row * 4 + static_cast<std::size_t>(targets[row])]);
    EXPECT_NEAR(loss.at(static_cast<std::int64_t>(row)), want, 1e-12) << "row " << row;
  }
}

// tanh' and sigmoid' are computed from sigmoids of opposite arguments, so where the output has
// rounded to +-1 (|x| >= 9 for tanh, x >= 17 for sigmoid in f32) the f32 gradient keeps the true
// tiny slope; PyTorch's 1 - y^2 and y (1 - y) give exactly 0 there.
TEST(PyTorchDifferences, SaturatedTanhAndSigmoidKeepTheirSlope) {
  const HostTensor x = HostTensor::f32({2}, {10.f, 20.f});
  const auto tanh_grad = run(
                             x, [](const Tensor& t) { return tg::tanh(t); }, ComputeType::f32, true)
                             .at("grad.x");
  const auto sigmoid_grad = run(
                                x, [](const Tensor& t) { return tg::sigmoid(t); }, ComputeType::f32, true)
                                .at("grad.x");
  for (std::int64_t i = 0; i < 2; ++i) {
    const double xi = x.at(i);
    const double tanh_slope = 1.0 / (std::cosh(xi) * std::cosh(xi));
    const double sig = 1.0 / (1.0 + std::exp(-xi));
    const double sigmoid_slope = sig * (1.0 - sig);
    EXPECT_GT(tanh_grad.at(i), 0.0);
    EXPECT_NEAR(tanh_grad.at(i), tanh_slope, 1e-5 * tanh_slope);
    EXPECT_GT(sigmoid_grad.at(i), 0.0);
    EXPECT_NEAR(sigmoid_grad.at(i), sigmoid_slope, 1e-5 * sigmoid_slope);
  }
}

// gelu is the tanh approximation (PyTorch's approximate='tanh'), not torch.nn.functional.gelu's
// default erf form; at x = 1 the two differ by 1.5e-4.
TEST(PyTorchDifferences, GeluIsTheTanhApproximation) {
  const HostTensor x = HostTensor::f32({3}, {1.f, -0.5f, 2.f});
  const HostTensor y = run(
                           x, [](const Tensor& t) { return tg::gelu(t); }, ComputeType::f64)
                           .at("y");
  for (std::int64_t i = 0; i < 3; ++i) {
    const double xi = x.at(i);
    const double tanh_form =
        0.5 * xi * (1 + std::tanh(std::sqrt(2 / std::numbers::pi) * (xi + 0.044715 * xi * xi * xi)));
    const double erf_form = 0.5 * xi * (1 + std::erf(xi / std::sqrt(2.0)));
    EXPECT_NEAR(y.at(i), tanh_form, 1e-14);
    EXPECT_GT(std::fabs(y.at(i) - erf_form), 1e-5);
  }
}

// Index and creation results are i32 or f32 where PyTorch returns int64: argmax/argmin i32,
// arange i32 by default, one_hot f32, full f32 whatever the value.
TEST(PyTorchDifferences, IndexAndCreationDtypes) {
  tg::GraphBuilder b("dtypes");
  tg::TracingScope scope(b);
  const Tensor x = b.input("x", {DType::f32, {2, 3}});
  EXPECT_EQ(tg::argmax(x, 1).dtype(), DType::i32);
  EXPECT_EQ(tg::argmin(x).dtype(), DType::i32);
  EXPECT_EQ(tg::arange(4).dtype(), DType::i32);
  EXPECT_EQ(tg::one_hot(tg::arange(4), 5).dtype(), DType::f32);
  EXPECT_EQ(tg::full({2}, 3.0).dtype(), DType::f32);
}

}  // namespace
