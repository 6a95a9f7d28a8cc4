// Runs a graph node by node in program order (nodes are appended after their inputs, so program
// order is a topological order). Buffers are released after their last use unless the caller asks
// to keep every value.
#include "tensorgrad/interp/interpreter.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <memory>
#include <type_traits>
#include <utility>

#include "kernel.h"
#include "tensorgrad/ir/error.h"

namespace tg {

namespace {

// Uninitialized room for n elements of U (the kernel writes every one; InterpOptions::check_coverage
// verifies that).
template <class U>
std::pair<std::shared_ptr<const void>, std::span<U>> allocate(std::size_t n) {
  std::shared_ptr<U[]> owner = std::make_shared_for_overwrite<U[]>(std::max<std::size_t>(n, 1));
  U* p = owner.get();
  return {std::move(owner), std::span<U>(p, n)};
}

// An input's elements as the kernels read them. Stored as the kernels compute (f32 elements in
// f32 mode, i32 elements) they are read in place, views included; otherwise converted here: the
// oracle widens f32 inputs, f32 mode rounds wide ones.
template <class T>
interp::Buffer<T> to_buffer(const HostTensor& t) {
  interp::Buffer<T> b;
  const auto n = static_cast<std::size_t>(t.size());
  if (is_float(t.type.dtype)) {
    constexpr HostStorage kSame = std::is_same_v<T, float> ? HostStorage::f32 : HostStorage::f64;
    if (t.storage() == kSame) {
      b.owner = t.owner();
      b.real = std::span<T>(const_cast<T*>(static_cast<const T*>(t.raw_data())), n);
      return b;
    }
    auto [owner, real] = allocate<T>(n);
    if (t.storage() == HostStorage::f32) {
      std::ranges::copy(t.f32_data(), real.begin());
    } else {
      std::ranges::transform(t.f64_data(), real.begin(), [](double v) { return static_cast<T>(v); });
    }
    b.owner = std::move(owner);
    b.real = real;
    return b;
  }
  if (t.storage() == HostStorage::i32) {
    b.owner = t.owner();
    b.ints = std::span<std::int32_t>(const_cast<std::int32_t*>(t.i32_data().data()), n);
    return b;
  }
  auto [owner, ints] = allocate<std::int32_t>(n);
  for (std::size_t i = 0; i < n; ++i) ints[i] = static_cast<std::int32_t>(t.at(static_cast<std::int64_t>(i)));
  b.owner = std::move(owner);
  b.ints = ints;
  return b;
}

// A value handed to the caller: the buffer itself when it has an owner (a view of caller memory is
// copied, so no result outlives the caller's memory); bool values narrowed to bytes.
template <class T>
HostTensor to_host(const TensorType& type, const interp::Buffer<T>& b) {
  if (type.dtype == DType::boolean) {
    std::vector<bool> bits(b.ints.begin(), b.ints.end());
    return HostTensor::boolean(type.shape, bits);
  }
  if (is_float(type.dtype)) {
    if (!b.owner) return HostTensor::f32(type.shape, std::vector<float>(b.real.begin(), b.real.end()));
    return HostTensor::adopt(type, std::is_same_v<T, float> ? HostStorage::f32 : HostStorage::f64, b.owner,
                             b.real.data());
  }
  if (!b.owner) return HostTensor::i32(type.shape, std::vector<std::int32_t>(b.ints.begin(), b.ints.end()));
  return HostTensor::adopt(type, HostStorage::i32, b.owner, b.ints.data());
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
      auto [owner, real] = allocate<T>(out_size);
      if (options.check_coverage) std::ranges::fill(real, std::numeric_limits<T>::quiet_NaN());
      out = {std::move(owner), real, {}};
    } else {
      // Integer kernels are not trusted to skip reading what they write: zeroed, or the sentinel.
      auto [owner, ints] = allocate<std::int32_t>(out_size);
      std::ranges::fill(ints, options.check_coverage ? kIntSentinel : 0);
      out = {std::move(owner), {}, ints};
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
