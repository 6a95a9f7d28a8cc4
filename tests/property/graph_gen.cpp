#include "graph_gen.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <optional>
#include <sstream>

#include "support/adversarial_values.h"
#include "tensorgrad/ir/error.h"
#include "tensorgrad/ir/ops/ids/indexing.h"
#include "tensorgrad/ir/ops/ids/precision.h"
#include "tensorgrad/ir/ops/ids/softmax.h"

namespace tg::testing {

namespace {

// Results beyond this magnitude make finite differences and f32 comparisons meaningless noise.
constexpr double kMaxMagnitude = 1e3;

struct Pooled {
  Tensor tensor;
  HostTensor value;  // computed by the f64 oracle while building
};

// Float inputs must be exactly representable in their dtype so the f32 and f64 runs see the same
// numbers.
double representable(double v, DType dtype) { return is_float(dtype) ? round_to_dtype(v, dtype) : v; }

// i32 and bool results compare exactly whatever their size (an argmax over 10^4 terms is an index
// near 10^4), and never feed a float input without being drawn again; only floats are bounded.
bool well_behaved(const HostTensor& t) {
  if (!is_float(t.type.dtype)) return true;
  const std::vector<double> values = t.to_f64();
  return std::all_of(values.begin(), values.end(),
                     [](double v) { return std::isfinite(v) && std::fabs(v) <= kMaxMagnitude; });
}

// Every declared size threshold above 1: where kernels split work (adversarial placement's positions).
const std::vector<std::int64_t>& split_sizes() {
  static const std::vector<std::int64_t> sizes = [] {
    std::vector<std::int64_t> out;
    for (const SizeThresholdInfo& t : size_thresholds())
      if (t.value > 1 && (out.empty() || out.back() != t.value)) out.push_back(t.value);
    return out;
  }();
  return sizes;
}

// Draws fresh values for the inputs not taken from the pool. Tie-sensitive ("spaced") inputs of one op
// are drawn as one sequence and split, so no element of one ties with an element of another.
std::vector<std::vector<double>> draw_fresh(const OpSample& sample, const std::vector<bool>& fresh, SampleRng& rng) {
  const std::size_t n = sample.inputs.size();
  std::vector<std::vector<double>> values(n);
  std::int64_t spaced_total = 0;
  std::optional<std::size_t> spaced_first;
  for (std::size_t i = 0; i < n; ++i) {
    if (fresh[i] && sample.domains[i].kind == ValueDomain::Kind::spaced) {
      spaced_total += sample.inputs[i].size();
      if (!spaced_first) spaced_first = i;
    }
  }
  std::vector<double> spaced;
  if (spaced_first) spaced = sample.domains[*spaced_first].draw(rng, spaced_total);
  std::size_t spaced_used = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (!fresh[i]) continue;
    const auto count = static_cast<std::size_t>(sample.inputs[i].size());
    if (sample.domains[i].kind == ValueDomain::Kind::spaced) {
      values[i].assign(spaced.begin() + static_cast<std::ptrdiff_t>(spaced_used),
                       spaced.begin() + static_cast<std::ptrdiff_t>(spaced_used + count));
      spaced_used += count;
    } else {
      values[i] = sample.domains[i].draw(rng, static_cast<std::int64_t>(count));
    }
    // A share of float inputs get their extremes moved to split positions (support/adversarial_values.h).
    if (is_float(sample.inputs[i].dtype)) place_extremes_at_splits(values[i], sample.inputs[i].shape, split_sizes());
    for (double& v : values[i]) v = representable(v, sample.inputs[i].dtype);
  }
  return values;
}

// Runs one node on host values in f64; nullopt when the result is not well behaved.
std::optional<HostTensor> evaluate_one(OpId op, const OpSample& sample, const std::vector<HostTensor>& args) {
  Graph one("one");
  std::vector<ValueId> ids;
  TensorMap inputs;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string name = "a" + std::to_string(i);
    ids.push_back(one.add_input(name, InputKind::data, args[i].type));
    inputs.emplace(name, args[i]);
  }
  TensorType out;
  try {
    out = infer_type(op, sample.attrs, sample.inputs);
  } catch (const RuleBroken& broken) {
    throw std::logic_error("the sample generator of '" + std::string(op_name(op)) +
                           "' produced an input its shape rule refuses: " + broken.rule);
  }
  one.add_output("y", one.add_node(op, ids, sample.attrs, out, {}));
  HostTensor result = interpret(one, inputs, {.compute = ComputeType::f64}).outputs.at("y");
  if (!well_behaved(result)) return std::nullopt;
  return result;
}

