// Large magnitudes (issue 13 item 5) on the interpreters: every op whose correctness depends on
// magnitude (exp, sigmoid, tanh, gelu, silu, softmax, log_softmax, softmax_causal, cross_entropy),
// on inputs up to |x| = 1e4 with the exact overflow points of f32 and f64 exp, forward and gradient
// (loss = sum(y * w) through tg::differentiate): the f32 interpreter against the f64 oracle under
// the per-element bounds of tests/support/large_magnitude_bounds.h, and the f64 oracle itself
// against long double references of the elementwise functions and their derivatives (an oracle
// that rounds 1 + tanh(u) to 0 agrees with an f32 run that does the same, so only an independent
// reference finds that).
#include <gtest/gtest.h>
#include <tbb/global_control.h>

#include <iostream>

#include "property_support.h"
#include "support/large_magnitude.h"
#include "support/large_magnitude_bounds.h"
#include "support/op_seed.h"
#include "tensorgrad/ir/ops/ids/elementwise_unary.h"
#include "tensorgrad/ir/ops/ids/losses.h"
#include "tensorgrad/ir/ops/ids/softmax.h"

namespace tg::testing::large {
namespace {

class LargeMagnitude : public ::testing::TestWithParam<OpId> {};

std::string op_param_name(const ::testing::TestParamInfo<OpId>& info) { return std::string(op_name(info.param)); }

std::vector<Case> all_cases(OpId op) {
  std::vector<Case> cases = fixed_cases(op);
  const int random = scaled_cases(40);
  for (int i = 0; i < random; ++i) {
    cases.push_back(random_case(op, 0x1a4e0000ULL + static_cast<std::uint64_t>(i) * 104729 + tg::testing::op_seed(op)));
  }
  return cases;
}

TEST_P(LargeMagnitude, F32InterpreterMatchesTheF64OracleForwardAndGradient) {
  double worst_forward = 0, worst_gradient = 0;
  for (const Case& c : all_cases(GetParam())) {
    SCOPED_TRACE(c.label);
    const auto oracle = interpret(c.forward, c.inputs, {.compute = ComputeType::f64}).outputs.at("y").to_f64();
    const auto fast = interpret(c.forward, c.inputs, {.compute = ComputeType::f32}).outputs.at("y").to_f64();
    const auto x = c.inputs.at("x").to_f64();
    const Comparison forward = compare("y", x, oracle, fast, forward_allowed(c, oracle));
    ASSERT_FALSE(forward.failure) << *forward.failure;
    worst_forward = std::max(worst_forward, forward.worst);

    TensorMap inputs;
    const Graph grad_graph = gradient_graph(c, inputs, 0x9a4d + x.size());
    const auto grad_oracle = interpret(grad_graph, inputs, {.compute = ComputeType::f64}).outputs;
    const auto grad_fast = interpret(grad_graph, inputs, {.compute = ComputeType::f32}).outputs;
    const auto y = grad_oracle.at("y").to_f64();
    const auto g = grad_oracle.at("grad.x").to_f64();
    const Comparison gradient =
        compare("grad.x", x, g, grad_fast.at("grad.x").to_f64(), gradient_allowed(c, inputs, y, g));
    ASSERT_FALSE(gradient.failure) << *gradient.failure << "gradient graph:\n"
                                   << print_graph(grad_graph, {.locations = false});
    worst_gradient = std::max(worst_gradient, gradient.worst);
  }
  // How close the cases came to their bounds (1 = at the bound): a bound far above what any case
  // uses is a bound worth tightening.
  std::cout << op_name(GetParam()) << ": worst error / bound, forward " << worst_forward << ", gradient "
            << worst_gradient << "\n";
}

// Long double references of the elementwise functions, f'(x), and the size of the terms f' adds
// (cancellation at f' = 0 is measured against those).
struct Reference {
  long double value, slope, slope_terms;
};

Reference reference(OpId op, long double x) {
  switch (op) {
    case op::Exp:
      return {std::exp(x), std::exp(x), std::exp(x)};
    case op::Sigmoid: {
      const long double s = sigmoid_ld(x), t = sigmoid_ld(-x);
      return {s, s * t, s * t};
    }
    case op::Tanh: {
      const long double t = 4 * sigmoid_ld(2 * x) * sigmoid_ld(-2 * x);  // sech^2, no cancellation
      return {std::tanh(x), t, t};
    }
    case op::Silu: {
      const long double s = sigmoid_ld(x), xs = x * sigmoid_ld(-x);
      return {x * s, s * (1 + xs), s * (1 + std::fabs(xs))};
    }
    case op::Gelu: {
      // x/2 (1 + tanh(u)) = x sigmoid(2u): the same function, without 1 + tanh cancelling.
      const long double v = gelu_v(x);
      const long double dv = 2 * 0.7978845608028654L * (1 + 3 * 0.044715L * x * x);
      const long double s = sigmoid_ld(v), inner = x * sigmoid_ld(-v) * dv;
      return {x * s, s * (1 + inner), s * (1 + std::fabs(inner))};
    }
    default:
      return {0, 0, 0};
  }
}

// The oracle is right to far below f32's precision: its value rounded to f32 is the reference's,
// or within 1e-12 relative (of the terms' size) of it.
bool oracle_agrees(double oracle, long double ref, long double terms) {
  const auto rounded = static_cast<float>(ref);
  if (static_cast<float>(oracle) == rounded) return true;
  if (std::isinf(rounded)) return false;
  return std::fabs(static_cast<long double>(oracle) - ref) <= 1e-12L * (std::fabs(ref) + terms) + 1e-300L;
}

// A reference value and the size of the terms it is a sum of.
struct Term {
  long double value = 0, terms = 0;
};

struct References {
  std::vector<Term> y, grad;
};

// The elementwise ops from reference(); the row ops from their definitions over long double row
// sums: softmax p = exp(x - m) / S with S = sum exp(x - m), log_softmax x - m - log S, cross_entropy
// log S + m - x_t, and the gradients of sum(y * w).
References references(const Case& c, const TensorMap& inputs) {
  const auto x = inputs.at("x").to_f64();
  const auto w = inputs.at("w").to_f64();
  References r;
  if (is_unary(c.op)) {
    for (std::size_t i = 0; i < x.size(); ++i) {
      const Reference f = reference(c.op, x[i]);
      r.y.push_back({f.value, 0});
      r.grad.push_back({w[i] * f.slope, std::fabs(w[i]) * f.slope_terms});
    }
    return r;
  }
  r.grad.resize(x.size());
  const Rows rows = rows_of(c);
  if (c.op != op::CrossEntropy) r.y.resize(x.size());
  long double total = 0, total_terms = 0;
  for (std::size_t k = 0; k < rows.visible.size(); ++k) {
    const auto& row = rows.visible[k];
    const RowStats s = row_stats(x, row);
    const long double log_s = std::log(s.sum);
    long double w_sum = 0, w_abs = 0, wp = 0, wp_abs = 0;
    for (std::size_t i : row) {
      const long double p = std::exp(x[i] - s.max) / s.sum;
      w_sum += w.size() == x.size() ? w[i] : 0;
      w_abs += w.size() == x.size() ? std::fabs(w[i]) : 0;
      wp += w.size() == x.size() ? w[i] * p : 0;
      wp_abs += w.size() == x.size() ? std::fabs(w[i] * p) : 0;
    }
    const double n_rows = static_cast<double>(rows.visible.size());
    for (std::size_t j = 0; j < row.size(); ++j) {
      const std::size_t i = row[j];
      const long double d = x[i] - s.max, p = std::exp(d) / s.sum;
      if (c.op == op::LogSoftmax) {
        r.y[i] = {d - log_s, std::fabs(d) + log_s + 1};
        r.grad[i] = {w[i] - p * w_sum, std::fabs(w[i]) + p * w_abs};
      } else if (c.op == op::CrossEntropy) {
        const double cot =
            c.reduction == Reduction::none ? w[k] : (c.reduction == Reduction::mean ? w[0] / n_rows : w[0]);
        const bool target = static_cast<double>(j) == inputs.at("t").at(k);
        r.grad[i] = {(p - (target ? 1 : 0)) * cot, (p + (target ? 1 : 0)) * std::fabs(cot)};
      } else {
        r.y[i] = {p, 0};
        r.grad[i] = {p * (w[i] - wp), p * (std::fabs(w[i]) + wp_abs)};
      }
    }
    if (c.op == op::CrossEntropy) {
      const auto t = static_cast<std::size_t>(inputs.at("t").at(k));
      const long double loss = log_s + (s.max - x[row[t]]);
      if (c.reduction == Reduction::none) r.y.push_back({loss, loss + 1});
      total += loss;
      total_terms += loss + 1;
    }
  }
  if (c.op == op::CrossEntropy && c.reduction != Reduction::none) {
    const auto n = static_cast<long double>(rows.visible.size());
    r.y.push_back(c.reduction == Reduction::mean ? Term{total / n, total_terms / n} : Term{total, total_terms});
  }
  for (std::size_t i : rows.masked) r.y[i] = {0, 0};
  return r;
}

TEST_P(LargeMagnitude, TheF64OracleMatchesALongDoubleReference) {
  const OpId op = GetParam();
  for (const Case& c : all_cases(op)) {
    SCOPED_TRACE(c.label);
    TensorMap inputs;
    const Graph grad_graph = gradient_graph(c, inputs, 7);
    const auto out = interpret(grad_graph, inputs, {.compute = ComputeType::f64}).outputs;
    const References ref = references(c, inputs);
    const auto x = inputs.at("x").to_f64();
    int bad = 0;
    for (const auto& [name, want] : {std::pair{"y", &ref.y}, std::pair{"grad.x", &ref.grad}}) {
      const auto got = out.at(name).to_f64();
      ASSERT_EQ(got.size(), want->size()) << name;
      for (std::size_t i = 0; i < got.size() && bad < 5; ++i) {
        if (oracle_agrees(got[i], (*want)[i].value, (*want)[i].terms)) continue;
        ++bad;
        ADD_FAILURE() << name << "[" << i << "] at x = " << (i < x.size() ? fmt(x[i]) : "-") << ": oracle "
                      << fmt(got[i]) << ", reference " << fmt(static_cast<double>((*want)[i].value));
      }
    }
    ASSERT_EQ(bad, 0);
  }
}

// The f32 results do not depend on the thread count at these magnitudes either.
TEST_P(LargeMagnitude, F32BitsDoNotDependOnTheThreadCount) {
  for (const Case& c : fixed_cases(GetParam())) {
    SCOPED_TRACE(c.label);
    TensorMap inputs;
    const Graph grad_graph = gradient_graph(c, inputs, 11);
    const auto many = interpret(grad_graph, inputs, {.compute = ComputeType::f32}).outputs;
    tbb::global_control single(tbb::global_control::max_allowed_parallelism, 1);
    const auto one = interpret(grad_graph, inputs, {.compute = ComputeType::f32}).outputs;
    for (const auto& [name, t] : many) {
      for (std::size_t i = 0; i < t.size(); ++i) {
        const double a = t.at(i), b = one.at(name).at(i);
        ASSERT_TRUE(a == b || (std::isnan(a) && std::isnan(b))) << name << "[" << i << "]: " << a << " vs " << b;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Ops, LargeMagnitude, ::testing::ValuesIn(magnitude_ops()), op_param_name);

}  // namespace
}  // namespace tg::testing::large
