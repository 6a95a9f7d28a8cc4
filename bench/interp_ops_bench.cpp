// One Google Benchmark per registry op on the reference interpreter, generated from the registry:
// "interp_f32/<op>" (the f32 CPU backend) and "interp_f64/<op>" (the f64 oracle) side by side.
// Each op runs on one sample from its own generator, scaled up to a realistic size where the op
// accepts a given first input (e.g. f32[256,256]), with values drawn from the sample's domains.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <exception>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tensorgrad/interp/interpreter.h"
#include "tensorgrad/ir/ops/op_def.h"
#include "tensorgrad/ir/tensor.h"

namespace {

using namespace tg;

constexpr std::uint64_t kSeed = 0xbe7c4000ULL;
constexpr int kPlainDraws = 50;     // samples drawn without a given first input
constexpr int kDrawsPerFirst = 16;  // samples drawn per candidate first input (they are random too)
constexpr std::int64_t kMaxElements = std::int64_t{1} << 23;  // inputs + output, keeps memory sane

// First inputs to offer each op's generator, biggest realistic shapes first. Ops refuse the ones
// they cannot take (rank, dtype, or their own size caps) and fall back to plain samples.
const std::vector<TensorType>& first_candidates() {
  static const std::vector<TensorType> candidates = {
      {DType::f32, {256, 256}},     {DType::f32, {64, 64, 64}}, {DType::f32, {8, 16, 32, 32}},
      {DType::f32, {65536}},        {DType::i32, {256, 256}},   {DType::i32, {65536}},
      {DType::boolean, {256, 256}}, {DType::f32, {16, 16}},     {DType::i32, {}},
  };
  return candidates;
}

struct OpCase {
  OpSample sample;
  TensorType output;
  std::int64_t input_elements = 0;
  std::int64_t elements = 0;  // inputs + output
  bool identity = false;      // the output has an input's type: maybe a no-op (pad by 0, sum over no axes)