// An op with a reduction_length costs that much per output element (matmul, conv2d, pooling,
// the losses), except the softmax family, whose row length is shared by the row's outputs.
std::int64_t work_per_element(OpId op, const Attrs& attrs, std::span<const TensorType> inputs) {
  const OpDef& def = op_def(op);
  const bool shared_rows = op == op::Softmax || op == op::LogSoftmax || op == op::SoftmaxCausal;
  const std::int64_t length = def.reduction_length && !shared_rows ? def.reduction_length(attrs, inputs) : 1;
  return std::max<std::int64_t>(length, 1);
}

// Whether a step's tensors and work stay within `options` (always true for the default profile,
// whose samples are capped at 512 elements by the samples themselves).
bool within_bounds(OpId op, const OpSample& sample, const GenOptions& options, std::int64_t graph_elements) {
  if (!options.size.boundary) return true;
  TensorType out;
  try {
    out = infer_type(op, sample.attrs, sample.inputs);
  } catch (const RuleBroken&) {
    return true;  // evaluate_one reports the sample generator's bug
  }
  std::int64_t total = out.size();
  if (out.size() > options.size.max_elements) return false;
  for (const TensorType& t : sample.inputs) {
    if (t.size() > options.size.max_elements) return false;
    total += t.size();
  }
  if (std::max(total, out.size() * work_per_element(op, sample.attrs, sample.inputs)) > options.max_step_work) {
    return false;
  }
  return graph_elements + total <= options.max_graph_elements;
}

class Builder {
 public:
  Builder(std::string name, const GenOptions& options)
      : builder_(std::move(name)), scope_(builder_), options_(options) {}

  void apply(std::size_t index, const Step& step, std::span<const OpId> ops) {
    SampleRng rng(step.seed, options_.size);
    const OpId op = ops[step.op_pick % ops.size()];
    const OpDef& def = op_def(op);
    if (!def.samples) return;

    const std::vector<DType>& dtypes = options_.float_dtypes;
    const DType dtype =
        dtypes.at(static_cast<std::size_t>(rng.uniform_int(0, static_cast<std::int64_t>(dtypes.size()) - 1)));
    std::optional<OpSample> sample;
    std::optional<std::size_t> first;
    if (!pool_.empty() && def.arity != 0 && rng.coin(0.7)) {
      auto pick = static_cast<std::size_t>(rng.uniform_int(0, static_cast<std::int64_t>(pool_.size()) - 1));
      if (is_float(pool_[pick].tensor.dtype()) && pool_[pick].tensor.dtype() != dtype && rng.coin(0.3)) {
        pick = cast_into_pool(index, pick, dtype);
      }
      sample = sample_in_dtype(op, rng, pool_[pick].tensor.type(), dtype);
      if (sample && sample->domains.at(0).accepts(pool_[pick].value.to_f64())) {
        first = pick;
      } else {
        sample.reset();
      }
    }
    if (!sample) sample = sample_in_dtype(op, rng, std::nullopt, dtype);
    if (!sample || !dtypes_allowed(*sample)) return;
    if (sample->domains.size() != sample->inputs.size()) {
      throw std::logic_error("the sample generator of '" + std::string(def.name) + "' gave " +
                             std::to_string(sample->domains.size()) + " domains for " +
                             std::to_string(sample->inputs.size()) + " inputs");
    }
    if (!within_bounds(op, *sample, options_, graph_elements_)) return;

    const std::size_t n = sample->inputs.size();
    std::vector<std::optional<std::size_t>> reused(n);
    if (n > 0) reused[0] = first;
    for (std::size_t i = first ? 1 : 0; i < n; ++i) {
      if (!rng.coin(0.5)) continue;
      for (std::size_t p = 0; p < pool_.size(); ++p) {
        if (pool_[p].tensor.type() == sample->inputs[i] && sample->domains[i].accepts(pool_[p].value.to_f64())) {
          reused[i] = p;
          break;
        }
      }
    }
    std::vector<bool> fresh(n);
    for (std::size_t i = 0; i < n; ++i) fresh[i] = !reused[i];
    auto values = draw_fresh(*sample, fresh, rng);

    std::vector<HostTensor> args;
    for (std::size_t i = 0; i < n; ++i) {
      args.push_back(reused[i] ? pool_[*reused[i]].value : HostTensor::of(sample->inputs[i], values[i]));
    }
    auto result = evaluate_one(op, *sample, args);
    if (!result || !allowed(result->type.dtype)) return;

    std::vector<Tensor> operands;
    for (std::size_t i = 0; i < n; ++i) {
      if (reused[i]) {
        operands.push_back(pool_[*reused[i]].tensor);
        continue;
      }
      const std::string name = "x" + std::to_string(case_.inputs.size());
      operands.push_back(builder_.input(name, sample->inputs[i]));
      case_.inputs.emplace(name, args[i]);
      if (sample->domains[i].kind == ValueDomain::Kind::small_ints && is_float(sample->inputs[i].dtype)) {
        case_.frozen.insert(name);
      }
      pool_.push_back(Pooled{operands.back(), args[i]});
    }
    const SourceLoc loc{"random_graph", static_cast<std::uint32_t>(index + 1), 0};
    Tensor out = builder_.emit(op, operands, sample->attrs, loc);
    graph_elements_ += out.type().size();
    for (std::size_t i = 0; i < n; ++i)
      if (!reused[i]) graph_elements_ += sample->inputs[i].size();
    pool_.push_back(Pooled{out, std::move(*result)});
  }

