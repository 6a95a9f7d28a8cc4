// The named workloads of design.md on the reference interpreter in f32 (ComputeType::f32):
//   W3 matmul n x n x n (GFLOP/s, 2 n^3 flops), n = 1024, 2048; 4096 and 8192 with TG_BENCH_LARGE=1
//   W4 add of 2^26 floats (GB/s counting 12 bytes/element: two reads, one write)
//   W5 softmax over the last axis of [8192, 4096] (GB/s counting 8 bytes/element: read + write)
// bench/pytorch_workloads.py prints the same names and counters for PyTorch.
// Each graph and its input map are built once; the timed loop is one tg::interpret call: the input
// checks, the output allocation and the kernel (f32 inputs are read in place, the output buffer
// becomes the result without a copy).
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "random_inputs.h"
#include "tensorgrad/interp/interpreter.h"
#include "tensorgrad/ir/ops/api.h"
#include "tensorgrad/ir/ops/sample.h"
#include "tensorgrad/ir/tensor.h"

namespace {

using namespace tg;

struct Workload {
  Graph graph;
  TensorMap inputs;
};

std::shared_ptr<Workload> matmul_workload(std::int64_t n) {
  auto w = std::make_shared<Workload>();
  GraphBuilder b("w3_matmul");
  TracingScope scope(b);
  const Tensor x = b.input("a", {DType::f32, {n, n}});
  const Tensor y = b.input("b", {DType::f32, {n, n}});
  b.output("c", matmul(x, y));
  w->graph = b.take();
  w->inputs.emplace("a", bench::random_f32({n, n}, 1));
  w->inputs.emplace("b", bench::random_f32({n, n}, 2));
  return w;
}

std::shared_ptr<Workload> add_workload(std::int64_t n) {
  auto w = std::make_shared<Workload>();
  GraphBuilder b("w4_add");
  TracingScope scope(b);
  const Tensor x = b.input("a", {DType::f32, {n}});
  const Tensor y = b.input("b", {DType::f32, {n}});
  b.output("c", add(x, y));
  w->graph = b.take();
  w->inputs.emplace("a", bench::random_f32({n}, 3));
  w->inputs.emplace("b", bench::random_f32({n}, 4));
  return w;
}

std::shared_ptr<Workload> softmax_workload(std::int64_t rows, std::int64_t cols) {
  auto w = std::make_shared<Workload>();
  GraphBuilder b("w5_softmax");
  TracingScope scope(b);
  const Tensor x = b.input("x", {DType::f32, {rows, cols}});
  b.output("y", softmax(x, -1));
  w->graph = b.take();
  w->inputs.emplace("x", bench::random_f32({rows, cols}, 5));
  return w;
}

const InterpOptions kOptions{.compute = ComputeType::f32};

// Builds the workload on first use (a filtered-out one costs no memory) and runs it once untimed:
// Google Benchmark 1.7.1 has no warm-up option, and a first call that takes longer than the minimum
// time would otherwise be the only one measured.
const Workload& prepared(std::shared_ptr<Workload>& holder, const std::function<std::shared_ptr<Workload>()>& make) {
  if (!holder) {
    holder = make();
    benchmark::DoNotOptimize(interpret(holder->graph, holder->inputs, kOptions));
  }
  return *holder;
}

void run(benchmark::State& state, const Workload& w) {
  const InterpOptions options = kOptions;
  for (auto _ : state) {
    InterpResult r = interpret(w.graph, w.inputs, options);
    benchmark::DoNotOptimize(r.outputs);
  }
}

void register_matmul(std::int64_t n) {
  auto holder = std::make_shared<std::shared_ptr<Workload>>();
  benchmark::RegisterBenchmark(
      ("W3_matmul/n=" + std::to_string(n)).c_str(),
      [n, holder](benchmark::State& state) {
        run(state, prepared(*holder, [n] { return matmul_workload(n); }));
        const double flops = 2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n);
        // kIsIterationInvariantRate: flops per iteration x iterations / seconds.
        state.counters["GFLOP/s"] = benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
      })
      ->Unit(benchmark::kMillisecond)
      ->UseRealTime();
}

void register_all() {
  for (std::int64_t n : {1024, 2048}) register_matmul(n);
  const char* large = std::getenv("TG_BENCH_LARGE");
  if (large && std::string(large) == "1") {
    for (std::int64_t n : {4096, 8192}) register_matmul(n);
  }

  constexpr std::int64_t kAddElements = std::int64_t{1} << 26;
  auto add_holder = std::make_shared<std::shared_ptr<Workload>>();
  benchmark::RegisterBenchmark("W4_add/n=67108864",
                               [add_holder](benchmark::State& state) {
                                 run(state, prepared(*add_holder, [] { return add_workload(kAddElements); }));
                                 state.counters["GB/s"] = benchmark::Counter(
                                     12.0 * kAddElements * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
                                 state.SetItemsProcessed(state.iterations() * kAddElements);
                               })
      ->Unit(benchmark::kMillisecond)
      ->UseRealTime();

  constexpr std::int64_t kRows = 8192;
  constexpr std::int64_t kCols = 4096;
  auto softmax_holder = std::make_shared<std::shared_ptr<Workload>>();
  benchmark::RegisterBenchmark("W5_softmax/8192x4096",
                               [softmax_holder](benchmark::State& state) {
                                 run(state, prepared(*softmax_holder, [] { return softmax_workload(kRows, kCols); }));
                                 state.counters["GB/s"] = benchmark::Counter(
                                     8.0 * kRows * kCols * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
                                 state.SetItemsProcessed(state.iterations() * kRows * kCols);
                               })
      ->Unit(benchmark::kMillisecond)
      ->UseRealTime();
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  register_all();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
