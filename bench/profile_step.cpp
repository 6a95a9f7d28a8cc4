// tg_profile_step: where one training step's device time goes. Compiles W1 and W2 (examples/
// models.h) with tg::compile, takes the compiled step graph (forward, backward, optimizer) and runs
// it as a vk::Program with per-dispatch timestamps (params and optimizer state resident, as in
// Training::step; means of 50 runs after a warm-up), then prints the mean wall time of one run
// without timestamps (and, first, that of a one-dispatch program: the floor of a submit and wait),
// then the time per op kind, largest first, and with --dispatches every dispatch in order. Inputs
// are placeholders of the right types (the params from the init, zeros elsewhere): the kernels'
// timing does not depend on the values.
//   tg_profile_step [--dispatches] [W1|W2|W2_small|W6|W2_bf16|W6_bf16|W7|W7_small]...  (default: W1,
//   W2_small, W2; --help lists them; _bf16: the step under bf16 autocast, PrecisionPolicy{.compute =
//   bf16}; W7 and W7_small: the CNNs of bench/cnn_setup.h at their benchmark batches, 128 and 64)
// W6 (GPT-2-small size) at batch TG_W6_BATCH (default 8): a GPU with ~12 GiB free.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "bench/cnn_setup.h"
#include "examples/command_line.h"
#include "examples/models.h"
#include "tensorgrad/tensorgrad.h"