  bool allowed(DType dtype) const {
    return !is_float(dtype) ||
           std::find(options_.float_dtypes.begin(), options_.float_dtypes.end(), dtype) != options_.float_dtypes.end();
  }
  bool dtypes_allowed(const OpSample& sample) const {
    return std::all_of(sample.inputs.begin(), sample.inputs.end(),
                       [&](const TensorType& t) { return allowed(t.dtype); });
  }

  // Adds cast(pool[pick], dtype) to the graph and the pool; returns its pool index.
  std::size_t cast_into_pool(std::size_t index, std::size_t pick, DType dtype) {
    const Pooled& from = pool_[pick];
    const Attrs attrs{{"dtype", dtype}};
    const OpSample cast_sample{attrs, {from.tensor.type()}, {ValueDomain::real_range(-kMaxMagnitude, kMaxMagnitude)}};
    std::optional<HostTensor> value = evaluate_one(op::Cast, cast_sample, {from.value});
    if (!value) return pick;
    const SourceLoc loc{"random_graph", static_cast<std::uint32_t>(index + 1), 0};
    const std::array<Tensor, 1> operand{from.tensor};
    Tensor out = builder_.emit(op::Cast, operand, attrs, loc);
    graph_elements_ += out.type().size();
    pool_.push_back(Pooled{out, std::move(*value)});
    return pool_.size() - 1;
  }

  GraphCase finish() {
    const Graph& g = builder_.graph();
    std::vector<bool> consumed(g.values().size(), false);
    for (const Node& node : g.nodes())
      for (ValueId v : node.inputs) consumed[static_cast<std::size_t>(v)] = true;
    int k = 0;
    for (const Node& node : g.nodes()) {
      if (!consumed[static_cast<std::size_t>(node.output)])
        builder_.output("out" + std::to_string(k++), builder_.wrap(node.output));
    }
    case_.graph = builder_.take();
    return std::move(case_);
  }

 private:
  GraphBuilder builder_;
  TracingScope scope_;
  GenOptions options_;
  std::vector<Pooled> pool_;
  GraphCase case_;
  std::int64_t graph_elements_ = 0;  // elements of every value emitted so far
};

}  // namespace

void showValue(const Step& step, std::ostream& os) { os << "{op " << step.op_pick << ", seed " << step.seed << "}"; }

std::vector<OpId> sampled_ops() {
  std::vector<OpId> ops;
  for (OpId op : all_ops())
    if (op_def(op).samples) ops.push_back(op);
  return ops;
}

GenOptions boundary_options() {
  GenOptions options;
  options.size.boundary = true;
  return options;
}

namespace {
std::int64_t saturating_add(std::int64_t a, std::int64_t b) {
  std::int64_t out = 0;
  return __builtin_add_overflow(a, b, &out) ? std::numeric_limits<std::int64_t>::max() : out;
}
std::int64_t saturating_mul(std::int64_t a, std::int64_t b) {
  std::int64_t out = 0;
  return __builtin_mul_overflow(a, b, &out) ? std::numeric_limits<std::int64_t>::max() : out;
}
}  // namespace