  // Better: more input elements, then a sample that changes the type (so a reduction reduces and a
  // pad pads), then more elements in all.
  bool better_than(const OpCase& other) const {
    if (input_elements != other.input_elements) return input_elements > other.input_elements;
    if (identity != other.identity) return !identity;
    return elements > other.elements;
  }
};

// The sample with its output type, or nullopt when the shape rule refuses it or it is too big.
std::optional<OpCase> typed(OpId op, OpSample sample) {
  try {
    TensorType out = infer_type(op, sample.attrs, sample.inputs);
    std::int64_t input_elements = 0;
    bool identity = false;
    for (const auto& t : sample.inputs) {
      input_elements += t.size();
      identity = identity || t == out;
    }
    const std::int64_t elements = input_elements + out.size();
    if (elements > kMaxElements) return std::nullopt;
    return OpCase{std::move(sample), std::move(out), input_elements, elements, identity};
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

// Ops whose size lives in an attribute (creation ops, randn) have only 0-d inputs: offer them a
// bigger "shape" / "n" and keep it when the shape rule accepts it.
std::optional<OpSample> scaled_attrs(const OpSample& sample) {
  for (const auto& t : sample.inputs)
    if (t.rank() != 0) return std::nullopt;
  OpSample scaled = sample;
  bool changed = false;
  if (const auto* shape = scaled.attrs.find("shape");
      shape && std::holds_alternative<std::vector<std::int64_t>>(*shape)) {
    scaled.attrs.set("shape", std::vector<std::int64_t>{256, 256});
    changed = true;
  }
  if (const auto* n = scaled.attrs.find("n"); n && std::holds_alternative<std::int64_t>(*n)) {
    scaled.attrs.set("n", std::int64_t{65536});
    changed = true;
  }
  return changed ? std::optional<OpSample>(std::move(scaled)) : std::nullopt;
}

// The biggest valid sample found among candidate first inputs, plain draws and attribute scaling.
std::optional<OpCase> pick_case(OpId op) {
  const OpDef& def = op_def(op);
  if (!def.samples) return std::nullopt;
  SampleRng rng(kSeed + static_cast<std::uint64_t>(op));
  std::optional<OpCase> best;
  const auto consider = [&](std::optional<OpSample> sample) {
    if (!sample) return;
    if (auto c = typed(op, *sample); c && (!best || c->better_than(*best))) best = std::move(c);
    if (auto scaled = scaled_attrs(*sample)) {
      if (auto c = typed(op, *scaled); c && (!best || c->better_than(*best))) best = std::move(c);
    }
  };
  for (const auto& first : first_candidates())
    for (int i = 0; i < kDrawsPerFirst; ++i) consider(def.samples(rng, first));
  for (int i = 0; i < kPlainDraws; ++i) consider(def.samples(rng, std::nullopt));
  return best;
}

// A one-node graph "x0, x1, ... -> y" and its inputs drawn from the sample's value domains.
struct Prepared {
  Graph graph;
  TensorMap inputs;
  std::int64_t bytes = 0;  // inputs + output, 4 bytes per element
  std::int64_t items = 0;  // output elements
  std::string shapes;      // for the benchmark's label
};

double round_to(double v, DType dtype) { return dtype == DType::f32 ? static_cast<double>(static_cast<float>(v)) : v; }

std::shared_ptr<Prepared> prepare(OpId op, const OpCase& c) {
  auto p = std::make_shared<Prepared>();
  SampleRng rng(kSeed ^ (static_cast<std::uint64_t>(op) << 32));
  GraphBuilder builder(std::string(op_name(op)));
  std::vector<Tensor> operands;
  for (std::size_t i = 0; i < c.sample.inputs.size(); ++i) {
    const TensorType& type = c.sample.inputs[i];
    const std::string name = "x" + std::to_string(i);
    operands.push_back(builder.input(name, type));
    std::vector<double> values = c.sample.domains[i].draw(rng, type.size());
    for (double& v : values) v = round_to(v, type.dtype);
    p->inputs.emplace(name, HostTensor::of(type, std::move(values)));
    p->shapes += (i ? " " : "") + type.to_string();
  }
  builder.output("y", builder.emit(op, operands, c.sample.attrs, SourceLoc{"interp_ops_bench", 1, 0}));
  p->graph = builder.take();
  p->bytes = 4 * c.elements;
  p->items = c.output.size();
  p->shapes += (p->shapes.empty() ? "-> " : " -> ") + c.output.to_string();
  if (!c.sample.attrs.empty()) p->shapes += " " + c.sample.attrs.to_string();
  return p;
}

void run_op(benchmark::State& state, const std::shared_ptr<Prepared>& p, ComputeType compute) {
  const InterpOptions options{.compute = compute};
  for (auto _ : state) {
    InterpResult r = interpret(p->graph, p->inputs, options);
    benchmark::DoNotOptimize(r.outputs);
  }
  state.SetBytesProcessed(state.iterations() * p->bytes);
  state.SetItemsProcessed(state.iterations() * p->items);
  state.SetLabel(p->shapes);
}

int register_all() {
  int registered = 0;
  for (OpId op : all_ops()) {
    const std::string name(op_name(op));
    std::optional<OpCase> c;
    std::shared_ptr<Prepared> p;
    try {
      c = pick_case(op);
      if (c) p = prepare(op, *c);
    } catch (const std::exception& e) {
      std::cerr << "interp_ops_bench: skipping " << name << ": " << e.what() << "\n";
      continue;
    }
    if (!p) {
      std::cerr << "interp_ops_bench: skipping " << name << ": no valid sample\n";
      continue;
    }
    benchmark::RegisterBenchmark(("interp_f32/" + name).c_str(),
                                 [p](benchmark::State& s) { run_op(s, p, ComputeType::f32); })
        ->Unit(benchmark::kMicrosecond)
        ->UseRealTime();
    benchmark::RegisterBenchmark(("interp_f64/" + name).c_str(),
                                 [p](benchmark::State& s) { run_op(s, p, ComputeType::f64); })
        ->Unit(benchmark::kMicrosecond)
        ->UseRealTime();
    registered += 2;
  }
  return registered;
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  if (register_all() == 0) {
    std::cerr << "interp_ops_bench: no op could be benchmarked\n";
    return 1;
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
