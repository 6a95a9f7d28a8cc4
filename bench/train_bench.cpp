// Training step time of the design.md workloads (examples/models.h), one iteration = one
// Training::step (forward, backward, optimizer update, writebacks, the loss read back):
//   train/<backend>/W1        MLP y = sin(x), B 256, Adam lr 5e-3
//   train/<backend>/W2        char transformer, vocab 65, B 32, T 128, d 128, 4 layers, 4 heads,
//                             AdamW lr 1e-3, weight decay 0.01 (tensorgrad's default decay flags)
//   train/<backend>/W2_small  the same at vocab 65, B 4, T 16, d 32, 2 layers, 4 heads (the size of
//                             the parity golden; W2 takes seconds per step on a small CPU)
//   train/<backend>/W7        ResNet-style CNN on [128, 3, 32, 32] images (examples::ResNetCnn), Adam
//                             lr 1e-3 (bench/cnn_setup.h)
//   train/<backend>/W7_small  the convolution issue's small CNN on [64, 1, 8, 8] (examples::SmallCnn),
//                             Adam lr 1e-3
// for the backends interp_f32 and vulkan (each vulkan benchmark reports "no Vulkan device: ..." as
// its error when there is none), and, only when asked (TG_BENCH_W6=1 or --tg_w6), on Vulkan only:
//   train/vulkan/W6           the same model at GPT-2-small size (examples::kW6Config: vocab 256,
//                             T 1024, d 768, 12 layers, 12 heads), B = TG_W6_BATCH (default 8),
//                             the same optimizer; TG_W6_STEPS (default 10) timed steps.
// The transformers also run in mixed precision as <name>_bf16 (W2_small, W2, W6) and <name>_f16 (W2,
// W6): TrainingSpec::precision with that compute dtype (autocast: matmul inputs and the
// activations between them 16-bit, f32 params, optimizer state, reductions, softmax and losses;
// f16 with dynamic loss scaling), the same batch and seed; pytorch_train.py --autocast times the
// same under torch.autocast.
// Each transformer workload also runs as <name>_ckpt (W2_ckpt, W2_small_ckpt, W6_ckpt): the same
// model with every block checkpointed (TransformerConfig::checkpoint_blocks), the same batch and
// seed, so the pair shows the memory checkpointing saves and the step time it costs.
// bench/pytorch_train.py times the same steps in PyTorch (torch_<device>_<eager|graph>/W1, ...);
// bench/compare.py pairs the reports.
//
// The time is wall clock (UseRealTime): a step is synchronous on every backend (on Vulkan one
// submission, waited for, then the loss read back), so the wall time is what a training loop sees.
// Each benchmark compiles its training once (kept across Google Benchmark's repeated calls) and
// runs two untimed steps first (pipelines, allocations); every step's result is checked, and a
// failed or non-finite step ends the benchmark with an error. Counters:
// "steps/s", "loss" (the last step's, a sanity check) and "nodes" (of the step graph: one kernel
// call each on the interpreter, one dispatch each on Vulkan); on Vulkan also "plan_bytes" and
// "unshared_bytes" (Training::memory_plan(): all device allocations of the step's buffer plan, and
// what one slot per value would need), and "peak_live_bytes" (vk::plan_memory of the step graph on
// the device: the most bytes alive at one point of the step, the figure checkpointing lowers; planned
// with the executor's default options, so the params' upload slots count instead of their resident
// ones and it can differ from plan_bytes by more than fragmentation); W6 adds "batch".
// The batch is the same every step, made once from a fixed seed.
//
// TG_BENCH_SMALL=1 (or --tg_small): W1, W2_small and W2_small_ckpt only, 3 steps each (the
// bench-smoke CTest);
// with TG_BENCH_W6=1 as well, W6 still runs at full size.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "../examples/models.h"
#include "cnn_setup.h"
#include "tensorgrad/tensorgrad.h"
#include "tensorgrad/train/training.h"
#include "tensorgrad/vk/context.h"
#include "tensorgrad/vk/executor.h"
#include "transformer_setup.h"

