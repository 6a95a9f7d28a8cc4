// Elementwise fusion (see fusion.h): runs of elementwise f32 nodes over one shape become one launch
// of shaders/fused_elementwise.comp, whose program travels in specialization constants.
#include "vk/fusion.h"

#include <algorithm>
#include <array>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tensorgrad/ir/ops/ids/elementwise_binary.h"
#include "tensorgrad/ir/ops/ids/layout.h"
#include "tensorgrad/ir/ops/ids/precision.h"
#include "vk/ew_codes.h"
#include "vk/fusion_operands.h"

namespace tg::vk {

namespace {

// The shader's limits (fused_elementwise.comp): its bindings are fixed, so they bound the inputs
// and outputs, and its registers the steps.
constexpr std::size_t kMaxInputs = 12;
constexpr std::size_t kMaxOutputs = 4;
constexpr std::size_t kMaxSteps = 24;
static_assert(kMaxInputs + kMaxOutputs == kFusedStorageBuffers);
constexpr std::size_t kMaxParamSlots = 4;  // unary steps with params (ew_params) in one run
// Step op codes (the step word's low byte): a binary-family code (vk/ew_codes.h), or a unary-family
// code + kUnary; the copy step of broadcast_to is kEwCopy + kUnary.
constexpr std::uint32_t kUnary = 16;
static_assert(kEwBinaryCodes <= kUnary, "binary op codes must stay below the fused kernel's UNARY");
static_assert(kUnary + kEwRoundBf16 <= 0xFF, "unary op codes + UNARY must fit the step word's op byte");
constexpr std::uint32_t kCopy = kUnary + kEwCopy;
// A cast of a register to f16 / bf16 inside a run (a rounding step; see fusable_cast).
constexpr std::uint32_t kRoundF16 = kUnary + kEwRoundF16;
constexpr std::uint32_t kRoundBf16 = kUnary + kEwRoundBf16;

// The push constants, within the 128 bytes Vulkan guarantees (maxPushConstantsSize). A periodic,
// spread or channel input needs one number in period[k]; a channel input also its element count,
// which has no room per input (12 more words would make 132 bytes), so the channel inputs' counts
// are packed in channel_size by their rank among the channel inputs (the shader derives the rank
// from the CHANNEL_INPUTS bitmask, a specialization constant, at compile time). One slot short of
// the inputs: a run reads at most kMaxChannelInputs channel inputs (Run::add).
constexpr std::size_t kMaxChannelInputs = 11;
struct FusedPush {
  std::uint32_t n = 0;
  float p0[kMaxParamSlots] = {};  // per param slot: a unary step's params (shader pc.p0, pc.p1)
  float p1[kMaxParamSlots] = {};
  std::uint32_t period[kMaxInputs] = {};  // periodic inputs: their element count; spread, channel: their run
  std::uint32_t channel_size[kMaxChannelInputs] = {};  // the j-th channel input's element count
};
static_assert(sizeof(FusedPush) == 128, "Vulkan guarantees 128 bytes of push constants, no more");

// Per op, its step code in a fused program (kUnary above), from the generated op codes: every TG_EW
// op of ops.def fuses, nothing else (broadcast_to's copy aside, fusable_code below).
class StepCodes {
 public:
  StepCodes() {
    for (const EwOp& ew : kEwOps) {
      by_op_[static_cast<std::size_t>(ew.op)] = ew.family == EwFamily::binary ? ew.code : kUnary + ew.code;
    }
  }
  std::optional<std::uint32_t> operator[](OpId op) const { return by_op_[static_cast<std::size_t>(op)]; }

