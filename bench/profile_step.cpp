// tg_profile_step: where one training step's device time goes. Compiles W1 and W2 (examples/
// models.h) with tg::compile, takes the compiled step graph (forward, backward, optimizer) and runs
// it as a vk::Program with per-dispatch timestamps, then prints the mean wall time of one run without
// timestamps (and, first, that of a one-dispatch program: the floor of a submit and wait), then the
// time per op kind, largest
// first. Inputs are placeholders of the right types (the params from the init, zeros elsewhere):
// the kernels' timing does not depend on the values.
//   tg_profile_step [W1|W2|W2_small]...     (default: all three)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

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

// Mean wall time of one Program::run (no timestamps) over `runs`, after 3 warm-up runs: with the
// device span it splits a step into device time and the rest (submit, wait, host conversions).
double run_wall_us(vk::Program& program, const TensorMap& inputs, int runs) {
  for (int warm = 0; warm < 3; ++warm) (void)program.run(inputs);
  const auto start = std::chrono::steady_clock::now();
  for (int r = 0; r < runs; ++r) (void)program.run(inputs);
  const std::chrono::duration<double, std::micro> wall = std::chrono::steady_clock::now() - start;
  return wall.count() / runs;
}

void profile(const std::string& name, const Graph& graph, const TensorMap& params,
             const std::shared_ptr<vk::Context>& ctx) {
  vk::Program program(ctx, graph, {.timestamps = true});
  const TensorMap inputs = placeholder_inputs(graph, params);
  for (int warm = 0; warm < 3; ++warm) (void)program.run(inputs);
  std::map<std::string, std::pair<int, double>> by_op;
  double total = 0;
  for (const vk::DispatchTiming& t : program.timings()) {
    auto& [count, us] = by_op[t.op];
    ++count;
    us += t.microseconds;
    total += t.microseconds;
  }
  std::vector<std::pair<std::string, std::pair<int, double>>> rows(by_op.begin(), by_op.end());
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second.second > b.second.second; });
  std::printf("== %s on %s: %zu dispatches, %zu barriers, span %.1f us, sum of dispatches %.1f us\n", name.c_str(),
              ctx->info().name.c_str(), program.stats().dispatches, program.stats().barriers,
              program.dispatch_span_microseconds(), total);
  vk::Program untimed(ctx, graph);
  std::printf("Program::run wall without timestamps: %.1f us per run (mean of 200)\n",
              run_wall_us(untimed, inputs, 200));
  std::printf("| op | dispatches | device us | share |\n|---|---|---|---|\n");
  for (const auto& [op, stat] : rows) {
    std::printf("| %s | %d | %.1f | %.1f%% |\n", op.c_str(), stat.first, stat.second, 100.0 * stat.second / total);
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> which(argv + 1, argv + argc);
  if (which.empty()) which = {"W1", "W2_small", "W2"};
  const auto ctx = vk::Context::create();
  {
    // The floor of one run: a one-element add, submitted and waited for.
    GraphBuilder b("floor");
    TracingScope scope(b);
    b.output("y", add(b.input("x", {DType::f32, {1}}), b.input("z", {DType::f32, {1}})));
    vk::Program floor(ctx, b.take());
    const TensorMap inputs{{"x", HostTensor::f32({1}, {1.f})}, {"z", HostTensor::f32({1}, {2.f})}};
    std::printf("== one-dispatch program: Program::run wall %.1f us per run (mean of 1000)\n",
                run_wall_us(floor, inputs, 1000));
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
      profile(w, t.graph(), t.download_param_tensors(), ctx);
    } else if (w == "W2" || w == "W2_small") {
      const bool small = w == "W2_small";
      const examples::TransformerConfig config =
          small ? examples::TransformerConfig{.vocab = 65, .context = 16, .width = 32, .layers = 2, .heads = 4}
                : examples::TransformerConfig{};
      const std::int64_t batch = small ? 4 : 32;
      examples::CharTransformer model(config);
      Training t = compile(
          TrainingSpec<examples::CharTransformer>{.model = model,
                                                  .loss = examples::transformer_loss,
                                                  .inputs = {{"tokens", {{batch, config.context}, DType::i32}},
                                                             {"targets", {{batch, config.context}, DType::i32}}},
                                                  .optimizer = {.kind = AdamWConfig{}},
                                                  .lr = 1e-3,
                                                  .seed = 1});
      profile(w, t.graph(), t.download_param_tensors(), ctx);
    } else {
      std::fprintf(stderr, "unknown workload '%s' (W1, W2, W2_small)\n", w.c_str());
      return 2;
    }
  }
  return 0;
}
