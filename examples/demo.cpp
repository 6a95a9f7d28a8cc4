// tensorgrad demo: trace a 2-layer MLP with an MSE loss, differentiate it into one graph that returns
// the loss and every parameter's gradient, run that graph on the CPU interpreter in f64 (the oracle)
// and in f32, and check one gradient entry against a central finite difference.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <string>
#include <utility>
#include <vector>

#include "tensorgrad/tensorgrad.h"

namespace {

constexpr std::int64_t kBatch = 8, kIn = 2, kHidden = 4, kOut = 1;

// Deterministic inputs and weights (no RNG, so every run prints the same numbers).
std::vector<double> wave(std::int64_t n, double phase, double scale) {
  std::vector<double> v(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = scale * std::sin(1.7 * static_cast<double>(i) + phase);
  return v;
}

tg::HostTensor tensor(tg::Shape shape, std::vector<double> values) {
  return tg::HostTensor::of({tg::DType::f32, std::move(shape)}, std::move(values));
}

// forward: loss = mean((tanh(x W1 + b1) W2 + b2 - y)^2)
tg::Graph trace_mlp() {
  tg::GraphBuilder b("mlp");
  tg::TracingScope scope(b);
  tg::Tensor x = b.input("x", {tg::DType::f32, {kBatch, kIn}});
  tg::Tensor y = b.input("y", {tg::DType::f32, {kBatch, kOut}});
  tg::Tensor w1 = b.param("l1.W", {tg::DType::f32, {kIn, kHidden}});
  tg::Tensor b1 = b.param("l1.b", {tg::DType::f32, {kHidden}});
  tg::Tensor w2 = b.param("l2.W", {tg::DType::f32, {kHidden, kOut}});
  tg::Tensor b2 = b.param("l2.b", {tg::DType::f32, {kOut}});

  tg::Tensor h = tg::tanh(tg::matmul(x, w1) + b1);
  tg::Tensor pred = tg::matmul(h, w2) + b2;
  b.output("loss", tg::mean(tg::square(pred - y)));
  return b.take();
}

tg::TensorMap make_inputs() {
  tg::TensorMap in;
  in.emplace("x", tensor({kBatch, kIn}, wave(kBatch * kIn, 0.0, 1.0)));
  in.emplace("y", tensor({kBatch, kOut}, wave(kBatch * kOut, 0.5, 0.8)));
  in.emplace("l1.W", tensor({kIn, kHidden}, wave(kIn * kHidden, 1.0, 0.7)));
  in.emplace("l1.b", tensor({kHidden}, wave(kHidden, 2.0, 0.1)));
  in.emplace("l2.W", tensor({kHidden, kOut}, wave(kHidden * kOut, 3.0, 0.7)));
  in.emplace("l2.b", tensor({kOut}, {0.05}));
  return in;
}

tg::InterpResult run(const tg::Graph& graph, const tg::TensorMap& inputs, tg::ComputeType compute) {
  tg::InterpOptions options;
  options.compute = compute;
  return tg::interpret(graph, inputs, options);
}

void print_values(const char* label, const tg::HostTensor& t) {
  std::printf("  %-10s %-10s [", label, t.type.to_string().c_str());
  for (std::size_t i = 0; i < t.values.size(); ++i) std::printf("%s% .6f", i ? ", " : "", t.values[i]);
  std::printf("]\n");
}

}  // namespace

int main() {
  try {
    const tg::Graph forward = trace_mlp();
    std::printf("== forward graph\n%s\n", tg::print_graph(forward).c_str());

    // One program: the loss plus "grad.<param>" for every param input.
    const tg::Graph step = tg::differentiate(forward);
    std::printf("== loss + gradients graph (%zu nodes)\n%s\n", step.nodes().size(),
                tg::print_graph(step, {.locations = false}).c_str());

    const tg::TensorMap inputs = make_inputs();
    const tg::InterpResult f64 = run(step, inputs, tg::ComputeType::f64);
    const tg::InterpResult f32 = run(step, inputs, tg::ComputeType::f32);

    std::printf("== loss\n  f64 %.15f\n  f32 %.15f\n", f64.outputs.at("loss").values.at(0),
                f32.outputs.at("loss").values.at(0));
    for (const auto& [mode, result] : {std::pair{"f64", &f64}, std::pair{"f32", &f32}}) {
      std::printf("== gradients (%s)\n", mode);
      for (const auto& [name, value] : result->outputs) {
        if (name.starts_with("grad.")) print_values(name.c_str() + 5, value);
      }
    }

    // Central finite difference of the forward loss in f64 against d loss / d l1.W[0,1].
    const std::size_t entry = 1;
    const double eps = 1e-6;
    auto loss_at = [&](double delta) {
      tg::TensorMap shifted = inputs;
      shifted.at("l1.W").values.at(entry) += delta;
      return run(forward, shifted, tg::ComputeType::f64).outputs.at("loss").values.at(0);
    };
    const double numeric = (loss_at(eps) - loss_at(-eps)) / (2 * eps);
    const double analytic = f64.outputs.at("grad.l1.W").values.at(entry);
    const double rel = std::abs(numeric - analytic) / std::max(1e-12, std::abs(numeric) + std::abs(analytic));
    std::printf(
        "== finite-difference check, l1.W[0,1]\n  autodiff    % .12f\n  central FD  % .12f\n"
        "  rel. error  %.3g\n",
        analytic, numeric, rel);
    if (rel > 1e-6) {
      std::fprintf(stderr, "demo: gradient check FAILED\n");
      return 1;
    }
    std::printf("demo: OK\n");
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "demo: error: %s\n", e.what());
    return 1;
  }
}