 private:
  std::array<std::optional<std::uint32_t>, kOpIdSpace> by_op_{};
};
const StepCodes kStepCodes;

// Every fusable op's step inside a fused window: vulkan/<op>/fused (their own dispatches are named
// vulkan/<op>/own_kernel by the family kernels). Declared for the ops with a step code and broadcast_to.
struct FusedOpPaths {
  FusedOpPaths() {
    for (const OpId op : all_ops()) {
      if (op == op::BroadcastTo || op == op::Cast || kStepCodes[op])
        by_op[static_cast<std::size_t>(op)] = std::make_unique<LaunchPath>("vulkan", op_name(op), "fused");
    }
  }
  std::array<std::unique_ptr<LaunchPath>, kOpIdSpace> by_op;
};
const FusedOpPaths kFusedOpPaths;

// The fused window's kinds: how many values it stores, and which operand forms it reads (of the
// output's shape, one element broadcast, periodic, spread, channel: each a branch of the shader's
// loads; fusion_operands.h).
const LaunchPath kOneOutput{"vulkan", "fusion", "one_output"};
const LaunchPath kSeveralOutputs{"vulkan", "fusion", "several_outputs"};
const LaunchPath kSameShapeOperands{"vulkan", "fusion", "same_shape_operands"};
const LaunchPath kScalarOperands{"vulkan", "fusion", "scalar_operands"};
const LaunchPath kPeriodicOperands{"vulkan", "fusion", "periodic_operands"};
const LaunchPath kSpreadOperands{"vulkan", "fusion", "spread_operands"};
const LaunchPath kChannelOperands{"vulkan", "fusion", "channel_operands"};
// Where the window ended (Fuser::pick_end): the whole window, or a chosen end because a shader
// limit (steps, inputs, param slots) cut the window, or because the whole of it would store too many
// values (or a bool).
const LaunchPath kWholeWindow{"vulkan", "fusion", "whole_window"};
const LaunchPath kCutAtLimit{"vulkan", "fusion", "cut_at_limit"};
const LaunchPath kCutAtOutputs{"vulkan", "fusion", "cut_at_outputs"};

// Whether `in` may be a register of a run whose values have type `out`: of the output's shape, a
// single element (broadcast), periodic, spread or channel (fusion_operands.h).
bool fusable_operand(const TensorType& in, const TensorType& out) {
  return operand_read(in, out).form != OperandForm::none;
}

// A cast may join a run when its 16-bit side is a register of the run, never memory (the fused
// shader reads and writes f32 words): a cast to f16 / bf16 rounds its f32 operand in the register
// (a rounding step; the run may not end storing it, as with a comparison's bool), and a cast of such
// a register to f32 or to the other 16-bit dtype is a copy or a rounding step whose operand the run
// computed (Run::add checks). So a chain of ops on bf16 values, which Vulkan runs as f32 ops between
// casts (low_precision_lowering.h), is one dispatch, each value rounded where the graph stores it.
std::optional<std::uint32_t> fusable_cast(const Graph& graph, const Node& node, const KernelLaunch& launch) {
  if (launch.shader != "cast" || launch.items == 0 || !launch.then.empty() || launch.index_check ||
      launch.scratch_bytes != 0 || !launch.extra_reads.empty()) {
    return std::nullopt;
  }
  const TensorType& in = graph.type(node.inputs[0]);
  const TensorType& out = graph.type(node.output);
  if (!is_float(in.dtype) || !(in.shape == out.shape) || out.size() <= 0 ||
      out.size() > std::numeric_limits<std::uint32_t>::max()) {
    return std::nullopt;
  }
  switch (out.dtype) {
    case DType::f16:
      return kRoundF16;
    case DType::bf16:
      return kRoundBf16;
    case DType::f32:
      return kCopy;
    default:
      return std::nullopt;
  }
}

// Whether node n may join a run at all: an f32 op of the families above whose per-op launch is
// the family kernel (a fused step reproduces that kernel's bits, no other's), every operand one the
// run can read (fusable_operand), the output non-empty.
std::optional<std::uint32_t> fusable_code(const Graph& graph, const Node& node, const KernelLaunch& launch) {
  if (node.op == op::Cast) return fusable_cast(graph, node, launch);
  // broadcast_to of a register the run can read (one element, periodic, spread, channel): a copy step.
  const bool broadcast_copy = node.op == op::BroadcastTo &&
                              fusable_operand(graph.type(node.inputs[0]), graph.type(node.output)) &&
                              !(graph.type(node.inputs[0]).shape == graph.type(node.output).shape);
  const auto code = broadcast_copy ? std::optional<std::uint32_t>(kCopy) : kStepCodes[node.op];
  if (!code) return std::nullopt;
  const char* family = broadcast_copy ? "layout" : *code < kUnary ? "elementwise_binary" : "elementwise_unary";
  if (launch.shader != family || launch.items == 0 || !launch.then.empty() || launch.index_check ||
      launch.scratch_bytes != 0 || !launch.extra_reads.empty()) {
    return std::nullopt;
  }
  const TensorType& out = graph.type(node.output);
  const bool where = node.op == op::Where;
  // A comparison: a binary-family op with a bool result (ew_compare in the shaders), which lives in
  // a register as 1.0 / 0.0 and only the run's own where reads (see Run::add, Fuser::may_end).
  const bool compare = *code < kUnary && !where && out.dtype == DType::boolean;
  if ((out.dtype != DType::f32 && !compare) || out.size() <= 0 ||
      out.size() > std::numeric_limits<std::uint32_t>::max()) {
    return std::nullopt;
  }
  for (std::size_t k = 0; k < node.inputs.size(); ++k) {
    const TensorType& in = graph.type(node.inputs[k]);
    // where's condition: a bool of the output's shape (Run::add demands the run computed it).
    if (where && k == 0) {
      if (in.dtype != DType::boolean || !(in.shape == out.shape)) return std::nullopt;
      continue;
    }
    if (!fusable_operand(in, out)) return std::nullopt;
  }
  return code;
}

// Per node of the graph: what the run search needs.
struct NodeFacts {
  std::optional<std::uint32_t> code;  // set when the node may join a run
  bool constant = false;  // no inputs (or a cast of a constant): its launch may stay where it is inside a run
};

// One run being assembled: its nodes in order, the outside values it reads and the registers of
// the values its nodes produce. add() refuses a node that would break the shader's limits and
// leaves the run unchanged then.
class Run {
 public:
  explicit Run(const Graph& graph) : graph_(graph) {}

