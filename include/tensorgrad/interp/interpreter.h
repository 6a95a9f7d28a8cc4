#pragma once
// The reference interpreter: runs any graph on the host with TBB-parallel kernels. ComputeType::f64
// is the oracle (every float computed in double whatever the graph says); ComputeType::f32 is a real
// CPU backend. Results do not depend on the number of threads.
#include <functional>
#include <vector>

#include "tensorgrad/interp/host_tensor.h"
#include "tensorgrad/ir/graph.h"

namespace tg {

enum class ComputeType : std::uint8_t { f32, f64 };

struct InterpOptions {
  ComputeType compute = ComputeType::f64;
  bool keep_all_values = false;  // fill InterpResult::values (one per graph value) for debugging
  // Pre-fill every output buffer with a sentinel (NaN, or INT32_MIN for i32/bool) and fail with a
  // RuntimeError when a kernel leaves any element unwritten: the kernel then produced fewer elements
  // than the op's shape rule promised. Used by the property tests on finite inputs: a kernel that
  // legitimately computes NaN would be reported as well.
  bool check_coverage = false;
  // Called after each node with its index in graph.nodes() and the seconds its kernel took (wall
  // clock, the kernel alone); `tg bench` builds its per-node table from it.
  std::function<void(std::size_t node, double seconds)> on_node_done;
};

struct InterpResult {
  TensorMap outputs;
  std::vector<HostTensor> values;  // indexed by ValueId when keep_all_values
};

// Throws RuntimeError naming the input when one is missing, unknown, or of the wrong type.
InterpResult interpret(const Graph& graph, const TensorMap& inputs, const InterpOptions& options = {});

// Whether the interpreter has a kernel for an op (in both compute types); the completeness test
// walks the registry with it.
bool interp_has_kernel(OpId op);

}  // namespace tg