namespace {

using namespace tg;

TensorMap placeholder_inputs(const Graph& graph, const TensorMap& params) {
  TensorMap inputs;
  for (const GraphInput& in : graph.inputs()) {
    const TensorType& type = graph.type(in.value);
    const auto it = params.find(in.name);
    inputs.emplace(in.name, it != params.end() ? it->second : HostTensor::filled(type, 0.0));
  }
  return inputs;
}

// The program's resident inputs (params, optimizer state) are written once; a run passes the data
// inputs only, as Training::step does.
struct SplitInputs {
  TensorMap resident;
  TensorMap data;
};

SplitInputs split_inputs(const Graph& graph, const TensorMap& all) {
  SplitInputs split;
  for (const GraphInput& in : graph.inputs()) {
    (in.kind == InputKind::data ? split.data : split.resident).emplace(in.name, all.at(in.name));
  }
  return split;
}

// Back-to-back runs for `ms` milliseconds: NVIDIA's clock governor lowers the SM clock within
// seconds of light use, so a profile taken right after building would time a slow GPU.
void warm_up(vk::Program& program, const TensorMap& data, double ms) {
  const auto start = std::chrono::steady_clock::now();
  while (std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count() < ms) {
    (void)program.run(data);
  }
}

struct Profiled {
  std::vector<vk::DispatchTiming> mean;  // per dispatch, mean over the timed runs
  double span_us = 0;
};

Profiled timed_runs(vk::Program& program, const TensorMap& data, int runs) {
  Profiled p;
  for (int r = 0; r < runs; ++r) {
    (void)program.run(data);
    const std::vector<vk::DispatchTiming> t = program.timings();
    if (p.mean.empty()) {
      p.mean = t;
      for (vk::DispatchTiming& d : p.mean) d.microseconds = 0;
    }
    for (std::size_t i = 0; i < t.size(); ++i) p.mean[i].microseconds += t[i].microseconds / runs;
    p.span_us += program.dispatch_span_microseconds() / runs;
  }
  return p;
}

// Timed runs per workload (--runs): 50 on a GPU; a few on lavapipe, where a W7_small step takes a second.
int g_runs = 50;

void profile(const std::string& name, const Graph& graph, const TensorMap& params,
             const std::shared_ptr<vk::Context>& ctx, bool list_dispatches) {
  const SplitInputs inputs = split_inputs(graph, placeholder_inputs(graph, params));
  // Only the loss comes back to the host, as in Training::step (which writes the rest back on the
  // device): reading every gradient and new param back would time the host conversions instead.
  std::vector<std::string> kept_on_device;
  for (const GraphOutput& out : graph.outputs()) {
    if (out.name != "loss") kept_on_device.push_back(out.name);
  }
  vk::Program program(ctx, graph, {.timestamps = true, .resident_params = true, .device_outputs = kept_on_device});
  vk::Program untimed(ctx, graph, {.resident_params = true, .device_outputs = kept_on_device});
  for (const auto& [input, value] : inputs.resident) {
    program.write_input(input, value);
    untimed.write_input(input, value);
  }
  warm_up(untimed, inputs.data, 300);
  const int kRuns = 4 * g_runs;
  const auto start = std::chrono::steady_clock::now();
  for (int r = 0; r < kRuns; ++r) (void)untimed.run(inputs.data);
  const double wall_us =
      std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count() / kRuns;
  warm_up(program, inputs.data, 100);
  const Profiled timed = timed_runs(program, inputs.data, g_runs);

  std::map<std::string, std::pair<int, double>> by_op;
  double total = 0;
  for (const vk::DispatchTiming& t : timed.mean) {
    auto& [count, us] = by_op[t.op];
    ++count;
    us += t.microseconds;
    total += t.microseconds;
  }
  std::vector<std::pair<std::string, std::pair<int, double>>> rows(by_op.begin(), by_op.end());
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second.second > b.second.second; });
  std::printf("== %s on %s: %zu dispatches, %zu barriers, span %.1f us, sum of dispatches %.1f us (means of %d runs)\n",
              name.c_str(), ctx->info().name.c_str(), program.stats().dispatches, program.stats().barriers,
              timed.span_us, total, g_runs);
  std::printf(
      "Program::run wall without timestamps, params resident, only the loss read back: %.1f us per run (mean of %d)\n",
      wall_us, kRuns);
  std::printf("| op | dispatches | device us | share |\n|---|---|---|---|\n");
  for (const auto& [op, stat] : rows) {
    std::printf("| %s | %d | %.1f | %.1f%% |\n", op.c_str(), stat.first, stat.second, 100.0 * stat.second / total);
  }
  if (!list_dispatches) return;
  std::printf("| # | op | output | device us |\n|---|---|---|---|\n");
  for (std::size_t i = 0; i < timed.mean.size(); ++i) {
    const vk::DispatchTiming& t = timed.mean[i];
    const std::string type = t.node == kNoNode ? "" : graph.type(graph.node(t.node).output).to_string();
    std::printf("| %zu | %s | %s | %.2f |\n", i, t.op.c_str(), type.c_str(), t.microseconds);
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> which;
  bool list_dispatches = false;
  CLI::App app{"Where one training step's device time goes, by op kind (Vulkan timestamps)", "tg_profile_step"};
  app.add_flag("--dispatches", list_dispatches, "also list every dispatch in order (default: off)");
  app.add_option("--runs", g_runs, "timed runs per workload (default 50; the wall time takes 4x as many)")
      ->check(CLI::PositiveNumber);
  app.add_option("workloads", which, "the workloads to profile, W6 at batch TG_W6_BATCH (default: W1 W2_small W2)")
      ->check(CLI::IsMember({"W1", "W2", "W2_small", "W6", "W2_bf16", "W6_bf16", "W7", "W7_small"}));
  CLI11_PARSE(app, argc, argv);
  if (which.empty()) which = {"W1", "W2_small", "W2"};
  const auto ctx = vk::Context::create();
  {
    // The floor of one run: a one-element add, submitted and waited for.
    GraphBuilder b("floor");
    TracingScope scope(b);
    b.output("y", add(b.input("x", {DType::f32, {1}}), b.input("z", {DType::f32, {1}})));
    vk::Program floor(ctx, b.take());
    const TensorMap inputs{{"x", HostTensor::f32({1}, {1.f})}, {"z", HostTensor::f32({1}, {2.f})}};
    std::printf("== one-dispatch program: Program::run wall %.1f us per run (mean of 1000)\n", [&] {
      for (int warm = 0; warm < 3; ++warm) (void)floor.run(inputs);
      const auto start = std::chrono::steady_clock::now();
      for (int r = 0; r < 1000; ++r) (void)floor.run(inputs);
      return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count() / 1000;
    }());
  }
  for (const std::string& w : which) {
    if (w == "W1") {
      examples::Mlp model;
      Training t = compile(TrainingSpec<examples::Mlp>{.model = model,
                                                       .loss = examples::mlp_loss,
                                                       .inputs = {{"x", {{256, 1}}}, {"y", {{256, 1}}}},
                                                       .optimizer = {.kind = AdamConfig{}},
                                                       .lr = 5e-3,
                                                       .seed = 1});
      profile(w, t.graph(), t.download_param_tensors(), ctx, list_dispatches);
    } else if (w == "W2" || w == "W2_small" || w == "W6" || w == "W2_bf16" || w == "W6_bf16") {
      const bool small = w == "W2_small";
      const bool bf16 = w.ends_with("_bf16");
      const bool w6 = w.starts_with("W6");
      const char* w6_batch = std::getenv("TG_W6_BATCH");
      const examples::TransformerConfig config =
          w6      ? examples::kW6Config
          : small ? examples::TransformerConfig{.vocab = 65, .context = 16, .width = 32, .layers = 2, .heads = 4}
                  : examples::TransformerConfig{};
      const std::int64_t batch = w6 ? (w6_batch ? std::atoll(w6_batch) : 8) : small ? 4 : 32;
      examples::CharTransformer model(config);
      Training t = compile(
          TrainingSpec<examples::CharTransformer>{.model = model,
                                                  .loss = examples::transformer_loss,
                                                  .inputs = {{"tokens", {{batch, config.context}, DType::i32}},
                                                             {"targets", {{batch, config.context}, DType::i32}}},
                                                  .optimizer = {.kind = AdamWConfig{}},
                                                  .lr = 1e-3,
                                                  .seed = 1,
                                                  .precision = {.compute = bf16 ? DType::bf16 : DType::f32}});
      profile(w, t.graph(), t.download_param_tensors(), ctx, list_dispatches);
    } else if (w == "W7") {
      examples::ResNetCnn model;
      Training t = bench::compile_resnet(model, bench::kW7Batch, Backend::interp_f32, nullptr, 1);
      profile(w, t.graph(), t.download_param_tensors(), ctx, list_dispatches);
    } else if (w == "W7_small") {
      examples::SmallCnn model;
      Training t = bench::compile_small_cnn(model, bench::kW7SmallBatch, Backend::interp_f32, nullptr, 1);
      profile(w, t.graph(), t.download_param_tensors(), ctx, list_dispatches);
    }
  }
  return 0;
}