  bool add(NodeId n, std::uint32_t code) {
    const Node& node = graph_.node(n);
    if (nodes_.size() == kMaxSteps) return false;
    // A where's condition must be a comparison of this run (a register holding 1.0 / 0.0): a bool
    // from memory is an int32 word, not a float.
    const bool where = node.op == op::Where;
    // A where's condition and a cast's 16-bit operand live in the run's registers only.
    const bool from_16bit = node.op == op::Cast && is_low_precision(graph_.type(node.inputs[0]).dtype);
    if (where || from_16bit) {
      const auto operand = registers_.find(node.inputs[0]);
      if (operand == registers_.end() || operand->second < kMaxInputs) return false;
    }
    // A unary step with real attributes (clamp's bounds) takes a param slot for them.
    const bool unary = code >= kUnary && code != kCopy && code != kRoundF16 && code != kRoundBf16;
    const EwParams params = unary ? ew_params(node) : EwParams{};
    if (params.count > 0 && param_slots_ == kMaxParamSlots) return false;
    std::vector<ValueId> fresh;
    for (ValueId v : node.inputs) {
      if (!registers_.contains(v) && std::find(fresh.begin(), fresh.end(), v) == fresh.end()) fresh.push_back(v);
    }
    if (inputs_.size() + fresh.size() > kMaxInputs) return false;
    const TensorType& type = graph_.type(node.output);
    const auto channels = std::count_if(fresh.begin(), fresh.end(), [&](ValueId v) {
      return operand_read(graph_.type(v), type).form == OperandForm::channel;
    });
    if (channel_inputs_ + static_cast<std::size_t>(channels) > kMaxChannelInputs) return false;
    channel_inputs_ += static_cast<std::size_t>(channels);
    for (ValueId v : fresh) {
      registers_.emplace(v, static_cast<std::uint32_t>(inputs_.size()));
      inputs_.push_back(v);
    }
    std::uint32_t word = code;
    word |= registers_.at(node.inputs[0]) << 8;
    if (node.inputs.size() > 1) word |= registers_.at(node.inputs[1]) << 16;
    if (where) word |= registers_.at(node.inputs[2]) << 24;
    if (params.count > 0) {
      push_.p0[param_slots_] = params.values[0];
      push_.p1[param_slots_] = params.values[1];
      word |= static_cast<std::uint32_t>(param_slots_++) << 24;
    }
    registers_.emplace(node.output, static_cast<std::uint32_t>(kMaxInputs + nodes_.size()));
    nodes_.push_back(n);
    steps_.push_back(word);
    return true;
  }

