// Runs a graph node by node in program order (nodes are appended after their inputs, so program
// order is a topological order). Buffers are released after their last use unless the caller asks
// to keep every value.
#include "tensorgrad/interp/interpreter.h"

#include <chrono>
#include <cmath>
#include <limits>

#include "kernel.h"
#include "tensorgrad/ir/error.h"

namespace tg {

namespace {

template <class T>
interp::Buffer<T> to_buffer(const HostTensor& t) {
  interp::Buffer<T> b;
  if (is_float(t.type.dtype)) {
    b.real.assign(t.values.begin(), t.values.end());  // rounds to T: f32 mode sees f32 inputs
  } else {
    b.ints.resize(t.values.size());
    for (std::size_t i = 0; i < t.values.size(); ++i) b.ints[i] = static_cast<std::int32_t>(t.values[i]);
  }
  return b;
}

template <class T>
HostTensor to_host(const TensorType& type, const interp::Buffer<T>& b) {
  HostTensor t{type, {}};
  if (is_float(type.dtype)) {
    t.values.assign(b.real.begin(), b.real.end());
  } else {
    t.values.assign(b.ints.begin(), b.ints.end());
  }
  return t;
}

constexpr std::int32_t kIntSentinel = std::numeric_limits<std::int32_t>::min();

template <class T>
bool fully_written(const interp::Buffer<T>& out, const TensorType& type) {
  if (is_float(type.dtype)) {
    if (out.real.size() != static_cast<std::size_t>(type.size())) return false;
    for (T v : out.real)
      if (std::isnan(v)) return false;
    return true;
  }
  if (out.ints.size() != static_cast<std::size_t>(type.size())) return false;
  for (std::int32_t v : out.ints)
    if (v == kIntSentinel) return false;
  return true;
}

template <class T>
InterpResult run(const Graph& graph, const TensorMap& inputs, const InterpOptions& options) {
  const auto& values = graph.values();
  std::vector<interp::Buffer<T>> buffers(values.size());

  validate_inputs(graph, inputs);
  for (const GraphInput& in : graph.inputs()) {
    buffers[static_cast<std::size_t>(in.value)] = to_buffer<T>(inputs.find(in.name)->second);
  }

  // Last node that reads each value; graph outputs are never released.
  std::vector<NodeId> last_use(values.size(), kNoNode);
  const auto& nodes = graph.nodes();
  for (std::size_t n = 0; n < nodes.size(); ++n)
    for (ValueId v : nodes[n].inputs) last_use[static_cast<std::size_t>(v)] = static_cast<NodeId>(n);
  for (const auto& out : graph.outputs())
    last_use[static_cast<std::size_t>(out.value)] = static_cast<NodeId>(nodes.size());

  const auto& table = interp::kernel_table<T>();
  std::vector<const interp::Buffer<T>*> in_buffers;
  std::vector<const TensorType*> in_types;
  for (std::size_t n = 0; n < nodes.size(); ++n) {
    const Node& node = nodes[n];
    const auto slot = static_cast<std::size_t>(node.op);
    const auto kernel = slot < kOpIdSpace ? table[slot] : nullptr;
    if (!kernel) throw RuntimeError("the interpreter has no kernel for op '" + std::string(op_name(node.op)) + "'");
    in_buffers.clear();
    in_types.clear();
    for (ValueId v : node.inputs) {
      in_buffers.push_back(&buffers[static_cast<std::size_t>(v)]);
      in_types.push_back(&graph.type(v));
    }
    const TensorType& out_type = graph.type(node.output);
    auto& out = buffers[static_cast<std::size_t>(node.output)];
    const auto out_size = static_cast<std::size_t>(out_type.size());
    if (is_float(out_type.dtype)) {
      out.real.assign(out_size, options.check_coverage ? std::numeric_limits<T>::quiet_NaN() : T(0));
    } else {
      out.ints.assign(out_size, options.check_coverage ? kIntSentinel : 0);
    }
    const auto where = [&] {
      return " (node %" + std::to_string(n) + " " + std::string(op_name(node.op)) + ", created at " +
             node.loc.to_string() + ")";
    };
    const auto started = std::chrono::steady_clock::now();
    try {
      kernel(interp::KernelCall<T>{node, in_buffers, in_types, out_type, out});
    } catch (const RuntimeError& e) {
      throw RuntimeError(std::string(e.what()) + where());
    }
    if (options.on_node_done) {
      options.on_node_done(n, std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
    }
    if (options.check_coverage && !fully_written(out, out_type)) {
      throw RuntimeError("kernel left elements of its " + out_type.to_string() + " output unwritten" + where());
    }
    if (!options.keep_all_values) {
      for (ValueId v : node.inputs) {
        if (last_use[static_cast<std::size_t>(v)] == static_cast<NodeId>(n)) buffers[static_cast<std::size_t>(v)] = {};
      }
    }
  }

  InterpResult result;
  for (const auto& out : graph.outputs()) {
    result.outputs.emplace(out.name, to_host(graph.type(out.value), buffers[static_cast<std::size_t>(out.value)]));
  }
  if (options.keep_all_values) {
    result.values.reserve(values.size());
    for (std::size_t v = 0; v < values.size(); ++v) result.values.push_back(to_host(values[v].type, buffers[v]));
  }
  return result;
}

}  // namespace

InterpResult interpret(const Graph& graph, const TensorMap& inputs, const InterpOptions& options) {
  if (options.compute == ComputeType::f64) return run<double>(graph, inputs, options);
  return run<float>(graph, inputs, options);
}

bool interp_has_kernel(OpId op) {
  const auto i = static_cast<std::size_t>(op);
  if (i >= kOpIdSpace) return false;
  return interp::kernel_table<float>()[i] != nullptr && interp::kernel_table<double>()[i] != nullptr;
}

}  // namespace tg
