// One Google Benchmark per registry op that has a Vulkan kernel (tg::vk::has_kernel), on the cases
// of bench/op_cases.h: "vk/<op>/<shape>" runs the same one-node graph on the same inputs as
// "interp_f32/<op>/<shape>" in interp_ops_bench.cpp, so bench/compare.py can pair them.
//
// Each benchmark compiles a tg::vk::Program with timestamps on, runs it once untimed (pipelines
// warm, clocks up), then times Program::run(). The iteration time reported (UseManualTime) is the
// op's dispatch time from its GPU timestamps; "wall_us" is the whole run(): input conversion and
// upload, dispatch, readback and conversion, which at these sizes is mostly host work.
//
// Iterations are fixed (--tg_iterations=N or TG_BENCH_ITERATIONS, default 20; 3 with --tg_small):
// a dispatch takes microseconds but a run() tens of milliseconds of host work, so letting Google
// Benchmark grow the count until --benchmark_min_time of dispatch time would take hours.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <iostream>
#include <limits>
#include <memory>
#include <optional>
#include <string>

#include "op_cases.h"
#include "tensorgrad/vk/context.h"
#include "tensorgrad/vk/executor.h"

namespace {

using namespace tg;

// One context for the whole program (device selection as everywhere: TG_VK_DEVICE), or the reason
// there is none. Created on first use, so a run that filters out every benchmark touches no device.
struct Device {
  std::shared_ptr<vk::Context> ctx;
  std::string error;
};

const Device& device() {
  static const Device d = [] {
    Device out;
    try {
      out.ctx = vk::Context::create();
    } catch (const std::exception& e) {
      out.error = e.what();
    }
    return out;
  }();
  return d;
}

// The op's device time in the last run: the sum of its dispatches (one per node; one node here).
double kernel_seconds(const vk::Program& program) {
  double microseconds = 0;
  for (const vk::DispatchTiming& t : program.timings()) microseconds += t.microseconds;
  // A dispatch shorter than the timestamp resolution reads 0; a zero iteration time would make
  // every rate infinite, so count it as one nanosecond.
  return std::max(microseconds * 1e-6, 1e-9);
}

// `own_case`: prepare c itself (bench::prepared() keeps one case per op, and the conv cases below
// hold several of one op).
void run_op(benchmark::State& state, const bench::OpCase& c, bool own_case = false) {
  const Device& d = device();
  if (!d.ctx) {
    state.SkipWithError(("no Vulkan device: " + d.error).c_str());
    return;
  }
  std::shared_ptr<const bench::PreparedCase> p;
  std::optional<vk::Program> program;
  try {
    p = own_case ? std::make_shared<const bench::PreparedCase>(bench::prepare_case(c)) : bench::prepared(c);
    program.emplace(d.ctx, p->graph, vk::ProgramOptions{.timestamps = true});
    benchmark::DoNotOptimize(program->run(p->inputs));
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
    return;
  }

  double total_kernel = 0;
  double min_kernel = std::numeric_limits<double>::infinity();
  double total_wall = 0;
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    TensorMap out = program->run(p->inputs);
    const std::chrono::duration<double> wall = std::chrono::steady_clock::now() - start;
    benchmark::DoNotOptimize(out);
    const double seconds = kernel_seconds(*program);
    state.SetIterationTime(seconds);
    total_kernel += seconds;
    min_kernel = std::min(min_kernel, seconds);
    total_wall += wall.count();
  }
  // Rates from the summed dispatch times, as plain numbers (no dependence on which time Google
  // Benchmark divides a rate counter by).
  const auto iterations = static_cast<double>(state.iterations());
  state.counters["GB/s"] = bench::case_bytes(c) * iterations / total_kernel * 1e-9;
  if (const double flops = bench::case_flops(c); flops > 0) {
    state.counters["GFLOP/s"] = flops * iterations / total_kernel * 1e-9;
  }
  state.counters["kernel_min_us"] = min_kernel * 1e6;
  state.counters["wall_us"] = total_wall / iterations * 1e6;
  state.SetLabel(bench::case_label(c) + " on " + d.ctx->info().name);
}

