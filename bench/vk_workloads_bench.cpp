// The named workloads of design.md on the Vulkan executor, timed by GPU timestamps:
//   vk/W3_matmul/<n>          fp32 matmul n x n x n, n = 1024, 2048, 4096, 8192 (GFLOP/s, 2 n^3 flops)
//   vk/W3_matmul_<mode>/<n>   the same under matmul_precision split or fast (f32 operands), or with
//                             f16 or bf16 operands into an f32 product (docs/vulkan.md, "Matmul
//                             precision"): on the matrix units where the device has them
//   vk/W4_add_2^26            add of 2^26 floats (GB/s counting 12 bytes/element: two reads, one write)
//   vk/W5_softmax_8192x4096   softmax over the last axis (GB/s counting 8 bytes/element: read + write)
// bench/pytorch_workloads.py --device cuda gives PyTorch's figures for the same workloads.
//
// Each program is a chain of `length` copies of the op, each on the previous one's result
// (x_{i+1} = x_i @ b, x_i + b, softmax(x_i)), so the dispatches run back to back on a busy GPU, as
// PyTorch's timing loop runs its kernels. The inputs are resident params, written once, and the
// outputs stay on the device (ProgramOptions::device_outputs; the first is read once, for the
// check): a timed run moves no data, so the GPU is never left idle while the host converts 2^27
// values. That matters: NVIDIA's clock governor lowers an H200's SM clock within seconds of light
// use (seen at 345-900 MHz), and the same add chain then streams at 1.7-2.7 TB/s instead of 4.3
// (tg_vk_stream_probe; docs/performance.md, session 4). The figure is the device time per op: the
// span from the first dispatch's start to the last one's end (Program::dispatch_span_microseconds)
// divided by the chain's length, reported as the iteration time (UseManualTime). The span counts
// the barriers between dependent dispatches, as PyTorch's CUDA events count the gaps between its
// kernels; a sum of per-dispatch timestamp intervals would not do: a TOP_OF_PIPE timestamp after a
// barrier may be written before the barrier's wait ends, so on an H200 each interval of the add
// chain also covered most of the previous dispatch (361 us per add summed, 186 us per add by the
// span). A split-K matmul is two dispatches for one op, which is also why the span is divided by
// ops, not dispatches. Counters: the rate, "first_us" (the first dispatch of a run), "dispatches"
// (recorded per run), "ops" (per run) and "wall_us" (one whole run(): submit, all dispatches, wait).
// Before timing, one run's first result is checked against a host computation in double, so a
// wrong fast path cannot post a figure.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <exception>
#include <functional>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "tensorgrad/interp/host_tensor.h"
#include "tensorgrad/ir/ops/api.h"
#include "tensorgrad/ir/ops/op_def.h"
#include "tensorgrad/ir/tensor.h"
#include "tensorgrad/vk/context.h"
#include "tensorgrad/vk/executor.h"

