// Runs a graph node by node in program order (nodes are appended after their inputs, so program
// order is a topological order), or, with InterpSchedule::parallel, each node as soon as its inputs
// are done, independent nodes at the same time. Buffers are released after their last use unless
// the caller asks to keep every value.
#include "tensorgrad/interp/interpreter.h"

#include <tbb/global_control.h>
#include <tbb/task_arena.h>
#include <tbb/task_group.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <exception>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <type_traits>
#include <utility>

#include "kernel.h"
#include "tensorgrad/ir/error.h"
#include "tensorgrad/ir/low_precision.h"

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
    } else if (t.storage() == HostStorage::f64) {
      // The oracle keeps wide f32 values as given (a finite-difference step may be finer than
      // f32) and stores a 16-bit input's values in its dtype, as every value of that dtype; f32
      // mode stores them in the dtype.
      const DType dtype = t.type.dtype;
      std::ranges::transform(t.f64_data(), real.begin(), [dtype](double v) {
        if (std::is_same_v<T, double>) return static_cast<T>(is_low_precision(dtype) ? round_to_dtype(v, dtype) : v);
        return static_cast<T>(round_to_dtype(static_cast<float>(round_to_dtype(v, dtype)), dtype));
      });
    } else {
      for (std::size_t i = 0; i < n; ++i) real[i] = static_cast<T>(t.at_unchecked(i));
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
  if (is_low_precision(type.dtype) && std::is_same_v<T, float>) {
    std::vector<std::uint16_t> bits(b.real.size());
    for (std::size_t i = 0; i < bits.size(); ++i) {
      bits[i] = f32_to_low_precision_bits(static_cast<float>(b.real[i]), type.dtype);
    }
    return HostTensor::from_bits(type.dtype, type.shape, std::move(bits));
  }
  if (is_float(type.dtype)) {
    if (!b.owner) {
      if (std::is_same_v<T, double> && type.dtype != DType::f32) {
        return HostTensor::of(type, std::vector<double>(b.real.begin(), b.real.end()));
      }
      return HostTensor::f32(type.shape, std::vector<float>(b.real.begin(), b.real.end()));
    }
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

// One interpret() call: the buffers, the bookkeeping that releases them, and the node runner both
// schedules share.
template <class T>
class Execution {
 public:
  Execution(const Graph& graph, const TensorMap& inputs, const InterpOptions& options)
      : graph_(graph),
        options_(options),
        table_(interp::kernel_table<T>()),
        buffers_(graph.values().size()),
        held_bytes_(graph.values().size(), 0),
        readers_(graph.values().size()) {
    validate_inputs(graph, inputs);
    for (const GraphInput& in : graph.inputs()) {
      const HostTensor& t = inputs.find(in.name)->second;
      auto& buffer = buffers_[static_cast<std::size_t>(in.value)];
      buffer = to_buffer<T>(t);
      // An input read in place shares the caller's owner (none for a view): nothing of ours to count.
      if (buffer.owner != t.owner()) hold(in.value, type_bytes(graph.type(in.value)));
    }
    // Remaining reads of each value; the read that brings it to zero releases the buffer. A graph
    // output gets one read that never comes, so it is never released.
    for (const Node& node : graph.nodes())
      for (ValueId v : node.inputs) readers_[static_cast<std::size_t>(v)].fetch_add(1, std::memory_order_relaxed);
    for (const auto& out : graph.outputs())
      readers_[static_cast<std::size_t>(out.value)].fetch_add(1, std::memory_order_relaxed);
  }

  // Runs node n: allocates its output, calls its kernel, reports it, checks coverage. Throws the
  // kernel's RuntimeError with the node named. Safe to call for different nodes at once once their
  // inputs are done: it writes only node n's output buffer.
  void run_node(std::size_t n) {
    const Node& node = graph_.nodes()[n];
    const auto where = [&] {
      return " (node %" + std::to_string(n) + " " + std::string(op_name(node.op)) + ", created at " +
             node.loc.to_string() + ")";
    };
    const auto slot = static_cast<std::size_t>(node.op);
    const auto kernel = slot < kOpIdSpace ? table_[slot] : nullptr;
    if (!kernel) throw RuntimeError("the interpreter has no kernel for op '" + std::string(op_name(node.op)) + "'");
    std::vector<const interp::Buffer<T>*> in_buffers;
    std::vector<const TensorType*> in_types;
    in_buffers.reserve(node.inputs.size());
    in_types.reserve(node.inputs.size());
    for (ValueId v : node.inputs) {
      in_buffers.push_back(&buffers_[static_cast<std::size_t>(v)]);
      in_types.push_back(&graph_.type(v));
    }
    const TensorType& out_type = graph_.type(node.output);
    auto& out = buffers_[static_cast<std::size_t>(node.output)];
    const auto out_size = static_cast<std::size_t>(out_type.size());
    if (is_float(out_type.dtype)) {
      auto [owner, real] = allocate<T>(out_size);
      if (options_.check_coverage) std::ranges::fill(real, std::numeric_limits<T>::quiet_NaN());
      out = {std::move(owner), real, {}};
    } else {
      // Integer kernels are not trusted to skip reading what they write: zeroed, or the sentinel.
      auto [owner, ints] = allocate<std::int32_t>(out_size);
      std::ranges::fill(ints, options_.check_coverage ? kIntSentinel : 0);
      out = {std::move(owner), {}, ints};
    }
    hold(node.output, type_bytes(out_type));
    const auto started = std::chrono::steady_clock::now();
    try {
      kernel(interp::KernelCall<T>{node, in_buffers, in_types, out_type, out});
    } catch (const RuntimeError& e) {
      throw RuntimeError(std::string(e.what()) + where());
    }
    if (options_.on_node_done) {
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
      const std::scoped_lock lock(report_mutex_);
      options_.on_node_done(n, seconds);
    }
    if (options_.check_coverage && !fully_written(out, out_type)) {
      throw RuntimeError("kernel left elements of its " + out_type.to_string() + " output unwritten" + where());
    }
    // A 16-bit value is rounded when it is stored: kernels compute in T, and here the result becomes
    // a value of its dtype (the oracle's semantics, docs/dtypes.md).
    if (is_low_precision(out_type.dtype)) {
      for (T& v : out.real) v = round_to_dtype(v, out_type.dtype);
    }
  }

  // Node n is done reading its inputs: releases each one it was the last reader of. acq_rel: the
  // releasing thread sees every other reader's reads finished.
  void release_inputs(std::size_t n) {
    if (options_.keep_all_values) return;
    for (ValueId v : graph_.nodes()[n].inputs) {
      const auto i = static_cast<std::size_t>(v);
      if (readers_[i].fetch_sub(1, std::memory_order_acq_rel) == 1) {
        buffers_[i] = {};
        live_bytes_.fetch_sub(held_bytes_[i], std::memory_order_relaxed);
      }
    }
  }

  InterpResult finish() {
    InterpResult result;
    for (const auto& out : graph_.outputs()) {
      result.outputs.emplace(out.name, to_host(graph_.type(out.value), buffers_[static_cast<std::size_t>(out.value)]));
    }
    if (options_.keep_all_values) {
      const auto& values = graph_.values();
      result.values.reserve(values.size());
      for (std::size_t v = 0; v < values.size(); ++v) result.values.push_back(to_host(values[v].type, buffers_[v]));
    }
    result.peak_buffer_bytes = peak_bytes_.load();
    return result;
  }

 private:
  static std::size_t type_bytes(const TensorType& type) {
    return static_cast<std::size_t>(type.size()) * (is_float(type.dtype) ? sizeof(T) : sizeof(std::int32_t));
  }

  void hold(ValueId v, std::size_t bytes) {
    held_bytes_[static_cast<std::size_t>(v)] = bytes;
    const std::size_t live = live_bytes_.fetch_add(bytes, std::memory_order_relaxed) + bytes;
    std::size_t peak = peak_bytes_.load(std::memory_order_relaxed);
    while (live > peak && !peak_bytes_.compare_exchange_weak(peak, live, std::memory_order_relaxed)) {
    }
  }

  const Graph& graph_;
  const InterpOptions& options_;
  const interp::KernelTable<T>& table_;
  std::vector<interp::Buffer<T>> buffers_;  // by ValueId; each written by its producer alone
  std::vector<std::size_t> held_bytes_;     // by ValueId: bytes counted in live_bytes_ while held
  std::vector<std::atomic<std::int32_t>> readers_;
  std::atomic<std::size_t> live_bytes_{0};
  std::atomic<std::size_t> peak_bytes_{0};
  std::mutex report_mutex_;  // on_node_done calls never overlap
};

template <class T>
InterpResult run_sequential(const Graph& graph, const TensorMap& inputs, const InterpOptions& options) {
  Execution<T> execution(graph, inputs, options);
  for (std::size_t n = 0; n < graph.nodes().size(); ++n) {
    execution.run_node(n);
    execution.release_inputs(n);
  }
  return execution.finish();
}

// The parallel schedule: tbb::task_group tasks and an atomic count per node of its producers still
// running. Chosen over tbb::flow::graph because it builds nothing per node but two counts and a
// successor list (a flow graph needs a node object with its body and edges per graph node, every
// call), and the task that finishes a node runs one of the nodes it made ready itself, so a chain
// stays on one thread with its data in cache and is walked depth first (its buffers are released
// as early as in program order), while the other ready nodes go to the task group for idle
// threads to steal. tbb::parallel_pipeline fits a line of stages, not a DAG.
//
// Errors: a failing node's error is kept when its index is the lowest failed so far; nodes after
// that index are skipped (they can no longer be the one reported), nodes before it still run. So
// the error reported is that of the lowest-index node that fails, which is the node a sequential
// run stops at: every node before it succeeds under both schedules, since kernels are deterministic.
template <class T>
InterpResult run_parallel(const Graph& graph, const TensorMap& inputs, const InterpOptions& options) {
  Execution<T> execution(graph, inputs, options);
  const auto& nodes = graph.nodes();
  const std::size_t count = nodes.size();

  // The dependency DAG: per node, its successors (once per input read, duplicates included) and
  // the number of those reads still waiting for their producer.
  std::vector<std::vector<NodeId>> successors(count);
  std::vector<std::atomic<std::int32_t>> waiting(count);
  for (std::size_t n = 0; n < count; ++n) {
    for (ValueId v : nodes[n].inputs) {
      const NodeId producer = graph.value(v).producer;
      if (producer == kNoNode) continue;
      successors[static_cast<std::size_t>(producer)].push_back(static_cast<NodeId>(n));
      waiting[n].fetch_add(1, std::memory_order_relaxed);
    }
  }

  constexpr std::size_t kNone = std::numeric_limits<std::size_t>::max();
  std::atomic<std::size_t> first_failed{kNone};
  std::exception_ptr first_error;
  std::mutex error_mutex;
  tbb::task_group group;

  // Runs node n, then one successor it made ready, and so on; spawns the other ready successors.
  std::function<void(std::size_t)> execute = [&](std::size_t n) {
    while (n != kNone) {
      if (n > first_failed.load(std::memory_order_acquire)) return;  // cannot be the error reported
      try {
        execution.run_node(n);
      } catch (...) {
        const std::scoped_lock lock(error_mutex);
        if (n < first_failed.load(std::memory_order_relaxed)) {
          first_error = std::current_exception();
          first_failed.store(n, std::memory_order_release);
        }
        return;
      }
      execution.release_inputs(n);
      std::size_t next = kNone;
      for (NodeId s : successors[n]) {
        const auto successor = static_cast<std::size_t>(s);
        if (waiting[successor].fetch_sub(1, std::memory_order_acq_rel) != 1) continue;
        if (next == kNone) {
          next = successor;
        } else {
          group.run([&execute, successor] { execute(successor); });
        }
      }
      n = next;
    }
  };
  // The roots are listed before any is spawned: once tasks run, a count reaching zero means a node
  // its producer's task has already taken.
  std::vector<std::size_t> roots;
  for (std::size_t n = 0; n < count; ++n) {
    if (waiting[n].load(std::memory_order_relaxed) == 0) roots.push_back(n);
  }
  for (std::size_t n : roots) group.run([&execute, n] { execute(n); });
  group.wait();
  if (first_error) std::rethrow_exception(first_error);
  return execution.finish();
}

template <class T>
InterpResult run(const Graph& graph, const TensorMap& inputs, const InterpOptions& options) {
  // With one thread there is nothing to overlap: the sequential loop gives the same results and
  // error without the per-node task bookkeeping (about 1 us a node on the 2-core VM).
  const std::size_t threads = std::min(static_cast<std::size_t>(tbb::this_task_arena::max_concurrency()),
                                       tbb::global_control::active_value(tbb::global_control::max_allowed_parallelism));
  if (options.schedule == InterpSchedule::parallel && threads > 1) return run_parallel<T>(graph, inputs, options);
  return run_sequential<T>(graph, inputs, options);
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