// Removes --tg_iterations=N from argv; else TG_BENCH_ITERATIONS; else the default for the size.
int take_iterations_flag(int& argc, char** argv, bench::CaseSize size) {
  const char* chosen = std::getenv("TG_BENCH_ITERATIONS");
  constexpr const char* kFlag = "--tg_iterations=";
  int kept = 1;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], kFlag, std::strlen(kFlag)) == 0) {
      chosen = argv[i] + std::strlen(kFlag);
    } else {
      argv[kept++] = argv[i];
    }
  }
  argc = kept;
  const int fallback = size == bench::CaseSize::small ? 3 : 20;
  if (!chosen || !*chosen) return fallback;
  const int n = std::atoi(chosen);
  if (n < 1) {
    std::cerr << "vk_ops_bench: ignoring iteration count '" << chosen << "' (not a positive integer)\n";
    return fallback;
  }
  return n;
}

int register_all(bench::CaseSize size, int iterations) {
  int registered = 0;
  for (OpId op : all_ops()) {
    if (!vk::has_kernel(op)) continue;
    const std::string name(op_name(op));
    std::optional<bench::OpCase> c;
    try {
      c = bench::pick_case(op, size);
    } catch (const std::exception& e) {
      std::cerr << "vk_ops_bench: skipping " << name << ": " << e.what() << "\n";
      continue;
    }
    if (!c) {
      std::cerr << "vk_ops_bench: skipping " << name << ": no valid sample\n";
      continue;
    }
    benchmark::RegisterBenchmark(("vk/" + name + "/" + bench::case_name(*c)).c_str(),
                                 [c = *c](benchmark::State& s) { run_op(s, c); })
        ->UseManualTime()
        ->Unit(benchmark::kMicrosecond)
        ->Iterations(iterations);
    ++registered;
  }
  return registered;
}

