// The losses family: nll_loss and cross_entropy against loops written here for every reduction, in
// both compute types; numerical stability on large logits; out-of-range targets (a RuntimeError
// naming the op and the value); shape and reduction errors; gradients (first and second order)
// through tg::differentiate against closed forms and finite differences; and, for every op the
// registry lists in the family, the OpDef parts, f32 against the oracle and the grad rules against
// finite differences.
#include "tensorgrad/ir/ops/ids/losses.h"

#include <gtest/gtest.h>
#include <tbb/global_control.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "support/library.h"
#include "support/op_family.h"

namespace {

using tg::ComputeType;
using tg::DType;
using tg::HostTensor;
using tg::OpId;
namespace op = tg::op;
using tg::Reduction;
using tg::Tensor;
using tg::TensorType;

constexpr ComputeType kComputeTypes[] = {ComputeType::f64, ComputeType::f32};
constexpr Reduction kReductions[] = {Reduction::none, Reduction::mean, Reduction::sum};

using LossFn = Tensor (*)(const Tensor&, const Tensor&, tg::LossOptions, tg::CallSite);

std::vector<float> test_values(std::int64_t n, std::uint64_t seed, double lo = -3, double hi = 3) {
  tg::SampleRng rng(seed);
  std::vector<float> v(static_cast<std::size_t>(n));
  for (auto& x : v) x = static_cast<float>(rng.uniform(lo, hi));
  return v;
}

std::vector<std::int32_t> targets_below(std::int64_t n, std::int64_t classes, std::uint64_t seed) {
  tg::SampleRng rng(seed);
  std::vector<std::int32_t> v(static_cast<std::size_t>(n));
  for (auto& t : v) t = static_cast<std::int32_t>(rng.uniform_int(0, classes - 1));
  return v;
}

HostTensor run_loss(LossFn loss, Reduction reduction, const HostTensor& scores, const HostTensor& targets,
                    ComputeType compute = ComputeType::f64) {
  tg::GraphBuilder b("g");
  tg::TracingScope scope(b);
  b.output("y", loss(b.input("s", scores.type), b.input("t", targets.type), {.reduction = reduction},
                     tg::CallSite::current()));
  return tg::interpret(b.take(), {{"s", scores}, {"t", targets}}, {.compute = compute, .check_coverage = true})
      .outputs.at("y");
}

// Per-position losses by loops: -x[target] for NLL, logsumexp(x) - x[target] for cross-entropy.
std::vector<double> reference_losses(bool cross_entropy, const std::vector<float>& x,
                                     const std::vector<std::int32_t>& targets, std::int64_t classes) {
  std::vector<double> out;
  for (std::size_t n = 0; n < targets.size(); ++n) {
    const float* row = x.data() + n * static_cast<std::size_t>(classes);
    double lse = 0;
    if (cross_entropy) {
      double m = row[0];
      for (std::int64_t c = 1; c < classes; ++c) m = std::max(m, double(row[c]));
      for (std::int64_t c = 0; c < classes; ++c) lse += std::exp(row[c] - m);
      lse = m + std::log(lse);
    }
    out.push_back(lse - row[targets[n]]);
  }
  return out;
}

std::vector<double> reduce(Reduction reduction, const std::vector<double>& losses) {
  if (reduction == Reduction::none) return losses;
  double total = 0;
  for (double v : losses) total += v;
  return {reduction == Reduction::mean ? total / static_cast<double>(losses.size()) : total};
}

void check_forward(LossFn loss, bool cross_entropy, const tg::Shape& shape, double lo, double hi) {
  const std::int64_t classes = shape.back();
  const tg::Shape batch(shape.begin(), shape.end() - 1);
  const auto x = test_values(tg::num_elements(shape), 3, lo, hi);
  const auto t = targets_below(tg::num_elements(batch), classes, 4);
  const auto per_position = reference_losses(cross_entropy, x, t, classes);
  for (Reduction reduction : kReductions) {
    for (ComputeType compute : kComputeTypes) {
      SCOPED_TRACE("reduction " + std::to_string(static_cast<int>(reduction)) +
                   (compute == ComputeType::f64 ? " f64" : " f32"));
      const auto y = run_loss(loss, reduction, HostTensor::f32(shape, x), HostTensor::i32(batch, t), compute);
      EXPECT_EQ(y.type, (TensorType{DType::f32, reduction == Reduction::none ? batch : tg::Shape{}}));
      const auto expected = reduce(reduction, per_position);
      ASSERT_EQ(y.size(), expected.size());
      // Errors relative to the largest magnitude involved, input or result.
      const double base = compute == ComputeType::f64 ? 1e-13 : 2e-6;
      for (std::size_t i = 0; i < expected.size(); ++i) {
        const double scale = std::max({1.0, std::fabs(lo), std::fabs(hi), std::fabs(expected[i])});
        EXPECT_NEAR(y.at(i), expected[i], base * scale);
      }
    }
  }
}

TEST(NllLoss, MatchesLoopsForEveryReduction) {
  check_forward(tg::nll_loss, false, {2, 3, 4}, -3, 0);
  check_forward(tg::nll_loss, false, {5, 1}, -2, 2);  // one class
  check_forward(tg::nll_loss, false, {6}, -2, 2);     // one position, a 0-d target
}

TEST(CrossEntropy, MatchesLoopsForEveryReduction) {
  check_forward(tg::cross_entropy, true, {2, 3, 4}, -3, 3);
  check_forward(tg::cross_entropy, true, {7, 9}, -3, 3);
  check_forward(tg::cross_entropy, true, {5}, -3, 3);
}

// Logits of magnitude 1000 overflow a naive exp in both float types; the fused kernel stays exact.
TEST(CrossEntropy, StableForLargeLogits) {
  check_forward(tg::cross_entropy, true, {4, 6}, -1000, 1000);
  const auto y = run_loss(tg::cross_entropy, Reduction::none, HostTensor::f32({2, 2}, {1000, -1000, 50, 50}),
                          HostTensor::i32({2}, {1, 0}), ComputeType::f32);
  EXPECT_EQ(y.at(0), 2000.0);
  EXPECT_NEAR(y.at(1), std::log(2.0), 1e-6);
}

TEST(CrossEntropy, EqualsNllOfLogSoftmax) {
  const auto x = test_values(3 * 5, 8);
  const auto t = targets_below(3, 5, 9);
  tg::GraphBuilder b("g");
  tg::TracingScope scope(b);
  const Tensor s = b.input("s", {DType::f32, {3, 5}});
  const Tensor ts = b.input("t", {DType::i32, {3}});
  b.output("fused", tg::cross_entropy(s, ts));
  b.output("unfused", tg::nll_loss(tg::log_softmax(s), ts));
  const auto out = tg::interpret(b.take(), {{"s", HostTensor::f32({3, 5}, x)}, {"t", HostTensor::i32({3}, t)}}).outputs;
  EXPECT_NEAR(out.at("fused").at(0), out.at("unfused").at(0), 1e-14);
}

TEST(Losses, RefuseOutOfRangeTargets) {
  for (auto [loss, name] :
       {std::pair{LossFn{tg::nll_loss}, "nll_loss"}, std::pair{LossFn{tg::cross_entropy}, "cross_entropy"}}) {
    for (std::int32_t bad : {3, -2}) {
      try {
        run_loss(loss, Reduction::mean, HostTensor::f32({2, 3}, test_values(6, 1)), HostTensor::i32({2}, {0, bad}));
        ADD_FAILURE() << name << " accepted target " << bad;
      } catch (const tg::RuntimeError& e) {
        const std::string what = e.what();
        for (const std::string& part : {std::string(name) + ":", "target " + std::to_string(bad), std::string("[0, 3)"),
                                        std::string("element 1"), std::string("losses_test.cpp")}) {
          EXPECT_NE(what.find(part), std::string::npos) << part << " missing in: " << what;
        }
      }
    }
  }
}

void expect_shape_error(const std::function<void()>& trace, std::string_view op, const std::string& rule_part) {
  try {
    trace();
    ADD_FAILURE() << "expected a ShapeError from " << op;
  } catch (const tg::ShapeError& e) {
    EXPECT_EQ(e.op(), op);
    EXPECT_NE(std::string(e.what()).find(rule_part), std::string::npos) << e.what();
  }
}

TEST(Losses, RefuseBadShapesAndReductions) {
  tg::GraphBuilder b("g");
  tg::TracingScope scope(b);
  const Tensor x = b.input("x", {DType::f32, {2, 3}});
  const Tensor t = b.input("t", {DType::i32, {2}});
  expect_shape_error(
      [&] {
        (void)tg::nll_loss(x, b.input("t3", {DType::i32, {3}}));
      },
      "nll_loss", "targets must have the input's shape without the class axis, [2], got [3]");
  expect_shape_error(
      [&] {
        (void)tg::cross_entropy(x, b.input("tf", {DType::f32, {2}}));
      },
      "cross_entropy", "targets must be i32");
  expect_shape_error(
      [&] {
        (void)tg::cross_entropy(b.input("s", {DType::f32, {}}), b.input("t0", {DType::i32, {}}));
      },
      "cross_entropy", "rank >= 1, got rank 0");
  expect_shape_error(
      [&] {
        (void)tg::nll_loss(b.input("e", {DType::f32, {2, 0}}), t);
      },
      "nll_loss", "at least one class");
  expect_shape_error([&] { (void)tg::nll_loss(x, t, {.reduction = static_cast<Reduction>(7)}); }, "nll_loss",
                     "reduction must be \"none\", \"mean\" or \"sum\"");
  // What a parsed graph could hold: a string the front-end never writes.
  const Tensor inputs[] = {x, t};
  expect_shape_error(
      [&] {
        (void)b.emit(op::CrossEntropy, inputs, tg::Attrs{{"reduction", std::string("avg")}}, tg::SourceLoc{});
      },
      "cross_entropy", "got \"avg\"");
  // The front-end writes the string attribute; mean is the default.
  (void)tg::cross_entropy(x, t);
  EXPECT_EQ(b.graph().nodes().back().attrs.string("reduction"), "mean");
  (void)tg::nll_loss(x, t, {.reduction = Reduction::none});
  EXPECT_EQ(b.graph().nodes().back().attrs.string("reduction"), "none");
}

// Gradient of sum(w * loss(x, t)) with respect to x, by tg::differentiate.
std::vector<double> loss_grad(LossFn loss, Reduction reduction, const HostTensor& x, const HostTensor& t,
                              const HostTensor& w) {
  tg::GraphBuilder b("g");
  tg::TracingScope scope(b);
  const Tensor y = loss(b.input("x", x.type), b.input("t", t.type), {.reduction = reduction}, tg::CallSite::current());
  b.output("loss", tg::sum(y * b.input("w", w.type)));
  const tg::Graph grad = tg::differentiate(b.take(), {.wrt = {"x"}});
  return tg::interpret(grad, {{"x", x}, {"t", t}, {"w", w}}).outputs.at("grad.x").to_f64();
}

// Closed forms: d/dx = g * (softmax(x) - one_hot(t)) for cross-entropy, -g * one_hot(t) for NLL,
// with g the position's cotangent (divided by N for mean).
TEST(Losses, GradientsMatchClosedForms) {
  const std::int64_t positions = 4, classes = 3;
  const auto x = test_values(positions * classes, 5);
  const auto t = targets_below(positions, classes, 6);
  for (bool ce : {false, true}) {
    for (Reduction reduction : kReductions) {
      const TensorType w_type{DType::f32, reduction == Reduction::none ? tg::Shape{positions} : tg::Shape{}};
      const auto w = test_values(w_type.size(), 7, -1, 1);
      const auto got =
          loss_grad(ce ? tg::cross_entropy : tg::nll_loss, reduction, HostTensor::f32({positions, classes}, x),
                    HostTensor::i32({positions}, t), HostTensor::f32(w_type.shape, w));
      for (std::int64_t n = 0; n < positions; ++n) {
        double g = reduction == Reduction::none ? w[static_cast<std::size_t>(n)] : w[0];
        if (reduction == Reduction::mean) g /= static_cast<double>(positions);
        double total = 0;
        for (std::int64_t c = 0; c < classes; ++c)
          total += std::exp(double(x[static_cast<std::size_t>(n * classes + c)]));
        for (std::int64_t c = 0; c < classes; ++c) {
          const auto at = static_cast<std::size_t>(n * classes + c);
          const double hot = c == t[static_cast<std::size_t>(n)] ? 1.0 : 0.0;
          const double expected = ce ? g * (std::exp(double(x[at])) / total - hot) : -g * hot;
          EXPECT_NEAR(got[at], expected, 1e-12) << (ce ? "cross_entropy" : "nll_loss") << " at " << at;
        }
      }
    }
  }
}

// The grad rule is built from differentiable ops: a Hessian-vector product of the mean cross-entropy
// by autodiff matches a finite difference of its gradient.
TEST(Losses, SecondOrderGradientOfCrossEntropy) {
  const tg::Shape shape = {3, 4};
  const auto x = test_values(12, 11);
  const auto v = test_values(12, 12, -1, 1);
  const auto t = targets_below(3, 4, 13);
  tg::GraphBuilder b("g");
  {
    tg::TracingScope scope(b);
    b.output("loss", tg::cross_entropy(b.input("x", {DType::f32, shape}), b.input("t", {DType::i32, {3}})));
  }
  const tg::Graph first = tg::differentiate(b.take(), {.wrt = {"x"}});
  tg::GraphBuilder hb("h");
  hb.mutable_graph() = first;
  {
    tg::TracingScope scope(hb);
    const Tensor dx = hb.wrap(*first.find_output("grad.x"));
    hb.output("hv_loss", tg::sum(dx * hb.input("v", {DType::f32, shape})));
  }
  const tg::Graph second = tg::differentiate(hb.take(), {.loss = "hv_loss", .wrt = {"x"}, .grad_prefix = "h."});
  tg::TensorMap feed{
      {"x", HostTensor::f32(shape, x)}, {"t", HostTensor::i32({3}, t)}, {"v", HostTensor::f32(shape, v)}};
  const auto hv = tg::interpret(second, feed).outputs.at("h.x").to_f64();
  // H v = d/de grad(x + e v): a central difference of the first-order gradient.
  constexpr double kStep = 1e-5;
  tg::TensorMap plus{{"x", feed.at("x")}, {"t", feed.at("t")}};
  tg::TensorMap minus = plus;
  for (std::size_t i = 0; i < 12; ++i) {
    plus.at("x").mutable_wide()[i] += kStep * v[i];
    minus.at("x").mutable_wide()[i] -= kStep * v[i];
  }
  const auto gp = tg::interpret(first, plus).outputs.at("grad.x").to_f64();
  const auto gm = tg::interpret(first, minus).outputs.at("grad.x").to_f64();
  for (std::size_t i = 0; i < 12; ++i) EXPECT_NEAR(hv[i], (gp[i] - gm[i]) / (2 * kStep), 1e-8) << i;
}

TEST(Losses, SameBitsForAnyThreadCount) {
  const std::int64_t positions = 20000, classes = 7;
  const auto x = HostTensor::f32({positions, classes}, test_values(positions * classes, 21));
  const auto t = HostTensor::i32({positions}, targets_below(positions, classes, 22));
  for (LossFn loss : {LossFn{tg::nll_loss}, LossFn{tg::cross_entropy}}) {
    for (ComputeType compute : kComputeTypes) {
      const auto many = run_loss(loss, Reduction::sum, x, t, compute);
      tbb::global_control one(tbb::global_control::max_allowed_parallelism, 1);
      EXPECT_EQ(run_loss(loss, Reduction::sum, x, t, compute).to_f64(), many.to_f64());
    }
  }
}

constexpr std::string_view kFamily = "losses";

// Every op of the family (from the registry) has its parts and valid samples. A loss takes f32
// scores, targets (i32 targets are valid class indices) and a reduction; it sums, so its tolerance
// class is reduction.
TEST(LossesOpDefs, CompleteAndSamplesValid) {
  tg::test::expect_ops_in_family(std::vector<OpId>{op::NllLoss, op::CrossEntropy}, kFamily);
  for (OpId op : tg::test::expect_family_defs(kFamily, 5, 50)) {
    const tg::OpDef& def = tg::op_def(op);
    SCOPED_TRACE(std::string(def.name));
    EXPECT_EQ(def.arity, 2);
    ASSERT_EQ(def.attrs.size(), 1u);
    EXPECT_EQ(def.attrs[0].kind, tg::AttrKind::string);
    EXPECT_TRUE(def.differentiable);
    EXPECT_NE(def.reduction_length, nullptr);
    EXPECT_EQ(def.tolerance, tg::ToleranceClass::reduction);
    tg::SampleRng rng(5);
    int seen[3] = {0, 0, 0};
    for (int i = 0; i < 200; ++i) {
      const auto sample = def.samples(rng, std::nullopt);
      ASSERT_TRUE(sample.has_value());
      ASSERT_EQ(sample->inputs.size(), 2u);
      ASSERT_EQ(sample->domains.size(), 2u);
      EXPECT_LE(sample->inputs[0].size(), 512);
      EXPECT_NO_THROW(tg::infer_type(op, sample->attrs, sample->inputs)) << sample->attrs.to_string();
      if (sample->inputs[1].dtype == DType::i32) {
        EXPECT_EQ(sample->domains[1].kind, tg::ValueDomain::Kind::index);
        EXPECT_EQ(sample->domains[1].lo, 0);
        EXPECT_EQ(sample->domains[1].hi, static_cast<double>(sample->inputs[0].shape.back() - 1));
      }
      const std::string& r = sample->attrs.string("reduction");
      ++seen[r == "none" ? 0 : r == "mean" ? 1 : 2];
      const auto again = def.samples(rng, sample->inputs[0]);
      ASSERT_TRUE(again.has_value());
      EXPECT_EQ(again->inputs[0], sample->inputs[0]);
    }
    for (int count : seen) EXPECT_GT(count, 0);
    EXPECT_FALSE(def.samples(rng, TensorType{DType::i32, {2, 3}}).has_value());
  }
  const TensorType scores{DType::f32, {6, 5}};
  const TensorType targets{DType::i32, {6}};
  const TensorType both[] = {scores, targets};
  const auto length = [&](OpId op, const char* r) {
    return tg::op_def(op).reduction_length(tg::Attrs{{"reduction", std::string(r)}}, std::span<const TensorType>(both));
  };
  EXPECT_EQ(length(op::NllLoss, "none"), 1);
  EXPECT_EQ(length(op::NllLoss, "sum"), 6);
  EXPECT_EQ(length(op::CrossEntropy, "none"), 5);
  EXPECT_EQ(length(op::CrossEntropy, "mean"), 30);
}

TEST(LossesOpDefs, F32RunsMatchTheOracleWithinTheToleranceClass) {
  tg::test::expect_family_runs_match_oracle(kFamily, 7, 20);
}

TEST(LossesGrads, GradRulesMatchFiniteDifferences) {
  tg::test::expect_family_grads_match_finite_differences(kFamily, 3, 6);
}

}  // namespace