GraphCost& GraphCost::operator+=(const GraphCost& other) {
  value_bytes = saturating_add(value_bytes, other.value_bytes);
  work = saturating_add(work, other.work);
  return *this;
}

GraphCost graph_cost(const Graph& g) {
  GraphCost cost;
  for (const ValueInfo& v : g.values())
    cost.value_bytes = saturating_add(cost.value_bytes, saturating_mul(v.type.size(), 8));
  for (const Node& node : g.nodes()) {
    std::vector<TensorType> inputs;
    for (ValueId in : node.inputs) inputs.push_back(g.type(in));
    cost.work = saturating_add(
        cost.work, saturating_mul(g.type(node.output).size(), work_per_element(node.op, node.attrs, inputs)));
  }
  return cost;
}

bool holds_dtype(const GraphCase& c, DType dtype) {
  return std::any_of(c.graph.values().begin(), c.graph.values().end(),
                     [&](const ValueInfo& v) { return v.type.dtype == dtype; });
}

GraphCase build_graph(const std::vector<Step>& steps, std::span<const OpId> ops, const GenOptions& options) {
  Builder builder("random", options);
  for (std::size_t i = 0; i < steps.size(); ++i) builder.apply(i, steps[i], ops);
  return builder.finish();
}

GraphCase build_single_op(OpId op, const OpSample& sample, SampleRng& rng) {
  GraphCase c;
  GraphBuilder builder(std::string(op_name(op)));
  const std::vector<bool> fresh(sample.inputs.size(), true);
  const auto values = draw_fresh(sample, fresh, rng);
  std::vector<Tensor> operands;
  for (std::size_t i = 0; i < sample.inputs.size(); ++i) {
    const std::string name = "x" + std::to_string(i);
    operands.push_back(builder.input(name, sample.inputs[i]));
    c.inputs.emplace(name, HostTensor::of(sample.inputs[i], values[i]));
    if (sample.domains[i].kind == ValueDomain::Kind::small_ints && is_float(sample.inputs[i].dtype))
      c.frozen.insert(name);
  }
  builder.output("y", builder.emit(op, operands, sample.attrs, SourceLoc{"single_op", 1, 0}));
  c.graph = builder.take();
  return c;
}

std::int64_t largest_value(const Graph& g) {
  std::int64_t largest = 0;
  for (const ValueInfo& v : g.values()) largest = std::max(largest, v.type.size());
  return largest;
}

std::string describe_tensor(const std::string& name, const HostTensor& t) {
  std::ostringstream out;
  out.precision(17);
  out << "  %" << name << ": " << t.type.to_string() << " = [";
  for (std::size_t i = 0; i < t.size(); ++i) out << (i ? ", " : "") << t.at(i);
  out << "]\n";
  return out.str();
}

std::string describe(const GraphCase& c) {
  std::string text = "\n" + print_graph(c.graph, {.locations = false}) + "inputs:\n";
  for (const auto& [name, tensor] : c.inputs) text += describe_tensor(name, tensor);
  return text;
}

rc::Gen<std::vector<Step>> gen_recipe(std::size_t op_count, int max_steps) {
  // RapidCheck scales inRange and arbitrary by its size parameter; a step is drawn at full size so
  // every op of the registry is picked from the first case on, whatever the recipe's length.
  const auto step = rc::gen::resize(
      100, rc::gen::construct<Step>(rc::gen::inRange<std::uint32_t>(0, static_cast<std::uint32_t>(op_count)),
                                    rc::gen::arbitrary<std::uint64_t>()));
  // Removing steps is how RapidCheck shrinks a container: every shorter recipe still builds.
  // Lengths grow with RapidCheck's size parameter (0..100) and reach max_steps by a third of the
  // way, so most cases are full-sized graphs; longer draws are cut to max_steps.
  const auto steps = rc::gen::scale(3.0 * max_steps / 100.0, rc::gen::container<std::vector<Step>>(step));
  return rc::gen::map(rc::gen::suchThat(steps, [](const std::vector<Step>& s) { return !s.empty(); }),
                      [max_steps](std::vector<Step> s) {
                        if (s.size() > static_cast<std::size_t>(max_steps))
                          s.resize(static_cast<std::size_t>(max_steps));
                        return s;
                      });
}

}  // namespace tg::testing
