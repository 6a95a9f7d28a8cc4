// Data-parallel step time (TrainingSpec::communicator): W2 and W6 on Vulkan, one rank per device,
// ranks as threads of this process (make_thread_group; an MPI job runs the same protocol with the
// same host-side reduction). Each rank steps on its own batch of the workload's per-device size
// (weak scaling, as DistributedDataParallel is run): a global step processes R times the samples,
// and the scaling efficiency at R ranks is time(plain) / time(R ranks) against the best one-device
// step, time(1 rank) / time(R ranks) against the data-parallel step on one device.
//   dp/vulkan/<W>/plain     no communicator: the single-process step
//   dp/vulkan/<W>/ranks:R   R ranks on devices 0 .. R-1 (skipped when the machine has fewer), the
//                           gradients summed in buckets during the backward (the default)
//   dp/vulkan/<W>/ranks:R/one_sum   the same with one sum after the backward (reduce_bucket_bytes 0)
//   dp/vulkan/<W>/ranks:R/bucket_mb:N   buckets of N MiB, for each N in TG_DP_BUCKETS_MB ("8,16")
// W6 runs only with TG_BENCH_W6=1; batches: W2 32, W6 TG_W6_BATCH (default 8) per rank;
// TG_DP_PRECISION=bf16 runs the steps in bf16 (default f32); TG_DP_STEPS timed steps (default 10)
// after at least a second of untimed ones (3 or more). bench/pytorch_ddp.py times PyTorch DDP
// (NCCL) at the same sizes.
#include <benchmark/benchmark.h>

#include <atomic>
#include <barrier>
#include <chrono>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tensorgrad/train/communicator.h"
#include "tensorgrad/vk/device.h"
#include "transformer_setup.h"