namespace {

using namespace tg;

constexpr int kWarmupSteps = 2;
constexpr int kSmallSteps = 3;

struct TransformerSize {
  examples::TransformerConfig config;
  std::int64_t batch;
};
const TransformerSize kW2{{.vocab = 65, .context = 128, .width = 128, .layers = 4, .heads = 4}, 32};
const TransformerSize kW2Small{{.vocab = 65, .context = 16, .width = 32, .layers = 2, .heads = 4}, 4};

// A compiled training with its model (which must outlive it) and the batch every step uses.
struct Setup {
  std::unique_ptr<Module> model;
  std::optional<Training> training;
  TensorMap batch;
};

std::unique_ptr<Setup> make_w1(Backend backend, std::shared_ptr<vk::Context> ctx) {
  constexpr std::int64_t kBatch = 256;
  auto s = std::make_unique<Setup>();
  auto model = std::make_unique<examples::Mlp>();
  s->training.emplace(compile(TrainingSpec<examples::Mlp>{.model = *model,
                                                          .loss = examples::mlp_loss,
                                                          .inputs = {{"x", {{kBatch, 1}}}, {"y", {{kBatch, 1}}}},
                                                          .optimizer = {.kind = AdamConfig{}},
                                                          .lr = 5e-3,
                                                          .backend = backend,
                                                          .seed = 1,
                                                          .vk_context = std::move(ctx)}));
  s->model = std::move(model);
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> uniform(-3.f, 3.f);
  std::vector<float> x(kBatch), y(kBatch);
  for (std::int64_t i = 0; i < kBatch; ++i) {
    x[i] = uniform(rng);
    y[i] = std::sin(x[i]);
  }
  s->batch = {{"x", HostTensor::f32({kBatch, 1}, x)}, {"y", HostTensor::f32({kBatch, 1}, y)}};
  return s;
}

// W2, W2_small and W6: the char transformer (AdamW lr 1e-3, weight decay 0.01) at `size`.
std::unique_ptr<Setup> make_transformer(TransformerSize size, bool checkpoint_blocks, DType compute, Backend backend,
                                        std::shared_ptr<vk::Context> ctx) {
  auto s = std::make_unique<Setup>();
  size.config.checkpoint_blocks = checkpoint_blocks;
  auto model = std::make_unique<examples::CharTransformer>(size.config);
  s->training.emplace(
      bench::compile_transformer(*model, size.batch, backend, std::move(ctx), 2, PrecisionPolicy{.compute = compute}));
  s->model = std::move(model);
  s->batch = bench::transformer_batch(size.config, size.batch);
  return s;
}

// W7 and W7_small (bench/cnn_setup.h: Adam lr 1e-3, a fixed random batch).
std::unique_ptr<Setup> make_cnn(bool small, Backend backend, std::shared_ptr<vk::Context> ctx) {
  auto s = std::make_unique<Setup>();
  if (small) {
    auto model = std::make_unique<examples::SmallCnn>();
    s->training.emplace(bench::compile_small_cnn(*model, bench::kW7SmallBatch, backend, std::move(ctx)));
    s->model = std::move(model);
    s->batch = bench::small_cnn_batch(bench::kW7SmallBatch);
  } else {
    auto model = std::make_unique<examples::ResNetCnn>();
    s->training.emplace(bench::compile_resnet(*model, bench::kW7Batch, backend, std::move(ctx)));
    s->batch = bench::resnet_batch(model->config, bench::kW7Batch);
    s->model = std::move(model);
  }
  return s;
}

enum class Workload { w1, w2, w2_small, w6, w7, w7_small };

// `checkpoint_blocks` and `compute` apply to the transformers only (register_all never asks W1, W7 or W7_small).
std::unique_ptr<Setup> make_setup(Workload w, bool checkpoint_blocks, DType compute, Backend backend,
                                  std::shared_ptr<vk::Context> ctx) {
  switch (w) {
    case Workload::w1:
      return make_w1(backend, std::move(ctx));
    case Workload::w2:
      return make_transformer(kW2, checkpoint_blocks, compute, backend, std::move(ctx));
    case Workload::w2_small:
      return make_transformer(kW2Small, checkpoint_blocks, compute, backend, std::move(ctx));
    case Workload::w6:
      return make_transformer({examples::kW6Config, bench::w6_batch()}, checkpoint_blocks, compute, backend,
                              std::move(ctx));
    case Workload::w7:
    case Workload::w7_small:
      return make_cnn(w == Workload::w7_small, backend, std::move(ctx));
  }
  return nullptr;
}

// One Vulkan context for every vulkan benchmark (device selection as everywhere: TG_VK_DEVICE), or
// the reason there is none.
struct VkDevice {
  std::shared_ptr<vk::Context> ctx;
  std::string error;
};
const VkDevice& vk_device() {
  static const VkDevice device = [] {
    try {
      return VkDevice{vk::Context::create(), ""};
    } catch (const std::exception& e) {
      return VkDevice{nullptr, e.what()};
    }
  }();
  return device;
}

// "" when the step completed with a finite loss, else why not.
std::string step_once(Setup& s, double& loss) {
  const StepResult r = s.training->step(s.batch);
  if (!r.ok()) return "step failed: " + r.failure().kind + ": " + r.failure().message;
  loss = r.loss();
  if (!std::isfinite(loss)) return "non-finite loss " + std::to_string(loss);
  return "";
}

// Google Benchmark calls a benchmark several times while it sizes the iteration count: each
// training is compiled once and kept here until main clears it (before the Vulkan context goes).
std::map<std::string, std::unique_ptr<Setup>>& setups() {
  static std::map<std::string, std::unique_ptr<Setup>> kept;
  return kept;
}

void run_training(benchmark::State& state, const std::string& key, Workload w, bool checkpoint_blocks, DType compute,
                  Backend backend) {
  std::unique_ptr<Setup>& s = setups()[key];
  double loss = 0;
  if (!s) {
    std::shared_ptr<vk::Context> ctx;
    if (backend == Backend::vulkan) {
      if (!vk_device().ctx) {
        state.SkipWithError(("no Vulkan device: " + vk_device().error).c_str());
        return;
      }
      ctx = vk_device().ctx;
    }
    try {
      s = make_setup(w, checkpoint_blocks, compute, backend, ctx);
    } catch (const std::exception& e) {
      state.SkipWithError(e.what());
      return;
    }
    for (int i = 0; i < kWarmupSteps; ++i) {
      if (std::string error = step_once(*s, loss); !error.empty()) {
        s.reset();
        state.SkipWithError(error.c_str());
        return;
      }
    }
  }
  double seconds = 0;
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    const std::string error = step_once(*s, loss);
    seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (!error.empty()) {
      state.SkipWithError(error.c_str());
      break;
    }
  }
  // Plain counters computed here, not rate counters: no dependence on which time Google Benchmark
  // divides a rate by.
  state.counters["steps/s"] = seconds > 0 ? static_cast<double>(state.iterations()) / seconds : 0.0;
  state.counters["loss"] = loss;
  state.counters["nodes"] = static_cast<double>(s->training->kernels().size());  // dispatches per step on Vulkan
  if (w == Workload::w6) state.counters["batch"] = static_cast<double>(bench::w6_batch());
  if (backend == Backend::vulkan) {
    state.SetLabel(vk_device().ctx->info().name);
    const MemoryPlan plan = s->training->memory_plan();
    state.counters["plan_bytes"] = static_cast<double>(plan.total_bytes);
    state.counters["unshared_bytes"] = static_cast<double>(plan.unshared_bytes);
    // MemoryPlan has no peak; plan the step graph again (no device memory is touched).
    try {
      const vk::ProgramStats stats = vk::plan_memory(s->training->graph(), vk_device().ctx->info());
      state.counters["peak_live_bytes"] = static_cast<double>(stats.peak_live_bytes);
    } catch (const std::exception& e) {
      state.SkipWithError((std::string("planning the step's memory: ") + e.what()).c_str());
    }
  }
  // A W6 training holds gigabytes of device memory: release it before the next one (W6_ckpt) is
  // compiled, so neither's plan competes with the other's. Its step count is fixed, so Google
  // Benchmark calls this once (per repetition) and never needs it again.
  if (w == Workload::w6) setups().erase(key);
}

