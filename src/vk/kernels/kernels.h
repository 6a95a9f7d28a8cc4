#pragma once
// Internal: the Vulkan kernels, one file per op family (the same names as src/interp/kernels).
// A kernel turns one node into a launch: which embedded shader, which values it binds (inputs in
// order, then the output), its push constants and how many items the grid must cover. The
// executor owns buffers, pipelines, descriptor sets and barriers.
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tensorgrad/ir/graph.h"
#include "tensorgrad/ir/ops/op_def.h"

namespace tg::vk {

// An index check (embedding, one_hot, take_along_axis, scatter_add, nll_loss, cross_entropy): the
// executor binds ONE more storage buffer after the launch's own bindings, `uint first_bad[]` with one
// word, set to 0xFFFFFFFF before every run. The shader does atomicMin(first_bad[0], e) for every
// flat element e of `input` (an i32 value) outside [0, extent). After the run the executor reads
// the word back and, when it changed, reads that element and throws the interpreter's RuntimeError:
// "<op>: <what> <value> is out of range [0, <extent>) at element <e> (node %n <op>, created at ...)".
// atomicMin keeps the report deterministic (the first bad element, whatever the schedule).
struct IndexCheck {
  ValueId input = -1;
  std::int64_t extent = 0;
  std::string what = "index";  // "index", "target"
};

// A binding of this id names the node's scratch range (KernelLaunch::scratch_bytes), memory private
// to the node's dispatches: e.g. split-K matmul partials, written by the first dispatch and summed by
// the next. The plan gives it the lifetime of the node, so later nodes reuse it.
inline constexpr ValueId kScratch = -2;

struct KernelLaunch {
  std::string shader;             // shaders/<shader>.comp
  std::vector<ValueId> bindings;  // storage buffers 0..k-1: what the kernel reads, then what it writes
  std::size_t writes = 1;         // the last `writes` bindings are written
  std::vector<std::byte> push;    // push constants, a multiple of 4 bytes
  std::uint64_t items = 0;        // invocations needed (the shaders loop grid-stride over them)
  std::uint32_t group_size = 256;
  // Binds the extra status word described above. On a `then` launch it binds the node's word again
  // (same check, for a shader that declares the binding) without adding a check of its own.
  std::optional<IndexCheck> index_check;
  // Values of the shader's specialization constants 0..k-1 (32-bit each). Launches that differ here
  // get different pipelines, which the driver compiles with these values folded in.
  std::vector<std::uint32_t> specialization;
  std::string label;                // what timings() calls the dispatch; empty: the node's op
  std::uint64_t scratch_bytes = 0;  // the node's scratch range (bound as kScratch), on the first launch
  std::vector<KernelLaunch> then;   // more dispatches for the node, recorded in order after this one
  // Values read by this launch that the node itself does not list as inputs (a fused launch reads
  // its group's inputs): the plan keeps them alive until this node runs.
  std::vector<ValueId> extra_reads;
};

// The second dispatch of a split reduction (shaders/matmul_split_sum.comp): `output`[i] = the sum of
// the node's scratch [parts, n] over the parts in ascending order (split-K matmul partials,
// sum_to_shape's block partials). Defined in matmul.cpp.
KernelLaunch ordered_sum_of_partials(ValueId output, std::uint64_t n, std::uint64_t parts, std::string label);

// A matmul operand as a launch reads it: `value` holds the operand itself, or (transposed) the
// operand with its last two axes swapped: [..., K, M] for the lhs, [..., N, K] for the rhs.
struct MatmulOperand {
  ValueId value = -1;
  bool transposed = false;
};

// The launch of matmul `node` reading its operands from `lhs` and `rhs` (the plain launch reads
// node.inputs untransposed). Tiles, K splits and the accumulation order depend on the node's
// shapes only, so the result has the same bits either way. Defined in matmul.cpp; throws for a
// transposed lhs where matmul_can_read_transposed() is false.
KernelLaunch plan_matmul_reading(const Graph& graph, const Node& node, MatmulOperand lhs, MatmulOperand rhs);

// Whether operand 0 (lhs) or 1 (rhs) of matmul `node` may be read transposed: always the rhs; the
// lhs when it is 2-D or the product is batched (a 2-D rhs folds a higher-rank lhs's leading dims
// into M, which a transposed layout does not allow).
bool matmul_can_read_transposed(const Graph& graph, const Node& node, std::size_t operand);

// The launch followed by its `then` launches, in recording order.
std::vector<const KernelLaunch*> launch_steps(const KernelLaunch& launch);

// The row modes of shaders/reduce.comp, softmax.comp and softmax_causal.comp (their push constant
// `mode`; WG 256 and SEG 32 there): rows of at most 32 terms run one invocation each (1); rows of
// up to 1024 terms, at least 128 of them, a 32-invocation segment each, 8 per workgroup (2, "row
// segments": a workgroup per row would spend a whole workgroup's 8-level tree on 128 terms); the
// rest a workgroup each (0). Sets launch.items for `rows` rows (workgroups of 256) and labels a
// segmented launch "<op> (row segments)"; returns the mode. Defined in reduce.cpp.
std::uint32_t cover_rows(KernelLaunch& launch, std::string_view op, std::int64_t length, std::int64_t rows);

// The storage buffers a launch's dispatch binds: its own, and the status word of an index check.
inline std::size_t binding_count(const KernelLaunch& launch) {
  return launch.bindings.size() + (launch.index_check ? 1 : 0);
}

using KernelPlanFn = KernelLaunch (*)(const Graph& graph, const Node& node);
using KernelPlanTable = std::array<KernelPlanFn, kNumOps>;

void register_elementwise_binary_kernels(KernelPlanTable& table);
void register_elementwise_unary_kernels(KernelPlanTable& table);
void register_creation_kernels(KernelPlanTable& table);
void register_layout_kernels(KernelPlanTable& table);
void register_structure_kernels(KernelPlanTable& table);
void register_reduce_kernels(KernelPlanTable& table);
void register_softmax_kernels(KernelPlanTable& table);
void register_matmul_kernels(KernelPlanTable& table);
void register_indexing_kernels(KernelPlanTable& table);
void register_losses_kernels(KernelPlanTable& table);
void register_image_kernels(KernelPlanTable& table);
void register_random_kernels(KernelPlanTable& table);

const KernelPlanTable& kernel_plan_table();

template <class T>
void append_pod(std::vector<std::byte>& out, const T& value) {
  const auto* p = reinterpret_cast<const std::byte*>(&value);
  out.insert(out.end(), p, p + sizeof(T));
}

}  // namespace tg::vk
