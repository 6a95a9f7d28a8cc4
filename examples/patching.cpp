// Activation patching (tg::patch, docs/training/compile.md "Patches"): an MLP (2-32-32-1, relu)
// learns y = sin(2 x0) * x1 with Adam; its two hidden layers are patch sites "h1" and "h2", captured
// after patching. Then, on a batch B:
//   - zero ablation of each site, and mean ablation with the mean activation over a reference
//     dataset (computed here from captures): how far the output moves;
//   - a cross-input transplant: h1 captured on batch A and patched into the run on B, which makes
//     B's output A's (h1 is the only path from the input);
//   - the cost: the node count of the graph each set of active sites runs.
//
//   tg_patching [--steps N] [--backend auto|vulkan|interp_f32|interp_f64] [--seed S]
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <random>
#include <string>
#include <vector>

#include "backend_choice.h"
#include "command_line.h"
#include "tensorgrad/tensorgrad.h"

namespace {

constexpr std::int64_t kBatch = 128;
constexpr std::int64_t kHidden = 32;

struct Net : tg::Module {
  tg::Linear l1{*this, "l1", 2, kHidden};
  tg::Linear l2{*this, "l2", kHidden, kHidden};
  tg::Linear l3{*this, "l3", kHidden, 1};
};

tg::Tensor predict(const Net& m, const tg::Inputs& in) {
  const tg::Tensor h1 = tg::capture("h1", tg::patch("h1", tg::relu(m.l1(in.at("x")))));
  const tg::Tensor h2 = tg::capture("h2", tg::patch("h2", tg::relu(m.l2(h1))));
  return m.l3(h2);
}
tg::Tensor loss(const Net& m, const tg::Inputs& in) {
  const tg::Tensor r = predict(m, in) - in.at("y");
  return tg::mean(r * r);
}

// x uniform in [-1, 1]^2 from raw mt19937_64 bits (portable, unlike uniform_real_distribution).
tg::TensorMap batch(std::mt19937_64& rng) {
  std::vector<float> x(2 * kBatch), y(kBatch);
  for (float& v : x) v = static_cast<float>(2 * (static_cast<double>(rng() >> 11) * 0x1.0p-53) - 1);
  for (std::int64_t i = 0; i < kBatch; ++i) y[i] = std::sin(2 * x[2 * i]) * x[2 * i + 1];
  return {{"x", tg::HostTensor::f32({kBatch, 2}, x)}, {"y", tg::HostTensor::f32({kBatch, 1}, y)}};
}

double mean_abs(const tg::HostTensor& a) {
  double sum = 0;
  for (std::size_t i = 0; i < a.size(); ++i) sum += std::abs(a.at(i));
  return sum / static_cast<double>(a.size());
}

double mean_abs_diff(const tg::HostTensor& a, const tg::HostTensor& b) {
  double sum = 0;
  for (std::size_t i = 0; i < a.size(); ++i) sum += std::abs(a.at(i) - b.at(i));
  return sum / static_cast<double>(a.size());
}

tg::HostTensor run_or_throw(tg::Forward& f, const tg::TensorMap& data, const tg::Patches& patches,
                            tg::Captures* captures = nullptr) {
  const tg::ForwardResult r = f.run(data, patches);
  if (!r.ok()) throw tg::Error("forward failed (" + r.failure().kind + "): " + r.failure().message);
  if (captures != nullptr) *captures = r.captures();
  return r.output();
}

// The per-unit mean of a capture over `batches` runs, repeated on every row: a mean-ablation value.
tg::HostTensor mean_activation(tg::Forward& f, std::mt19937_64& rng, const std::string& site, int batches) {
  std::vector<double> sum(kHidden, 0.0);
  for (int b = 0; b < batches; ++b) {
    tg::Captures captures;
    tg::TensorMap data = batch(rng);
    data.erase("y");
    run_or_throw(f, data, {}, &captures);
    const std::vector<double> h = captures.get(site);
    for (std::size_t i = 0; i < h.size(); ++i) sum[i % kHidden] += h[i];
  }
  std::vector<float> rows(kBatch * kHidden);
  for (std::size_t i = 0; i < rows.size(); ++i) rows[i] = static_cast<float>(sum[i % kHidden] / (batches * kBatch));
  return tg::HostTensor::f32({kBatch, kHidden}, rows);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Activation patching: zero/mean ablation and a cross-input transplant on a trained MLP", "tg_patching"};
  int steps = 300;
  std::string backend = "auto";
  std::uint64_t seed = 1;
  app.option_defaults()->always_capture_default();
  app.add_option("--steps", steps, "training steps before patching")->check(tg::examples::at_least(1, "POSITIVE"));
  tg::examples::add_backend_option(app, backend);
  app.add_option("--seed", seed, "seed of the init and of the batches")->check(tg::examples::not_negative());
  CLI11_PARSE(app, argc, argv);
  try {
    const tg::examples::BackendChoice choice = tg::examples::choose_backend(backend);
    Net model;
    tg::Training training = tg::compile(tg::TrainingSpec<Net>{.model = model,
                                                              .loss = loss,
                                                              .inputs = {{"x", {{kBatch, 2}}}, {"y", {{kBatch, 1}}}},
                                                              .optimizer = {.kind = tg::AdamConfig{}},
                                                              .lr = 1e-2,
                                                              .backend = choice.backend,
                                                              .seed = seed,
                                                              .vk_context = choice.context});
    std::mt19937_64 rng(seed);
    double last = 0;
    for (int step = 1; step <= steps; ++step) {
      const tg::StepResult r = training.step(batch(rng));
      if (!r.ok()) throw tg::Error("step failed (" + r.failure().kind + "): " + r.failure().message);
      last = r.loss();
      if (step == 1 || step == steps) std::printf("step %4d  loss %.5f\n", step, last);
    }

    tg::Forward f = training.attach(tg::ForwardSpec<Net>{.forward = predict, .inputs = {{"x", {{-1, 2}}}}});
    tg::TensorMap a = batch(rng), b = batch(rng);
    a.erase("y");
    b.erase("y");
    tg::Captures captures_a;
    const tg::HostTensor out_a = run_or_throw(f, a, {}, &captures_a);
    const tg::HostTensor out_b = run_or_throw(f, b, {});
    std::printf("\nbatch B: mean |output| %.4f; mean |out(A) - out(B)| %.4f\n", mean_abs(out_b),
                mean_abs_diff(out_a, out_b));

    std::printf("\n%-34s %22s %8s\n", "patch on B", "mean |change| of output", "nodes");
    const auto report = [&](const char* what, const tg::Patches& patches) {
      const tg::HostTensor out = run_or_throw(f, b, patches);
      std::printf("%-34s %22.4f %8zu\n", what, mean_abs_diff(out, out_b), f.graph_for(b, patches).nodes().size());
      return out;
    };
    report("none", {});
    report("zero ablation of h1", tg::Patches().zero("h1"));
    report("zero ablation of h2", tg::Patches().zero("h2"));
    report("mean ablation of h1 (16 batches)", tg::Patches().set("h1", mean_activation(f, rng, "h1", 16)));
    report("mean ablation of h2 (16 batches)", tg::Patches().set("h2", mean_activation(f, rng, "h2", 16)));
    const tg::HostTensor transplanted =
        report("h1 transplanted from A", tg::Patches().set("h1", captures_a.tensor("h1")));
    const double off = mean_abs_diff(transplanted, out_a);
    std::printf("\nafter the transplant, mean |out(B patched) - out(A)| = %.3g (h1 is the only path)\n", off);
    if (off > 1e-6) {
      std::fprintf(stderr, "patching: the transplant did not reproduce A's output\n");
      return 1;
    }
    std::printf("patching: OK\n");
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "patching: error: %s\n", e.what());
    return 1;
  }
}