  const std::vector<NodeId>& nodes() const { return nodes_; }
  // Whether `v` is a value one of the run's nodes computes (held in a register, not memory).
  bool computes(ValueId v) const {
    const auto it = registers_.find(v);
    return it != registers_.end() && it->second >= kMaxInputs;
  }

  // The launch on the run's last node: `written` are the values it stores (the last node's first).
  KernelLaunch launch(const std::vector<ValueId>& written) const {
    const TensorType& type = graph_.type(graph_.node(nodes_.back()).output);
    FusedPush push = push_;
    push.n = static_cast<std::uint32_t>(type.size());

    std::uint32_t scalars = 0, periodics = 0, spreads = 0, channels = 0, output_registers = 0;
    std::size_t channel_count = 0;
    bool same_shape = false;
    for (std::size_t k = 0; k < inputs_.size(); ++k) {
      const OperandRead read = operand_read(graph_.type(inputs_[k]), type);
      switch (read.form) {
        case OperandForm::same:
        case OperandForm::none:  // not reached: fusable_code and fusable_cast admit readable inputs only
          same_shape = true;
          break;
        case OperandForm::scalar:
          scalars |= 1u << k;
          break;
        case OperandForm::periodic:
          periodics |= 1u << k;
          push.period[k] = read.size;
          break;
        case OperandForm::spread:
          spreads |= 1u << k;
          push.period[k] = read.run;
          break;
        case OperandForm::channel:
          channels |= 1u << k;
          push.period[k] = read.run;
          push.channel_size[channel_count++] = read.size;  // its rank among the channel inputs
          break;
      }
    }
    for (std::size_t o = 0; o < written.size(); ++o) output_registers |= registers_.at(written[o]) << (8 * o);

    KernelLaunch launch;
    launch.shader = "fused_elementwise";
    // The shader declares every binding: unused ones repeat a real one and are never touched.
    launch.bindings = inputs_;
    launch.bindings.resize(kMaxInputs, inputs_.front());
    launch.bindings.insert(launch.bindings.end(), written.begin(), written.end());
    launch.bindings.resize(kMaxInputs + kMaxOutputs, written.front());
    launch.writes = kMaxOutputs;
    append_pod(launch.push, push);
    launch.items = (std::uint64_t{push.n} + 3) / 4;  // vec4 slots, the last one partial when 4 does not divide n
    launch.loop_passes = simple_kernel_passes(launch.items, launch.group_size);
    launch.specialization = {static_cast<std::uint32_t>(nodes_.size()), static_cast<std::uint32_t>(inputs_.size()),
                             scalars, static_cast<std::uint32_t>(written.size()), output_registers};
    launch.specialization.insert(launch.specialization.end(), steps_.begin(), steps_.end());
    launch.specialization.resize(5 + kMaxSteps, 0);
    launch.specialization.push_back(periodics);
    launch.specialization.push_back(spreads);
    launch.specialization.push_back(channels);
    launch.label = "fused(";
    for (std::size_t s = 0; s < nodes_.size(); ++s) {
      launch.label += (s ? "," : "") + std::string(op_name(graph_.node(nodes_[s]).op));
    }
    launch.label += ")";
    launch.extra_reads = inputs_;
    launch.paths = {written.size() > 1 ? &kSeveralOutputs : &kOneOutput};
    if (same_shape) launch.paths.push_back(&kSameShapeOperands);
    if (scalars != 0) launch.paths.push_back(&kScalarOperands);
    if (periodics != 0) launch.paths.push_back(&kPeriodicOperands);
    if (spreads != 0) launch.paths.push_back(&kSpreadOperands);
    if (channels != 0) launch.paths.push_back(&kChannelOperands);
    for (NodeId n : nodes_) {
      const LaunchPath* op = kFusedOpPaths.by_op[static_cast<std::size_t>(graph_.node(n).op)].get();
      if (std::find(launch.paths.begin(), launch.paths.end(), op) == launch.paths.end()) launch.paths.push_back(op);
    }
    return launch;
  }

