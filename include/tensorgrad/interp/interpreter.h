#pragma once
// The reference interpreter: runs any graph on the host with TBB-parallel kernels. ComputeType::f64
// is the oracle (every float computed in double whatever the graph says); ComputeType::f32 is a real
// CPU backend. Results do not depend on the number of threads, nor on the schedule.
#include <cstddef>
#include <functional>
#include <vector>

#include "tensorgrad/interp/host_tensor.h"
#include "tensorgrad/ir/graph.h"

namespace tg {

enum class ComputeType : std::uint8_t { f32, f64 };

// How nodes are ordered. `sequential` runs them one after another in program order, each kernel
// parallel inside (TBB). `parallel` also runs independent nodes at the same time: a node starts as
// soon as the nodes producing its inputs are done, so a wide graph (many small branches or heads
// that one kernel cannot spread over the cores) keeps every core busy. Both give the same bits for
// any thread count: each kernel computes every element in a fixed order, whoever runs it and
// whatever runs beside it. The default stays sequential: on a graph that is one chain of large
// kernels the parallel schedule only adds a little bookkeeping, and `on_node_done` times overlap.
enum class InterpSchedule : std::uint8_t { sequential, parallel };

struct InterpOptions {
  ComputeType compute = ComputeType::f64;
  bool keep_all_values = false;  // fill InterpResult::values (one per graph value) for debugging
  // Pre-fill every output buffer with a sentinel (NaN, or INT32_MIN for i32/bool) and fail with a
  // RuntimeError when a kernel leaves any element unwritten: the kernel then produced fewer elements
  // than the op's shape rule promised. Used by the property tests on finite inputs: a kernel that
  // legitimately computes NaN would be reported as well.
  bool check_coverage = false;
  InterpSchedule schedule = InterpSchedule::sequential;
  // Called after each node with its index in graph.nodes() and the seconds its kernel took (wall
  // clock, the kernel alone); `tg bench` builds its per-node table from it. Sequential: on the
  // calling thread, in program order. Parallel: on whichever TBB thread ran the node, in completion
  // order, but never two calls at once (the interpreter serializes them), and the times of nodes
  // that ran side by side overlap, so they add up to more than the run's wall time. Once per node
  // that ran; when a node fails, nodes after it in program order may or may not have run
  // (parallel), or have not (sequential).
  std::function<void(std::size_t node, double seconds)> on_node_done;
};

struct InterpResult {
  TensorMap outputs;
  std::vector<HostTensor> values;  // indexed by ValueId when keep_all_values
  // The most bytes the interpreter's own buffers (node outputs, inputs converted to the compute
  // type) held at one time during the run: what releasing buffers after their last reader saves,
  // and what running branches side by side costs.
  std::size_t peak_buffer_bytes = 0;
};

// Throws RuntimeError naming the input when one is missing, unknown, or of the wrong type. A kernel's
// RuntimeError is rethrown naming the node; under either schedule the error reported is that of the
// first failing node in program order (the one a sequential run stops at).
InterpResult interpret(const Graph& graph, const TensorMap& inputs, const InterpOptions& options = {});

// Whether the interpreter has a kernel for an op (in both compute types); the completeness test
// walks the registry with it.
bool interp_has_kernel(OpId op);

}  // namespace tg
