// f16 and bf16 graphs lowered to f32 compute between casts (see low_precision_lowering.h).
#include "vk/low_precision_lowering.h"

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "tensorgrad/ir/error.h"
#include "tensorgrad/ir/ops/ids/precision.h"
#include "tensorgrad/ir/ops/op_def.h"
#include "tensorgrad/vk/error.h"

namespace tg::vk {

namespace {

bool touches_low_precision(const Graph& graph, const Node& node) {
  if (is_low_precision(graph.type(node.output).dtype)) return true;
  return std::any_of(node.inputs.begin(), node.inputs.end(),
                     [&](ValueId v) { return is_low_precision(graph.type(v).dtype); });
}

// Builds the lowered graph node by node. `lowered_` maps each value of the source graph to its
// value in the new graph (same type); `as_f32_` caches, per 16-bit source value, its cast to f32,
// so a value read by several lowered nodes is widened once.
class Lowering {
 public:
  explicit Lowering(const Graph& source)
      : source_(source),
        out_(source.name()),
        lowered_(source.values().size(), -1),
        as_f32_(source.values().size(), -1) {}

  Graph run() && {
    for (const GraphInput& in : source_.inputs()) {
      lowered_[index(in.value)] = out_.add_input(in.name, in.kind, source_.type(in.value));
    }
    for (const Node& node : source_.nodes()) {
      if (node.op != op::Cast && touches_low_precision(source_, node)) {
        lower(node);
      } else {
        std::vector<ValueId> inputs;
        for (ValueId v : node.inputs) inputs.push_back(lowered_[index(v)]);
        lowered_[index(node.output)] = emit(node, node.op, inputs, node.attrs, source_.type(node.output));
      }
    }
    for (const GraphOutput& o : source_.outputs()) out_.add_output(o.name, lowered_[index(o.value)]);
    return std::move(out_);
  }

 private:
  static std::size_t index(ValueId v) { return static_cast<std::size_t>(v); }

  // `node` re-emitted in f32, its 16-bit result cast back to its dtype.
  void lower(const Node& node) {
    std::vector<ValueId> inputs;
    std::vector<TensorType> input_types;
    for (ValueId v : node.inputs) {
      inputs.push_back(is_low_precision(source_.type(v).dtype) ? widened(v, node) : lowered_[index(v)]);
      input_types.push_back(out_.type(inputs.back()));
    }
    Attrs attrs = node.attrs;
    for (const auto& [name, value] : node.attrs.items()) {
      if (const DType* dtype = std::get_if<DType>(&value); dtype && is_low_precision(*dtype)) {
        attrs.set(name, DType::f32);
      }
    }
    const TensorType& type = source_.type(node.output);
    TensorType wide = type;
    if (is_low_precision(wide.dtype)) wide.dtype = DType::f32;
    // The op's own rule must agree with the f32 form (it does for every float_generic op and for the
    // creation ops' dtype attribute); a disagreement is a bug here, not in the caller's graph.
    const TensorType ruled = infer_type(node.op, attrs, input_types);
    if (!(ruled == wide)) {
      throw Error("Vulkan f16/bf16 lowering: '" + std::string(op_name(node.op)) + "' (value %" +
                  std::to_string(node.output) + " of graph '" + source_.name() + "', created at " +
                  node.loc.to_string() + ") gives " + ruled.to_string() + " in f32, expected " + wide.to_string());
    }
    const ValueId result = emit(node, node.op, inputs, attrs, wide);
    if (!is_low_precision(type.dtype)) {
      lowered_[index(node.output)] = result;
      return;
    }
    lowered_[index(node.output)] = emit(node, op::Cast, {result}, Attrs{{"dtype", type.dtype}}, type);
  }

  // The f32 value of 16-bit source value `v` (a cast of its lowered value), made once.
  ValueId widened(ValueId v, const Node& reader) {
    ValueId& wide = as_f32_[index(v)];
    if (wide < 0) {
      TensorType type = source_.type(v);
      type.dtype = DType::f32;
      wide = emit(reader, op::Cast, {lowered_[index(v)]}, Attrs{{"dtype", DType::f32}}, type);
    }
    return wide;
  }

  // A node of the new graph with `like`'s call site and checkpoint segment.
  ValueId emit(const Node& like, OpId op, std::vector<ValueId> inputs, Attrs attrs, TensorType type) {
    const ValueId v = out_.add_node(op, std::move(inputs), std::move(attrs), std::move(type), like.loc);
    if (like.checkpoint != kNoCheckpoint) out_.set_checkpoint(out_.value(v).producer, like.checkpoint);
    return v;
  }

  const Graph& source_;
  Graph out_;
  std::vector<ValueId> lowered_;
  std::vector<ValueId> as_f32_;
};

}  // namespace

bool has_low_precision_values(const Graph& graph) {
  return std::any_of(graph.values().begin(), graph.values().end(),
                     [](const ValueInfo& v) { return is_low_precision(v.type.dtype); });
}

Graph lower_low_precision(const Graph& graph) {
  if (!has_low_precision_values(graph)) return graph;
  return Lowering(graph).run();
}

Graph prepare_low_precision(const Graph& graph, const DeviceInfo& device) {
  if (!has_low_precision_values(graph)) return graph;
  if (!device.storage_buffer_16bit_access) {
    for (std::size_t v = 0; v < graph.values().size(); ++v) {
      const TensorType& type = graph.values()[v].type;
      if (!is_low_precision(type.dtype)) continue;
      const NodeId producer = graph.values()[v].producer;
      const GraphInput* input = graph.input_of_value(static_cast<ValueId>(v));
      const std::string what = input ? "input '" + input->name + "'"
                                     : "value %" + std::to_string(v) + " ('" +
                                           std::string(op_name(graph.node(producer).op)) + "', created at " +
                                           graph.node(producer).loc.to_string() + ")";
      throw LimitError("Vulkan program '" + graph.name() + "': " + what + " is " + type.to_string() + ", but " +
                       device.summary() +
                       " has no storageBuffer16BitAccess (VkPhysicalDevice16BitStorageFeatures), "
                       "which " +
                       std::string(dtype_name(type.dtype)) +
                       " values need on the device; run the graph in f32 (cast its inputs) or on the interpreter");
    }
  }
  return Lowering(graph).run();
}

}  // namespace tg::vk
