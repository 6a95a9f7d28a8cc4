// One Google Benchmark per registry op on the reference interpreter, generated from the registry:
// "interp_f32/<op>/<shape>" (the f32 CPU backend) and "interp_f64/<op>/<shape>" (the f64 oracle)
// side by side, on the cases of bench/op_cases.h: the same graphs and inputs as
// "vk/<op>/<shape>" in vk_ops_bench.cpp. --tg_small (or TG_BENCH_SMALL=1) picks the small cases.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <exception>
#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include "op_cases.h"
#include "tensorgrad/interp/interpreter.h"

namespace {

using namespace tg;

// `own_case`: prepare c itself (bench::prepared() keeps one case per op, and the conv cases hold
// several of one op).
void run_op(benchmark::State& state, const bench::OpCase& c, ComputeType compute, bool own_case = false) {
  std::shared_ptr<const bench::PreparedCase> p;
  try {
    p = own_case ? std::make_shared<const bench::PreparedCase>(bench::prepare_case(c)) : bench::prepared(c);
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
    return;
  }
  const InterpOptions options{.compute = compute};
  for (auto _ : state) {
    InterpResult r = interpret(p->graph, p->inputs, options);
    benchmark::DoNotOptimize(r.outputs);
  }
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(bench::case_bytes(c)));
  state.SetItemsProcessed(state.iterations() * c.output.size());
  if (const double flops = bench::case_flops(c); flops > 0) {
    // kIsIterationInvariantRate: flops per iteration x iterations / seconds (real time here).
    state.counters["GFLOP/s"] = benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  }
  state.SetLabel(bench::case_label(c));
}

int register_all(bench::CaseSize size) {
  int registered = 0;
  for (OpId op : all_ops()) {
    const std::string name(op_name(op));
    std::optional<bench::OpCase> c;
    try {
      c = bench::pick_case(op, size);
    } catch (const std::exception& e) {
      std::cerr << "interp_ops_bench: skipping " << name << ": " << e.what() << "\n";
      continue;
    }
    if (!c) {
      std::cerr << "interp_ops_bench: skipping " << name << ": no valid sample\n";
      continue;
    }
    const std::string suffix = "/" + name + "/" + bench::case_name(*c);
    // Time is wall-clock: the kernels run on TBB's worker threads.
    benchmark::RegisterBenchmark(("interp_f32" + suffix).c_str(),
                                 [c = *c](benchmark::State& s) { run_op(s, c, ComputeType::f32); })
        ->Unit(benchmark::kMicrosecond)
        ->UseRealTime();
    benchmark::RegisterBenchmark(("interp_f64" + suffix).c_str(),
                                 [c = *c](benchmark::State& s) { run_op(s, c, ComputeType::f64); })
        ->Unit(benchmark::kMicrosecond)
        ->UseRealTime();
    registered += 2;
  }
  return registered;
}

// bench::conv_gemm_cases() on interp_f32 only ("interp_f32_conv/<op>/<shape>", each op's matmul
// "interp_f32_conv/matmul_of_<op>/<shape>"): the oracle would take minutes per call on the largest.
int register_conv_cases() {
  int registered = 0;
  std::string conv_op;
  for (const bench::OpCase& c : bench::conv_gemm_cases()) {
    const bool matmul = c.op == op::Matmul;
    if (!matmul) conv_op = std::string(op_name(c.op));
    const std::string name =
        "interp_f32_conv/" + (matmul ? "matmul_of_" + conv_op : conv_op) + "/" + bench::case_name(c);
    benchmark::RegisterBenchmark(name.c_str(), [c](benchmark::State& s) { run_op(s, c, ComputeType::f32, true); })
        ->Unit(benchmark::kMicrosecond)
        ->UseRealTime();
    ++registered;
  }
  return registered;
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  const bench::CaseSize size = bench::take_size_flag(argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  if (register_all(size) + register_conv_cases() == 0) {
    std::cerr << "interp_ops_bench: no op could be benchmarked\n";
    return 1;
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