namespace tg {
namespace {

struct Workload {
  std::string name;
  examples::TransformerConfig config;
  std::int64_t batch;
};

DType precision_from_env() {
  const char* env = std::getenv("TG_DP_PRECISION");
  return env && std::string(env) == "bf16" ? DType::bf16 : DType::f32;
}

// One rank: its device, model, training and batch.
struct Rank {
  std::shared_ptr<vk::Context> ctx;
  std::unique_ptr<examples::CharTransformer> model;
  std::optional<Training> training;
  TensorMap batch;
};

std::unique_ptr<Rank> make_rank(const Workload& w, int device, std::shared_ptr<Communicator> comm,
                                std::uint64_t bucket_bytes) {
  auto r = std::make_unique<Rank>();
  r->ctx = vk::Context::create({.device = std::to_string(device)});
  r->model = std::make_unique<examples::CharTransformer>(w.config);
  r->training.emplace(bench::compile_transformer(*r->model, w.batch, Backend::vulkan, r->ctx, 2,
                                                 {.compute = precision_from_env()}, std::move(comm), bucket_bytes));
  r->batch = bench::transformer_batch(w.config, w.batch, static_cast<std::uint32_t>(2 + device));
  return r;
}

void step_or_throw(Rank& r) {
  const StepResult result = r.training->step(r.batch);
  if (!result.ok()) throw Error(result.failure().kind + ": " + result.failure().message);
}

void run_case(benchmark::State& state, const Workload& w, int ranks, std::uint64_t bucket_bytes) {
  try {
    const int devices = static_cast<int>(vk::list_devices().size());
    if (ranks > devices) {
      state.SkipWithError(
          ("needs " + std::to_string(ranks) + " devices, the machine has " + std::to_string(devices)).c_str());
      return;
    }
    // ranks == 0: the plain single-process step.
    const std::vector<std::shared_ptr<Communicator>> group =
        ranks > 0 ? make_thread_group(ranks) : std::vector<std::shared_ptr<Communicator>>{nullptr};
    std::vector<std::unique_ptr<Rank>> all(group.size());
    {
      // Compiling is collective: every rank at once.
      std::vector<std::thread> compiling;
      std::vector<std::string> errors(group.size());
      for (std::size_t r = 0; r < group.size(); ++r) {
        compiling.emplace_back([&, r] {
          try {
            all[r] = make_rank(w, static_cast<int>(r), group[r], bucket_bytes);
          } catch (const std::exception& e) {
            errors[r] = e.what();
          }
        });
      }
      for (std::thread& t : compiling) t.join();
      for (const std::string& e : errors)
        if (!e.empty()) throw Error(e);
    }
    // Rank 0 steps on this thread; the others on workers released once per step.
    std::barrier go(static_cast<std::ptrdiff_t>(all.size()));
    std::atomic<bool> stop{false};
    std::vector<std::string> worker_errors(all.size());
    std::vector<std::thread> workers;
    for (std::size_t r = 1; r < all.size(); ++r) {
      workers.emplace_back([&, r] {
        for (;;) {
          go.arrive_and_wait();
          if (stop) return;
          try {
            step_or_throw(*all[r]);
          } catch (const std::exception& e) {
            worker_errors[r] = e.what();
          }
        }
      });
    }
    const auto one_step = [&] {
      go.arrive_and_wait();
      step_or_throw(*all[0]);
    };
    // Untimed steps for at least a second: the first case of a process otherwise measures the
    // GPU's clocks ramping up (W2's plain step read 13-15 ms before ranks:1's 7-8 ms).
    const auto warm_from = std::chrono::steady_clock::now();
    for (int i = 0; i < 3 || std::chrono::steady_clock::now() - warm_from < std::chrono::seconds(1); ++i) one_step();
    for (auto _ : state) one_step();
    stop = true;
    go.arrive_and_wait();
    for (std::thread& t : workers) t.join();
    for (const std::string& e : worker_errors)
      if (!e.empty()) throw Error(e);
    const double samples = static_cast<double>(w.batch) * static_cast<double>(all.size());
    state.counters["samples/s"] =
        benchmark::Counter(samples * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
    state.counters["batch_per_rank"] = static_cast<double>(w.batch);
    state.counters["ranks"] = ranks;
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
  }
}

void register_all() {
  std::vector<Workload> workloads = {{"W2", {.vocab = 65, .context = 128, .width = 128, .layers = 4, .heads = 4}, 32}};
  const char* w6 = std::getenv("TG_BENCH_W6");
  if (w6 && std::string(w6) == "1") workloads.push_back({"W6", examples::kW6Config, bench::w6_batch()});
  const auto steps = bench::env_count("TG_DP_STEPS", 10);
  for (const Workload& w : workloads) {
    // TG_DP_BUCKETS_MB="8,16": cases of those bucket sizes too (ranks:R/bucket_mb:N).
    std::vector<std::uint64_t> sizes = {kDefaultReduceBucketBytes, 0};
    if (const char* env = std::getenv("TG_DP_BUCKETS_MB")) {
      std::stringstream list(env);
      for (std::string mb; std::getline(list, mb, ',');) sizes.push_back(std::stoull(mb) << 20);
    }
    for (const int ranks : {0, 1, 2, 4}) {
      for (const std::uint64_t bucket_bytes : sizes) {
        if (ranks == 0 && bucket_bytes != kDefaultReduceBucketBytes) continue;
        const bool other = bucket_bytes != kDefaultReduceBucketBytes && bucket_bytes != 0;
        const std::string name = "dp/vulkan/" + w.name + (ranks == 0 ? "/plain" : "/ranks:" + std::to_string(ranks)) +
                                 (bucket_bytes == 0 ? "/one_sum" : "") +
                                 (other ? "/bucket_mb:" + std::to_string(bucket_bytes >> 20) : "");
        benchmark::RegisterBenchmark(
            name.c_str(), [w, ranks, bucket_bytes](benchmark::State& s) { run_case(s, w, ranks, bucket_bytes); })
            ->Iterations(steps)
            ->UseRealTime()
            ->Unit(benchmark::kMillisecond);
      }
    }
  }
}

}  // namespace
}  // namespace tg

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  tg::register_all();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