// --<flag> on the command line or <env>=1.
bool flag_or_env(int argc, char** argv, const char* flag, const char* env_name) {
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], flag) == 0) return true;
  }
  const char* env = std::getenv(env_name);
  return env && std::string(env) == "1";
}

void register_all(bool small, bool w6) {
  struct Named {
    const char* name;
    Workload workload;
    bool checkpoint_blocks = false;
    DType compute = DType::f32;
  };
  std::vector<Named> workloads = {{"W1", Workload::w1},
                                  {"W2_small", Workload::w2_small},
                                  {"W2_small_ckpt", Workload::w2_small, true},
                                  {"W2_small_bf16", Workload::w2_small, false, DType::bf16}};
  if (!small) {
    workloads.insert(workloads.begin() + 1, {Named{"W2", Workload::w2}, Named{"W2_ckpt", Workload::w2, true},
                                             Named{"W2_bf16", Workload::w2, false, DType::bf16},
                                             Named{"W2_f16", Workload::w2, false, DType::f16}});
    workloads.push_back({"W7_small", Workload::w7_small});
    workloads.push_back({"W7", Workload::w7});
  }
  for (const auto& [backend_name, backend] :
       {std::pair{"interp_f32", Backend::interp_f32}, std::pair{"vulkan", Backend::vulkan}}) {
    for (const Named& n : workloads) {
      const std::string key = std::string("train/") + backend_name + "/" + n.name;
      benchmark::internal::Benchmark* b = benchmark::RegisterBenchmark(
          key.c_str(), [key, w = n.workload, ckpt = n.checkpoint_blocks, compute = n.compute, backend = backend](
                           benchmark::State& state) { run_training(state, key, w, ckpt, compute, backend); });
      b->UseRealTime()->Unit(benchmark::kMillisecond);
      if (small) b->Iterations(kSmallSteps);
    }
  }
  if (w6) {
    // Vulkan only (the interpreter takes minutes per step); a fixed step count: a W6 step takes
    // hundreds of milliseconds, so Google Benchmark's sizing runs would cost several seconds.
    const std::pair<const char*, DType> variants[] = {{"", DType::f32}, {"_bf16", DType::bf16}, {"_f16", DType::f16}};
    for (const auto& [suffix, compute] : variants) {
      for (const bool ckpt : {false, true}) {
        if (ckpt && compute != DType::f32) continue;  // checkpointing is measured in f32 only
        const std::string key = std::string("train/vulkan/W6") + (ckpt ? "_ckpt" : "") + suffix;
        benchmark::internal::Benchmark* b =
            benchmark::RegisterBenchmark(key.c_str(), [key, ckpt, compute = compute](benchmark::State& state) {
              run_training(state, key, Workload::w6, ckpt, compute, Backend::vulkan);
            });
        b->UseRealTime()->Unit(benchmark::kMillisecond)->Iterations(bench::env_count("TG_W6_STEPS", 10));
      }
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  const bool small = flag_or_env(argc, argv, "--tg_small", "TG_BENCH_SMALL");
  const bool w6 = flag_or_env(argc, argv, "--tg_w6", "TG_BENCH_W6");
  // Drop our own flags before Google Benchmark sees them (it refuses unknown flags).
  int kept = 1;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--tg_small") != 0 && std::strcmp(argv[i], "--tg_w6") != 0) argv[kept++] = argv[i];
  }
  argc = kept;
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  register_all(small, w6);
  benchmark::RunSpecifiedBenchmarks();
  setups().clear();
  benchmark::Shutdown();
  return 0;
}
