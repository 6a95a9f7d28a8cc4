// Autocast as a Graph -> Graph pass (include/tensorgrad/passes/autocast.h). The graph is rebuilt
// value by value; each node's float inputs are cast to the dtype its AutocastClass asks for (casts
// made once per value and dtype), and its type inferred again.
#include "tensorgrad/passes/autocast.h"

#include <map>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "tensorgrad/ir/error.h"
#include "tensorgrad/ir/ops/ids.h"
#include "tensorgrad/ir/ops/op_def.h"

namespace tg {

AutocastClass autocast_class(OpId op) {
  // torch.autocast's CUDA lists are the guide: its lower-precision list holds the matrix products
  // (mm, bmm, linear, conv*) and scaled_dot_product_attention (attention computes its softmax in
  // f32 whatever its storage dtype), its f32 list the reductions, softmaxes, norms, losses and the
  // exp/log family. layer_norm and rms_norm are composites here (mean, rsqrt, ...), kept in f32
  // through their parts.
  if (op == op::Matmul || op == op::Conv2d || op == op::Attention) return AutocastClass::lower;
  if (op == op::Sum || op == op::Mean || op == op::Max || op == op::Min || op == op::Softmax || op == op::LogSoftmax ||
      op == op::SoftmaxCausal || op == op::NllLoss || op == op::CrossEntropy || op == op::Exp || op == op::Log ||
      op == op::Rsqrt) {
    return AutocastClass::f32;
  }
  return AutocastClass::follow;
}

std::string_view autocast_class_name(AutocastClass cls) {
  switch (cls) {
    case AutocastClass::lower:
      return "lower";
    case AutocastClass::f32:
      return "f32";
    case AutocastClass::follow:
      return "follow";
  }
  return "?";
}

namespace {

class Rewriter {
 public:
  Rewriter(const Graph& g, DType compute) : g_(g), compute_(compute), out_(g.name()) {}

  Graph run() {
    const std::size_t n = g_.values().size();
    renamed_.assign(n, -1);
    constant_.assign(n, false);
    for (std::size_t v = 0; v < n; ++v) {
      const auto id = static_cast<ValueId>(v);
      if (const GraphInput* in = g_.input_of_value(id)) {
        renamed_[v] = out_.add_input(in->name, in->kind, g_.type(id));
        continue;
      }
      rewrite(g_.node(g_.value(id).producer));
    }
    for (const GraphOutput& o : g_.outputs()) {
      const ValueId v = renamed_[static_cast<std::size_t>(o.value)];
      const DType original = g_.type(o.value).dtype;
      out_.add_output(o.name, cast_to(v, original, SourceLoc{}, kNoCheckpoint));
    }
    return std::move(out_);
  }

 private:
  // `v` (a value of out_) in `dtype`, through one cast node per (value, dtype).
  ValueId cast_to(ValueId v, DType dtype, const SourceLoc& loc, std::int32_t checkpoint) {
    const TensorType& type = out_.type(v);
    if (type.dtype == dtype || !is_float(type.dtype)) return v;
    const auto key = std::make_pair(v, dtype);
    if (const auto it = casts_.find(key); it != casts_.end()) return it->second;
    const ValueId cast = out_.add_node(op::Cast, {v}, Attrs{{"dtype", dtype}}, {dtype, type.shape}, loc);
    if (checkpoint != kNoCheckpoint) out_.set_checkpoint(out_.value(cast).producer, checkpoint);
    casts_.emplace(key, cast);
    return cast;
  }

  // The dtype the node's float inputs are cast to (nothing: leave them), and the dtype its float
  // result is cast back to afterwards (nothing: leave it).
  struct Plan {
    std::optional<DType> inputs;
    std::optional<DType> result;
  };

  Plan plan(const Node& node) const {
    switch (autocast_class(node.op)) {
      case AutocastClass::lower:
        return {compute_, std::nullopt};
      case AutocastClass::f32:
        return {DType::f32, std::nullopt};
      case AutocastClass::follow:
        break;
    }
    std::set<DType> computed, all;
    for (ValueId in : node.inputs) {
      const DType dtype = out_.type(renamed_[static_cast<std::size_t>(in)]).dtype;
      if (!is_float(dtype)) continue;
      all.insert(dtype);
      if (!constant_[static_cast<std::size_t>(in)]) computed.insert(dtype);
    }
    if (all.size() <= 1) return {};                               // one float dtype (or none): runs as written
    if (computed.size() != 1) return {DType::f32, std::nullopt};  // computed inputs meet: the widest
    const DType shared = *computed.begin();
    if (is_low_precision(shared) && all.contains(DType::f32)) return {DType::f32, shared};  // opmath
    return {shared, std::nullopt};
  }

  void rewrite(const Node& node) {
    if (node.op == op::Cast) {  // an explicit cast says what the author wants
      copy(node, {renamed_[static_cast<std::size_t>(node.inputs.front())]});
      return;
    }
    const Plan p = plan(node);
    std::vector<ValueId> inputs;
    for (ValueId in : node.inputs) {
      const ValueId v = renamed_[static_cast<std::size_t>(in)];
      inputs.push_back(p.inputs ? cast_to(v, *p.inputs, node.loc, node.checkpoint) : v);
    }
    const ValueId result = copy(node, std::move(inputs));
    if (p.result)
      renamed_[static_cast<std::size_t>(node.output)] = cast_to(result, *p.result, node.loc, node.checkpoint);
  }

  ValueId copy(const Node& node, std::vector<ValueId> inputs) {
    std::vector<TensorType> types;
    bool constant = true;
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      types.push_back(out_.type(inputs[i]));
      constant = constant && constant_[static_cast<std::size_t>(node.inputs[i])];
    }
    const TensorType type = infer_type(node.op, node.attrs, types);
    const ValueId v = out_.add_node(node.op, std::move(inputs), node.attrs, type, node.loc);
    if (node.checkpoint != kNoCheckpoint) out_.set_checkpoint(out_.value(v).producer, node.checkpoint);
    renamed_[static_cast<std::size_t>(node.output)] = v;
    constant_[static_cast<std::size_t>(node.output)] = constant;
    return v;
  }

  const Graph& g_;
  DType compute_;
  Graph out_;
  std::vector<ValueId> renamed_;  // value of g_ -> value of out_ (its dtype may differ)
  std::vector<bool> constant_;    // per value of g_: computed from creation ops only
  std::map<std::pair<ValueId, DType>, ValueId> casts_;
};

}  // namespace

Graph autocast(const Graph& g, DType compute) {
  if (!is_float(compute)) {
    throw Error("autocast: the compute dtype must be f32, f16 or bf16, got " + std::string(dtype_name(compute)));
  }
  if (compute == DType::f32) return g;
  return Rewriter(g, compute).run();
}

}  // namespace tg
