// fuzz_build_graph: graphs built through the public tracing API from a byte stream of choices, then
// verified, printed and parsed back, differentiated and run on the interpreter when small
// (fuzz_entry.h).
#include <algorithm>
#include <array>
#include <cstdlib>
#include <iostream>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "byte_reader.h"
#include "fuzz_entry.h"
#include "graph_equal.h"
#include "tensorgrad/interp/interpreter.h"
#include "tensorgrad/ir/error.h"
#include "tensorgrad/ir/ops/api.h"
#include "tensorgrad/ir/ops/op_def.h"
#include "tensorgrad/ir/tensor.h"
#include "tensorgrad/ir/text.h"
#include "tensorgrad/ir/verifier.h"
#include "tensorgrad/passes/autodiff.h"

namespace tg::fuzz {
namespace {

constexpr int kMaxSteps = 24;
// A graph is differentiated and run only when all its values together hold at most this many
// elements (counting a 0 dim as 1, so that [0, 2^40] is not "small": kernels may still loop over
// its other dims).
constexpr std::int64_t kRunLimit = 4096;

bool fits_run_limit(const Graph& graph) {
  std::int64_t total = 0;
  for (const ValueInfo& value : graph.values()) {
    std::int64_t n = 1;
    for (std::int64_t d : value.type.shape) {
      const std::int64_t factor = std::max<std::int64_t>(d, 1);
      if (factor > kRunLimit || n > kRunLimit / factor) return false;
      n *= factor;
    }
    total += n;
    if (total > kRunLimit) return false;
  }
  return true;
}

constexpr std::array<DType, 3> kDTypes = {DType::f32, DType::i32, DType::boolean};

DType draw_dtype(ByteReader& in) {
  // Mostly f32: most ops take floats only.
  const std::size_t b = in.below(5);
  return b < 3 ? DType::f32 : kDTypes[b - 2];
}

Shape draw_shape(ByteReader& in, std::size_t max_rank) {
  Shape shape(in.below(max_rank + 1));
  for (std::int64_t& d : shape) d = in.dim();
  return shape;
}

AttrValue draw_attr(ByteReader& in, AttrKind kind) {
  switch (kind) {
    case AttrKind::integer:
      return in.integer();
    case AttrKind::real:
      return in.real();
    case AttrKind::boolean:
      return in.coin();
    case AttrKind::ints: {
      std::vector<std::int64_t> list(in.below(6));
      for (std::int64_t& v : list) v = in.integer();
      return list;
    }
    case AttrKind::dtype:
      return kDTypes[in.below(kDTypes.size())];
    case AttrKind::string: {
      static constexpr std::array<const char*, 5> kStrings = {"mean", "sum", "none", "", "median"};
      return std::string(kStrings[in.below(kStrings.size())]);
    }
  }
  return std::int64_t{0};
}

Tensor operand(ByteReader& in, const std::vector<Tensor>& pool) { return pool[in.below(pool.size())]; }

// One registry op through GraphBuilder::emit, with attributes drawn for its schema (now and then a
// missing attribute, one of the wrong kind, an unknown one or a wrong input count, which the
// builder must refuse with a typed error).
void emit_registry_op(GraphBuilder& builder, ByteReader& in, OpId op, std::vector<Tensor>& pool, int step) {
  const OpDef& def = op_def(op);
  std::size_t count = def.arity == kVariadic ? 1 + in.below(4) : static_cast<std::size_t>(def.arity);
  if (in.below(32) == 0) count = in.below(4);
  if (count > 0 && pool.empty()) return;
  std::vector<Tensor> args;
  for (std::size_t i = 0; i < count; ++i) args.push_back(operand(in, pool));
  Attrs attrs;
  for (const AttrSpec& spec : def.attrs) {
    const std::size_t mode = in.below(32);
    if (mode == 0) continue;  // missing
    const AttrKind kind = mode == 1 ? static_cast<AttrKind>(in.below(6)) : spec.kind;
    attrs.set(std::string(spec.name), draw_attr(in, kind));
  }
  if (in.below(64) == 0) attrs.set("not_an_attribute", in.integer());
  const std::size_t values_before = builder.graph().values().size();
  try {
    pool.push_back(builder.emit(op, args, std::move(attrs), SourceLoc{"fuzz", static_cast<std::uint32_t>(step), 1}));
  } catch (const Error&) {
    if (builder.graph().values().size() != values_before) {
      throw FuzzBug("a refused " + std::string(def.name) + " left a value in the graph");
    }
  }
}

// The front-end functions that are not one registry op (composites, defaults, scalar operands),
// which build their nodes through the same builder.
constexpr std::size_t kCompositeCount = 15;

// The conv options as a caller passes them: per-axis stride, padding (or same), dilation and groups,
// each mostly small, now and then an edge value (ByteReader::integer).
Conv2dOptions draw_conv_options(ByteReader& in) {
  Conv2dOptions options;
  if (in.coin()) options.stride = in.coin() ? Pair2d(in.integer()) : Pair2d(in.integer(), in.integer());
  if (in.coin()) {
    options.padding = in.below(4) == 0 ? kPaddingSame : Conv2dPadding(in.integer(), in.integer());
  }
  if (in.coin()) options.dilation = in.coin() ? Pair2d(in.integer()) : Pair2d(in.integer(), in.integer());
  if (in.coin()) options.groups = in.integer();
  return options;
}

void call_composite(ByteReader& in, std::size_t which, std::vector<Tensor>& pool) {
  if (pool.empty() && (which < 10 || which == 14)) return;
  switch (which) {
    case 0: {
      std::vector<Tensor> xs(1 + in.below(3));
      for (Tensor& x : xs) x = operand(in, pool);
      pool.push_back(stack(xs, in.integer()));
      return;
    }
    case 1: {
      const Tensor x = operand(in, pool);
      std::vector<std::int64_t> sizes(1 + in.below(3));
      for (std::int64_t& s : sizes) s = in.integer();
      for (const Tensor& piece : split(x, sizes, in.integer())) pool.push_back(piece);
      return;
    }
    case 2: {
      const Tensor x = operand(in, pool);
      pool.push_back(flatten(x, in.integer()));
      return;
    }
    case 3: {
      const Tensor x = operand(in, pool);
      pool.push_back(split_heads(x, in.integer()));
      return;
    }
    case 4:
      pool.push_back(merge_heads(operand(in, pool)));
      return;
    case 5: {
      const Tensor x = operand(in, pool);
      std::optional<Tensor> gain, bias;
      if (in.coin()) gain = operand(in, pool);
      if (in.coin()) bias = operand(in, pool);
      pool.push_back(in.coin() ? layer_norm(x, gain, bias, in.real()) : rms_norm(x, gain, in.real()));
      return;
    }
    case 6: {
      const Tensor x = operand(in, pool);
      pool.push_back(nearest_upsample2d(x, in.integer()));
      return;
    }
    case 7: {
      const Tensor x = operand(in, pool);
      pool.push_back(dropout(x, in.real()));
      return;
    }
    case 8: {  // scalar operands on either side, and unary minus
      const Tensor x = operand(in, pool);
      const double s = in.real();
      switch (in.below(5)) {
        case 0:
          pool.push_back(x + s);
          return;
        case 1:
          pool.push_back(s - x);
          return;
        case 2:
          pool.push_back(x * s);
          return;
        case 3:
          pool.push_back(s / x);
          return;
        default:
          pool.push_back(-x);
          return;
      }
    }
    case 9: {
      const Tensor x = operand(in, pool);
      const std::int64_t kernel = in.integer();
      Pool2dOptions options;
      if (in.coin()) options.stride = in.integer();
      options.padding = in.coin() ? in.integer() : 0;
      pool.push_back(max_pool2d(x, kernel, options));
      return;
    }
    case 10:
      pool.push_back(randn(draw_shape(in, 3)));
      return;
    case 11:
      pool.push_back(arange(in.integer(), kDTypes[in.below(2)]));
      return;
    case 12:
      pool.push_back(full(draw_shape(in, 3), in.real(), kDTypes[in.below(kDTypes.size())]));
      return;
    case 14: {  // conv2d and its adjoints through the front end (padding = same, Pair2d options)
      const Tensor a = operand(in, pool);
      const Tensor b = operand(in, pool);
      const Conv2dOptions options = draw_conv_options(in);
      switch (in.below(3)) {
        case 0:
          pool.push_back(conv2d(a, b, options));
          return;
        case 1: {
          const std::int64_t height = in.integer();
          pool.push_back(conv2d_input_grad(a, b, height, in.integer(), options));
          return;
        }
        default: {
          const std::int64_t kernel_h = in.integer();
          pool.push_back(conv2d_weight_grad(a, b, kernel_h, in.integer(), options));
          return;
        }
      }
    }
    default:
      pool.push_back(scalar(in.real()));
      return;
  }
}

HostTensor draw_values(ByteReader& in, const TensorType& type) {
  std::vector<double> values(static_cast<std::size_t>(type.size()));
  for (double& v : values) {
    if (type.dtype == DType::f32) {
      v = in.real();
    } else if (type.dtype == DType::i32) {
      constexpr auto lo = static_cast<double>(std::numeric_limits<std::int32_t>::min());
      constexpr auto hi = static_cast<double>(std::numeric_limits<std::int32_t>::max());
      v = std::clamp(static_cast<double>(in.integer()), lo, hi);
    } else {
      v = in.coin() ? 1.0 : 0.0;
    }
  }
  return HostTensor::of(type, std::move(values));
}

void check_run(const Graph& graph, const InterpResult& result) {
  for (const GraphOutput& out : graph.outputs()) {
    const auto it = result.outputs.find(out.name);
    if (it == result.outputs.end()) throw FuzzBug("the interpreter returned no output '" + out.name + "'");
    const TensorType& type = graph.type(out.value);
    if (it->second.type != type || static_cast<std::int64_t>(it->second.size()) != type.size()) {
      throw FuzzBug("the interpreter's output '" + out.name + "' is " + it->second.type.to_string() + " with " +
                    std::to_string(it->second.size()) + " values; the graph says " + type.to_string());
    }
  }
}

// Gradients of "loss" with respect to every f32 input, when there is a loss and such an input. The
// graph meets differentiate()'s preconditions, so any error is a bug.
std::optional<Graph> differentiated(const Graph& graph) {
  if (!graph.find_output("loss")) return std::nullopt;
  GradOptions options;
  for (const GraphInput& input : graph.inputs()) {
    if (graph.type(input.value).dtype == DType::f32) options.wrt.push_back(input.name);
  }
  if (options.wrt.empty()) return std::nullopt;
  Graph grads;
  try {
    grads = differentiate(graph, options);
    verify(grads);
  } catch (const Error& e) {
    throw FuzzBug(std::string("differentiating a valid graph failed: ") + e.what() + "\n" + print_graph(graph));
  }
  return grads;
}

}  // namespace

int fuzz_build_graph(const std::uint8_t* data, std::size_t size) {
  ByteReader in(data, size);
  GraphBuilder builder("fuzz");
  TracingScope scope(builder);
  std::vector<Tensor> pool;
  const std::size_t input_count = 1 + in.below(3);
  for (std::size_t i = 0; i < input_count; ++i) {
    TensorType type{draw_dtype(in), draw_shape(in, 4)};
    const InputKind kind = in.coin() ? InputKind::param : InputKind::data;
    try {
      pool.push_back(builder.input("x" + std::to_string(i), std::move(type), kind));
    } catch (const Error&) {
      // a negative or oversized dim: refused with a typed error
    }
  }
  const std::span<const OpId> ops = all_ops();
  for (int step = 0; step < kMaxSteps && !in.empty(); ++step) {
    const std::size_t choice = in.below(ops.size() + kCompositeCount);
    if (choice < ops.size()) {
      emit_registry_op(builder, in, ops[choice], pool, step);
      continue;
    }
    try {
      call_composite(in, choice - ops.size(), pool);
    } catch (const Error&) {
      // refused with a typed error; a composite may leave the nodes it built before the refusal
    }
  }
  if (pool.empty()) return 0;
  const std::size_t output_count = 1 + in.below(3);
  for (std::size_t i = 0; i < output_count; ++i) {
    builder.output("out" + std::to_string(i), pool[pool.size() - 1 - in.below(std::min<std::size_t>(pool.size(), 4))]);
  }
  if (pool.back().dtype() == DType::f32 && fits_run_limit(builder.graph())) {
    builder.output("loss", sum(pool.back()));
  }

  const Graph graph = builder.graph();
  try {
    verify(graph);
  } catch (const Error& e) {
    throw FuzzBug(std::string("the builder produced a graph that verify() refuses: ") + e.what());
  }
  const std::string printed = print_graph(graph);
  if (std::getenv("TG_FUZZ_PRINT")) std::cerr << printed;  // to see what an input builds (docs/testing.md)
  try {
    if (!same_graph(parse_graph(printed), graph)) throw FuzzBug("print -> parse changed a built graph:\n" + printed);
  } catch (const Error& e) {
    throw FuzzBug(std::string("a built graph's text does not parse: ") + e.what() + "\n" + printed);
  }
  if (!fits_run_limit(graph)) return 0;

  std::optional<Graph> grads = differentiated(graph);
  const Graph& run = grads && fits_run_limit(*grads) ? *grads : graph;
  TensorMap inputs;
  for (const GraphInput& input : run.inputs()) inputs.emplace(input.name, draw_values(in, run.type(input.value)));
  for (const ComputeType compute : {ComputeType::f64, ComputeType::f32}) {
    try {
      check_run(run, interpret(run, inputs, InterpOptions{.compute = compute}));
    } catch (const Error&) {
      // a run may fail with a typed error (an index out of range names the op)
    }
  }
  return 0;
}

}  // namespace tg::fuzz