namespace {

using namespace tg;

std::vector<float> random_floats(std::size_t n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// The result check of one workload's first dispatch: empty when right, else what is wrong. The
// factor scales the allowed error (fast's documented bound is 256 times the fp32 class).
using Check = std::string (*)(const TensorMap& inputs, const HostTensor& first, double factor);

struct Workload {
  Graph graph;
  TensorMap inputs;
  Check check = nullptr;
  double check_factor = 1.0;
  vk::MatmulPrecision precision = vk::MatmulPrecision::ieee;
  double work = 0;  // flops (W3) or bytes (W4, W5) of one dispatch, for the rate counter
  const char* rate_name = "";
};

// Builds the chain x_1 = op(x_0), ..., x_length = op(x_{length-1}); outputs "first" (x_1,
// checked) and "last".
template <class Op>
Graph chain(GraphBuilder& b, const Tensor& x0, int length, Op op) {
  Tensor x = op(x0);
  b.output("first", x);
  for (int i = 1; i < length; ++i) x = op(x);
  b.output("last", x);
  return b.take();
}

std::string describe_mismatch(const char* what, std::size_t index, double got, double want, double allowed) {
  return std::string(what) + " element " + std::to_string(index) + ": Vulkan " + std::to_string(got) + ", host f64 " +
         std::to_string(want) + " (allowed error " + std::to_string(allowed) + ")";
}

// W3: 512 sampled entries of C (the four corners first: tile edges) against dot products in double,
// within the matmul tolerance class relative to the largest |C| sampled, as the vk tests allow.
std::string check_matmul(const TensorMap& inputs, const HostTensor& out, double factor) {
  const auto a = inputs.at("a").to_f64();
  const auto b = inputs.at("b").to_f64();
  const auto n = static_cast<std::size_t>(inputs.at("a").type.shape[0]);
  std::mt19937 rng(7);
  std::uniform_int_distribution<std::size_t> pick(0, n - 1);
  std::vector<std::size_t> at;
  std::vector<double> want;
  double scale = 1.0;
  for (int s = 0; s < 512; ++s) {
    const std::size_t i = s < 4 ? (s & 1 ? n - 1 : 0) : pick(rng);
    const std::size_t j = s < 4 ? (s & 2 ? n - 1 : 0) : pick(rng);
    double dot = 0;
    for (std::size_t k = 0; k < n; ++k) dot += a[i * n + k] * b[k * n + j];
    at.push_back(i * n + j);
    want.push_back(dot);
    scale = std::max(scale, std::fabs(dot));
  }
  const double allowed = 4.0 * std::numeric_limits<float>::epsilon() *
                         tolerance_ulps(ToleranceClass::matmul, static_cast<std::int64_t>(n)) * scale * factor;
  for (std::size_t s = 0; s < at.size(); ++s) {
    const double got = out.at(at[s]);
    if (!(std::fabs(got - want[s]) <= allowed)) return describe_mismatch("matmul", at[s], got, want[s], allowed);
  }
  return "";
}

// W4: every element, exactly (an f32 add is correctly rounded).
std::string check_add(const TensorMap& inputs, const HostTensor& out, double /*factor*/) {
  const auto a = inputs.at("a").to_f64();
  const auto b = inputs.at("b").to_f64();
  for (std::size_t i = 0; i < out.size(); ++i) {
    const double want = static_cast<float>(static_cast<float>(a[i]) + static_cast<float>(b[i]));
    if (out.at(i) != want) return describe_mismatch("add", i, out.at(i), want, 0.0);
  }
  return "";
}

// W5: 64 rows (first, last, random) against softmax in double, 1e-5 relative: exp and the division
// are accurate to a few ulp and the row sums to about sqrt(4096) ulp.
std::string check_softmax(const TensorMap& inputs, const HostTensor& out, double /*factor*/) {
  const HostTensor& x = inputs.at("x");
  const auto rows = static_cast<std::size_t>(x.type.shape[0]);
  const auto cols = static_cast<std::size_t>(x.type.shape[1]);
  std::mt19937 rng(9);
  const std::vector<double> x_values = x.to_f64();
  std::uniform_int_distribution<std::size_t> pick(0, rows - 1);
  for (int s = 0; s < 64; ++s) {
    const std::size_t r = s == 0 ? 0 : (s == 1 ? rows - 1 : pick(rng));
    const std::vector<double> row(x_values.begin() + static_cast<std::ptrdiff_t>(r * cols),
                                  x_values.begin() + static_cast<std::ptrdiff_t>((r + 1) * cols));
    double m = -std::numeric_limits<double>::infinity();
    for (std::size_t c = 0; c < cols; ++c) m = std::max(m, row[c]);
    double total = 0;
    for (std::size_t c = 0; c < cols; ++c) total += std::exp(row[c] - m);
    for (std::size_t c = 0; c < cols; ++c) {
      const double want = std::exp(row[c] - m) / total;
      const double got = out.at(r * cols + c);
      const double allowed = 1e-5 * want;
      if (!(std::fabs(got - want) <= allowed)) return describe_mismatch("softmax", r * cols + c, got, want, allowed);
    }
  }
  return "";
}

// mode: "" (fp32, ieee), "split", "fast" (f32 operands under that matmul_precision), "f16" or
// "bf16" (16-bit operands into f32 products).
std::unique_ptr<Workload> matmul_workload(std::int64_t n, int length, const std::string& mode) {
  auto w = std::make_unique<Workload>();
  GraphBuilder b("w3_matmul");
  TracingScope scope(b);
  const DType operands = mode == "f16" ? DType::f16 : mode == "bf16" ? DType::bf16 : DType::f32;
  const Tensor a = b.param("a", {operands, {n, n}});
  const Tensor m = b.param("b", {operands, {n, n}});
  if (operands == DType::f32) {
    w->graph = chain(b, a, length, [&](const Tensor& x) { return matmul(x, m); });
  } else {
    // 16-bit operands cast up once; the chain's products all read them (a chain of 16-bit results
    // would add a rounding cast per product to the timed span).
    const Tensor up_a = cast(a, DType::f32);
    const Tensor up_m = cast(m, DType::f32);
    w->graph = chain(b, up_a, length, [&](const Tensor&) { return matmul(up_a, up_m); });
  }
  w->precision = mode == "split"  ? vk::MatmulPrecision::split
                 : mode == "fast" ? vk::MatmulPrecision::fast
                                  : vk::MatmulPrecision::ieee;
  w->check_factor = mode == "fast" ? 256.0 : 1.0;
  const auto count = static_cast<std::size_t>(n * n);
  const auto make = [&](std::vector<float> v) {
    return operands == DType::f32 ? HostTensor::f32({n, n}, std::move(v))
                                  : HostTensor::low_precision(operands, {n, n}, v);
  };
  w->inputs.emplace("a", make(random_floats(count, 1)));
  // Entries of variance 1/n: every product in the chain keeps the magnitude of `a`.
  std::vector<float> bv = random_floats(count, 2);
  const auto scale = static_cast<float>(std::sqrt(3.0 / static_cast<double>(n)));
  for (float& v : bv) v *= scale;
  w->inputs.emplace("b", make(bv));
  w->check = check_matmul;
  w->work = 2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n);
  w->rate_name = "GFLOP/s";
  return w;
}

std::unique_ptr<Workload> add_workload(int length) {
  constexpr std::int64_t n = std::int64_t{1} << 26;
  auto w = std::make_unique<Workload>();
  GraphBuilder b("w4_add");
  TracingScope scope(b);
  const Tensor a = b.param("a", {DType::f32, {n}});
  const Tensor y = b.param("b", {DType::f32, {n}});
  w->graph = chain(b, a, length, [&](const Tensor& x) { return add(x, y); });
  w->inputs.emplace("a", HostTensor::f32({n}, random_floats(n, 3)));
  w->inputs.emplace("b", HostTensor::f32({n}, random_floats(n, 4)));
  w->check = check_add;
  w->work = 12.0 * static_cast<double>(n);
  w->rate_name = "GB/s";
  return w;
}

std::unique_ptr<Workload> softmax_workload(int length) {
  constexpr std::int64_t rows = 8192;
  constexpr std::int64_t cols = 4096;
  auto w = std::make_unique<Workload>();
  GraphBuilder b("w5_softmax");
  TracingScope scope(b);
  const Tensor x0 = b.param("x", {DType::f32, {rows, cols}});
  w->graph = chain(b, x0, length, [](const Tensor& x) { return softmax(x, -1); });
  w->inputs.emplace("x", HostTensor::f32({rows, cols}, random_floats(rows * cols, 5)));
  w->check = check_softmax;
  w->work = 8.0 * static_cast<double>(rows * cols);
  w->rate_name = "GB/s";
  return w;
}

void run_workload(benchmark::State& state, int length,
                  const std::function<std::unique_ptr<Workload>(int length)>& make) {
  // A fresh context (device selection as everywhere: TG_VK_DEVICE) for each benchmark, so no
  // workload runs on memory another one allocated and freed.
  std::shared_ptr<vk::Context> ctx;
  try {
    ctx = vk::Context::create();
  } catch (const std::exception& e) {
    state.SkipWithError((std::string("no Vulkan device: ") + e.what()).c_str());
    return;
  }
  std::unique_ptr<Workload> w;
  std::unique_ptr<vk::Program> program;
  try {
    w = make(length);
    // Unfused: each workload times one kernel per op (fusion would turn the add chain into one
    // dispatch that reads b once and writes one result).
    program = std::make_unique<vk::Program>(ctx, w->graph,
                                            vk::ProgramOptions{.timestamps = true,
                                                               .resident_params = true,
                                                               .fuse_elementwise = false,
                                                               .device_outputs = {"first", "last"},
                                                               .matmul_precision = w->precision});
    for (const auto& [name, value] : w->inputs) program->write_input(name, value);
    // Untimed first run: pipelines warm, and the result checked.
    (void)program->run({});
    const std::string wrong = w->check(w->inputs, program->read_output("first"), w->check_factor);
    // Untimed runs for 300 ms more: the GPU's clock ramps up under steady load.
    const auto warm_until = std::chrono::steady_clock::now() + std::chrono::milliseconds(300);
    while (wrong.empty() && std::chrono::steady_clock::now() < warm_until) (void)program->run({});
    if (!wrong.empty()) {
      state.SkipWithError(("wrong result: " + wrong).c_str());
      return;
    }
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
    return;
  }

  const auto ops = static_cast<double>(length);
  double span_us = 0;   // first dispatch start to last dispatch end, summed over runs
  double first_us = 0;  // the first dispatch of each run
  double wall_seconds = 0;
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    TensorMap out = program->run({});
    const std::chrono::duration<double> wall = std::chrono::steady_clock::now() - start;
    benchmark::DoNotOptimize(out);
    const double run_span = program->dispatch_span_microseconds();
    state.SetIterationTime(run_span / ops * 1e-6);
    span_us += run_span;
    first_us += program->timings().front().microseconds;
    wall_seconds += wall.count();
  }
  // Plain counters computed here, not rate counters: no dependence on which time Google Benchmark
  // divides a rate by.
  const auto runs = static_cast<double>(state.iterations());
  state.counters[w->rate_name] = w->work * ops * runs / (span_us * 1e-6) * 1e-9;
  state.counters["first_us"] = first_us / runs;
  state.counters["dispatches"] = static_cast<double>(program->stats().dispatches);
  state.counters["ops"] = ops;
  state.counters["wall_us"] = wall_seconds / runs * 1e6;
  state.SetLabel(ctx->info().name);
}