 private:
  const Graph& graph_;
  std::vector<NodeId> nodes_;
  std::vector<std::uint32_t> steps_;
  std::vector<ValueId> inputs_;
  std::map<ValueId, std::uint32_t> registers_;  // outside inputs and the run's own values
  std::size_t param_slots_ = 0;
  std::size_t channel_inputs_ = 0;  // inputs of the channel form (at most kMaxChannelInputs)
  FusedPush push_;
};

class Fuser {
 public:
  Fuser(const Graph& graph, std::vector<KernelLaunch> launches) : graph_(graph), launches_(std::move(launches)) {
    const auto& nodes = graph.nodes();
    facts_.resize(nodes.size());
    last_use_.assign(graph.values().size(), kNoNode);
    is_output_.assign(graph.values().size(), false);
    for (std::size_t n = 0; n < nodes.size(); ++n) {
      facts_[n].code = fusable_code(graph, nodes[n], launches_[n]);
      facts_[n].constant = nodes[n].inputs.empty() && !facts_[n].code;
      // A cast of a constant (a 16-bit graph's scalars: f32 fills cast to the dtype and back, see
      // low_precision_lowering.h) is a constant too: computed once at build (program_plan.cpp), so
      // a run passes over it as over the fill.
      if (nodes[n].op == op::Cast) {
        const NodeId producer = graph.value(nodes[n].inputs[0]).producer;
        if (producer != kNoNode && facts_[static_cast<std::size_t>(producer)].constant) {
          facts_[n] = NodeFacts{.code = std::nullopt, .constant = true};
        }
      }
      for (ValueId v : nodes[n].inputs) last_use_[static_cast<std::size_t>(v)] = static_cast<NodeId>(n);
    }
    for (const GraphOutput& out : graph.outputs()) is_output_[static_cast<std::size_t>(out.value)] = true;
  }

  std::vector<KernelLaunch> run() && {
    const auto count = static_cast<NodeId>(graph_.nodes().size());
    NodeId start = 0;
    while (start < count) {
      if (!facts_[static_cast<std::size_t>(start)].code) {
        ++start;
        continue;
      }
      const auto [window, breaker] = grow(start);
      const std::size_t end = pick_end(window, breaker);
      // pick_end takes the whole window first whenever no limit cut it and it may end there.
      const LaunchPath& form = breaker != kNoNode         ? kCutAtLimit
                               : end + 1 == window.size() ? kWholeWindow
                                                          : kCutAtOutputs;
      if (end > 0) emit({window.begin(), window.begin() + static_cast<std::ptrdiff_t>(end) + 1}, form);
      start = window[end] + 1;
    }
    return std::move(launches_);
  }

 private:
  const std::optional<std::uint32_t>& code(NodeId n) const { return facts_[static_cast<std::size_t>(n)].code; }
  const Shape& shape(NodeId n) const { return graph_.type(graph_.node(n).output).shape; }

  // The run's values that must reach memory if it ends at `last`: those read later or by the
  // caller, and always the last node's (so the launch writes something even for a dead chain).
  std::vector<ValueId> written(const std::vector<NodeId>& run) const {
    const NodeId last = run.back();
    std::vector<ValueId> out{graph_.node(last).output};
    for (NodeId n : run) {
      const ValueId v = graph_.node(n).output;
      if (n != last && (last_use_[static_cast<std::size_t>(v)] > last || is_output_[static_cast<std::size_t>(v)])) {
        out.push_back(v);
      }
    }
    return out;
  }

  // Whether a run may end with its last node: it stores at most kMaxOutputs values, all f32 (a
  // comparison's bool and a cast's 16-bit value are registers of the run, never stored words).
  bool may_end(const std::vector<NodeId>& run) const {
    const std::vector<ValueId> stored = written(run);
    return stored.size() <= kMaxOutputs &&
           std::all_of(stored.begin(), stored.end(), [&](ValueId v) { return graph_.type(v).dtype == DType::f32; });
  }

