// The interpreter's node schedules side by side (InterpOptions::schedule): sequential runs nodes in
// program order with parallel kernels; parallel also runs independent nodes at once. Workloads,
// each timed under both schedules (names end in /sequential and /parallel):
//   heads       H independent heads, each D rounds of softmax(h @ w) on its own [R, R] tensors:
//               small matmuls and softmaxes that one kernel cannot spread over many cores
//   elementwise B branches of 8 unary ops on 4096 floats (one chunk per kernel: no parallelism
//               inside a kernel), summed into one output at the end
//   chain       one head of the same rounds on [512, 512]: nothing to run side by side, so this is
//               the cost of the parallel schedule's bookkeeping where it cannot help
// Sizes from the environment (the defaults suit the 2-core VM; use more on a many-core machine):
//   TG_BENCH_HEADS (16), TG_BENCH_DEPTH (4), TG_BENCH_ROWS (64), TG_BENCH_BRANCHES (64).
// Threads: TBB's default (every core); TG_BENCH_THREADS=N caps them (tbb::global_control).
#include <benchmark/benchmark.h>
#include <tbb/global_control.h>

#include <cstdint>
#include <cstdlib>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "random_inputs.h"
#include "tensorgrad/interp/interpreter.h"
#include "tensorgrad/ir/ops/api.h"
#include "tensorgrad/ir/ops/sample.h"
#include "tensorgrad/ir/tensor.h"

namespace {

using namespace tg;

std::int64_t env_or(const char* name, std::int64_t fallback) {
  const char* text = std::getenv(name);
  if (!text || !*text) return fallback;
  const std::int64_t value = std::strtoll(text, nullptr, 10);
  return value > 0 ? value : fallback;
}

struct Workload {
  Graph graph;
  TensorMap inputs;
};

std::shared_ptr<Workload> heads_workload(std::int64_t heads, std::int64_t depth, std::int64_t rows) {
  auto w = std::make_shared<Workload>();
  GraphBuilder b("wide_heads");
  TracingScope scope(b);
  for (std::int64_t i = 0; i < heads; ++i) {
    const std::string suffix = std::to_string(i);
    Tensor h = b.input("x" + suffix, {DType::f32, {rows, rows}});
    const Tensor weight = b.input("w" + suffix, {DType::f32, {rows, rows}});
    for (std::int64_t d = 0; d < depth; ++d) h = softmax(matmul(h, weight), -1);
    b.output("y" + suffix, h);
    w->inputs.emplace("x" + suffix, bench::random_f32({rows, rows}, 2 * static_cast<std::uint64_t>(i)));
    w->inputs.emplace("w" + suffix, bench::random_f32({rows, rows}, 2 * static_cast<std::uint64_t>(i) + 1));
  }
  w->graph = b.take();
  return w;
}

std::shared_ptr<Workload> elementwise_workload(std::int64_t branches) {
  constexpr std::int64_t kElements = 4096;
  auto w = std::make_shared<Workload>();
  GraphBuilder b("wide_elementwise");
  TracingScope scope(b);
  const Tensor x = b.input("x", {DType::f32, {kElements}});
  std::optional<Tensor> total;
  for (std::int64_t i = 0; i < branches; ++i) {
    Tensor h = x * static_cast<float>(i + 1) * 1e-3f;
    for (int k = 0; k < 2; ++k) h = sigmoid(tanh(exp(sin(h))));
    total = total ? *total + h : h;
  }
  b.output("y", *total);
  w->inputs.emplace("x", bench::random_f32({kElements}, 9));
  w->graph = b.take();
  return w;
}

// Builds on first use (a filtered-out workload costs nothing) and runs once untimed: Google
// Benchmark 1.7.1 has no warm-up option.
void register_pair(const std::string& name, std::function<std::shared_ptr<Workload>()> make) {
  auto holder = std::make_shared<std::shared_ptr<Workload>>();
  for (InterpSchedule schedule : {InterpSchedule::sequential, InterpSchedule::parallel}) {
    const std::string full = name + (schedule == InterpSchedule::parallel ? "/parallel" : "/sequential");
    benchmark::RegisterBenchmark(full.c_str(),
                                 [holder, make, schedule](benchmark::State& state) {
                                   const InterpOptions options{.compute = ComputeType::f32, .schedule = schedule};
                                   if (!*holder) {
                                     *holder = make();
                                     benchmark::DoNotOptimize(interpret((*holder)->graph, (*holder)->inputs, options));
                                   }
                                   const Workload& w = **holder;
                                   for (auto _ : state) {
                                     InterpResult r = interpret(w.graph, w.inputs, options);
                                     benchmark::DoNotOptimize(r.outputs);
                                   }
                                   state.counters["nodes"] = static_cast<double>(w.graph.nodes().size());
                                 })
        ->Unit(benchmark::kMicrosecond)
        ->UseRealTime();
  }
}

void register_all() {
  const std::int64_t heads = env_or("TG_BENCH_HEADS", 16);
  const std::int64_t depth = env_or("TG_BENCH_DEPTH", 4);
  const std::int64_t rows = env_or("TG_BENCH_ROWS", 64);
  const std::int64_t branches = env_or("TG_BENCH_BRANCHES", 64);
  register_pair("heads/h=" + std::to_string(heads) + "/d=" + std::to_string(depth) + "/r=" + std::to_string(rows),
                [=] { return heads_workload(heads, depth, rows); });
  register_pair("elementwise/b=" + std::to_string(branches), [=] { return elementwise_workload(branches); });
  register_pair("chain/d=" + std::to_string(depth) + "/r=512", [=] { return heads_workload(1, depth, 512); });
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  std::optional<tbb::global_control> threads;
  if (const std::int64_t cap = env_or("TG_BENCH_THREADS", 0); cap > 0) {
    threads.emplace(tbb::global_control::max_allowed_parallelism, static_cast<std::size_t>(cap));
  }
  register_all();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