// The convolutions of the CNN workloads (W7_small: batch 64 of 8x8 images, 1->16 and 16->32
// channels; W7: batch 128, 32->32 at 32x32 and 64->64 at 16x16, and beside them 16->16 and 64->64
// at 32x32; 3x3 kernels, stride 1, padding 1), each op next to the matmul of its implicit GEMM's
// shape, so their GFLOP/s compare directly; at 64 channels also the three ops on bf16 values (the
// matrix units where the device has bf16 ones):
//   vk_conv/conv2d/<x>,<w>              matmul [O, C*9] x [C*9, N*H*W]
//   vk_conv/conv2d_input_grad/<g>,<w>   matmul [C, O*9] x [O*9, N*H*W]
//   vk_conv/conv2d_weight_grad/<x>,<g>  matmul [O, N*H*W] x [N*H*W, C*9]
//   vk_conv/<op>_bf16/...                 the op on bf16 values
int register_conv_cases(int iterations) {
  struct Shape4 {
    std::int64_t n, c, o, side;
  };
  const Shape4 shapes[] = {{64, 1, 16, 8},    {64, 16, 32, 8},   {128, 16, 16, 32},
                           {128, 32, 32, 32}, {128, 64, 64, 16}, {128, 64, 64, 32}};
  const auto f32 = [](Shape s) { return TensorType{DType::f32, std::move(s)}; };
  const auto real = ValueDomain::real_range(-2, 2);
  const Attrs conv{{"dilation", AttrValue{std::vector<std::int64_t>{1, 1}}},
                   {"groups", AttrValue{std::int64_t{1}}},
                   {"padding", AttrValue{std::vector<std::int64_t>{1, 1}}},
                   {"stride", AttrValue{std::vector<std::int64_t>{1, 1}}}};
  int registered = 0;
  const auto add = [&](OpId op, OpSample sample, std::string_view variant = "") {
    // Not bench::typed_case: its 2^25-element cap would drop the largest weight gradient's matmul,
    // whose [N*H*W, C*9] operand is the 75M-element im2col matrix the convolution never stores.
    std::optional<bench::OpCase> c;
    try {
      TensorType out = infer_type(op, sample.attrs, sample.inputs);
      std::int64_t inputs = 0;
      for (const TensorType& t : sample.inputs) inputs += t.size();
      const std::int64_t elements = inputs + out.size();
      c = bench::OpCase{op, std::move(sample), std::move(out), inputs, elements, false};
    } catch (const std::exception& e) {
      std::cerr << "vk_ops_bench: skipping a " << op_name(op) << " conv case: " << e.what() << "\n";
      return;
    }
    const std::string name = "vk_conv/" + std::string(op_name(op)) + std::string(variant) + "/" + bench::case_name(*c);
    benchmark::RegisterBenchmark(name.c_str(), [c = *c](benchmark::State& s) { run_op(s, c, true); })
        ->UseManualTime()
        ->Unit(benchmark::kMicrosecond)
        ->Iterations(iterations);
    ++registered;
  };
  for (const Shape4& s : shapes) {
    const Shape image{s.n, s.c, s.side, s.side}, grad{s.n, s.o, s.side, s.side}, weight{s.o, s.c, 3, 3};
    if (s.c >= 64 && s.o >= 64) {
      // bf16 values (computed in f32 between casts): on a device with bf16 matrix units the three
      // ops run there (src/vk/kernels/conv_units.h), elsewhere on the same portable kernel as f32.
      const auto bf16 = [](Shape shape) { return TensorType{DType::bf16, std::move(shape)}; };
      Attrs input_grad = conv;
      input_grad.set("height", s.side);
      input_grad.set("width", s.side);
      Attrs weight_grad = conv;
      weight_grad.set("kernel_h", std::int64_t{3});
      weight_grad.set("kernel_w", std::int64_t{3});
      add(op::Conv2d, OpSample{conv, {bf16(image), bf16(weight)}, {real, real}}, "_bf16");
      add(op::Conv2dInputGrad, OpSample{std::move(input_grad), {bf16(grad), bf16(weight)}, {real, real}}, "_bf16");
      add(op::Conv2dWeightGrad, OpSample{std::move(weight_grad), {bf16(image), bf16(grad)}, {real, real}}, "_bf16");
    }
    const std::int64_t pixels = s.n * s.side * s.side;
    add(op::Conv2d, OpSample{conv, {f32(image), f32(weight)}, {real, real}});
    add(op::Matmul, OpSample{{}, {f32({s.o, s.c * 9}), f32({s.c * 9, pixels})}, {real, real}});
    Attrs input_grad = conv;
    input_grad.set("height", s.side);
    input_grad.set("width", s.side);
    add(op::Conv2dInputGrad, OpSample{std::move(input_grad), {f32(grad), f32(weight)}, {real, real}});
    add(op::Matmul, OpSample{{}, {f32({s.c, s.o * 9}), f32({s.o * 9, pixels})}, {real, real}});
    Attrs weight_grad = conv;
    weight_grad.set("kernel_h", std::int64_t{3});
    weight_grad.set("kernel_w", std::int64_t{3});
    add(op::Conv2dWeightGrad, OpSample{std::move(weight_grad), {f32(image), f32(grad)}, {real, real}});
    add(op::Matmul, OpSample{{}, {f32({s.o, pixels}), f32({pixels, s.c * 9})}, {real, real}});
  }
  return registered;
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  const bench::CaseSize size = bench::take_size_flag(argc, argv);
  const int iterations = take_iterations_flag(argc, argv, size);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  if (register_all(size, iterations) + register_conv_cases(iterations) == 0) {
    std::cerr << "vk_ops_bench: no op could be benchmarked\n";
    return 1;
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