  // The longest run from `start` that the shader's step, input and param slot limits allow (constants in
  // between stay outside it), and the fusable node that hit a limit (kNoNode if none did).
  std::pair<std::vector<NodeId>, NodeId> grow(NodeId start) const {
    Run run(graph_);
    if (!run.add(start, *code(start))) return {{start}, kNoNode};  // a where whose condition is not the run's
    const auto count = static_cast<NodeId>(graph_.nodes().size());
    for (NodeId n = start + 1; n < count; ++n) {
      if (facts_[static_cast<std::size_t>(n)].constant) continue;
      // A widening cast of a 16-bit value in memory (a graph input, a value stored earlier) keeps
      // its own launch, before the run's, like a constant: it reads nothing the run computes, and
      // the run reads its f32 result as an outside input.
      const Node& node = graph_.node(n);
      if (node.op == op::Cast && is_low_precision(graph_.type(node.inputs[0]).dtype) && !run.computes(node.inputs[0])) {
        continue;
      }
      if (!code(n) || !(shape(n) == shape(start))) break;
      if (!run.add(n, *code(n))) return {run.nodes(), n};
    }
    return {run.nodes(), kNoNode};
  }

  // Where to end the run in `window` (an index >= 1, or 0: no run): within the output limit, and,
  // when a limit cut the window short, where the fewest values cross to the nodes after the cut
  // (a cut between two independent chains, e.g. two params' optimizer updates, crosses none), then
  // where the run writes the fewest values (not after the first node of the next chain, whose
  // value would go through memory). Remaining ties go to the longest run.
  std::size_t pick_end(const std::vector<NodeId>& window, NodeId breaker) const {
    // No limit cut the window: the whole of it, when it may end there, is one dispatch instead of
    // several (independent chains side by side included).
    if (breaker == kNoNode && window.size() > 1 && may_end(window)) return window.size() - 1;
    std::size_t best = 0;
    std::pair<std::size_t, std::size_t> best_cost{std::numeric_limits<std::size_t>::max(), 0};
    for (std::size_t e = window.size(); e-- > 1;) {
      const std::vector<NodeId> run(window.begin(), window.begin() + static_cast<std::ptrdiff_t>(e) + 1);
      if (!may_end(run)) continue;
      const std::size_t writes = written(run).size();
      std::vector<NodeId> after(window.begin() + static_cast<std::ptrdiff_t>(e) + 1, window.end());
      if (breaker != kNoNode) after.push_back(breaker);
      std::vector<ValueId> crossing;
      for (NodeId n : after) {
        for (ValueId v : graph_.node(n).inputs) {
          const NodeId producer = graph_.value(v).producer;
          if (producer != kNoNode && producer >= window.front() && producer <= window[e] && code(producer) &&
              std::find(crossing.begin(), crossing.end(), v) == crossing.end()) {
            crossing.push_back(v);
          }
        }
      }
      const std::pair<std::size_t, std::size_t> cost{crossing.size(), writes};
      if (cost < best_cost) {
        best_cost = cost;
        best = e;
      }
    }
    return best;
  }

  void emit(const std::vector<NodeId>& nodes, const LaunchPath& form) {
    Run run(graph_);
    for (NodeId n : nodes) run.add(n, *code(n));
    for (std::size_t k = 0; k + 1 < nodes.size(); ++k) launches_[static_cast<std::size_t>(nodes[k])].items = 0;
    KernelLaunch& launch = launches_[static_cast<std::size_t>(nodes.back())];
    launch = run.launch(written(nodes));
    launch.paths.insert(launch.paths.begin() + 1, &form);
  }

  const Graph& graph_;
  std::vector<KernelLaunch> launches_;
  std::vector<NodeFacts> facts_;
  std::vector<NodeId> last_use_;  // per value: the last node reading it (kNoNode: none)
  std::vector<bool> is_output_;   // per value: a graph output
};

}  // namespace

std::vector<KernelLaunch> fuse_elementwise(const Graph& graph, std::vector<KernelLaunch> launches) {
  return Fuser(graph, std::move(launches)).run();
}

}  // namespace tg::vk