void register_all() {
  // {n, chain length, runs}: about the same device time per run for each size.
  struct Size {
    std::int64_t n;
    int length;
    int runs;
  };
  for (const Size& size : {Size{1024, 20, 40}, Size{2048, 12, 20}, Size{4096, 6, 12}, Size{8192, 3, 8}}) {
    // The workload is built when the benchmark runs, so a filtered-out one costs nothing.
    const std::int64_t n = size.n;
    for (const std::string mode : {"", "split", "fast", "f16", "bf16"}) {
      benchmark::RegisterBenchmark(
          ("vk/W3_matmul" + (mode.empty() ? "" : "_" + mode) + "/" + std::to_string(n)).c_str(),
          [n, mode, length = size.length](benchmark::State& state) {
            run_workload(state, length, [n, mode](int r) { return matmul_workload(n, r, mode); });
          })
          ->UseManualTime()
          ->Unit(benchmark::kMillisecond)
          ->Iterations(size.runs);
    }
  }
  benchmark::RegisterBenchmark("vk/W4_add_2^26", [](benchmark::State& state) { run_workload(state, 10, add_workload); })
      ->UseManualTime()
      ->Unit(benchmark::kMicrosecond)
      ->Iterations(50);
  benchmark::RegisterBenchmark("vk/W5_softmax_8192x4096",
                               [](benchmark::State& state) { run_workload(state, 10, softmax_workload); })
      ->UseManualTime()
      ->Unit(benchmark::kMicrosecond)
      ->Iterations(50);
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
