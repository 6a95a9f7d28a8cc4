// Launches of the broadcasting elementwise family (shaders/elementwise_binary.comp): per-input
// strides over the output's axes (0 along broadcast axes), after merging axes every input walks
// contiguously and dropping axes of extent 1, so most broadcasts need 1-3 axes. When every input
// has the output's shape the shader takes its contiguous fast path: uvec4 words, one per
// invocation, no index arithmetic. Every TG_EW op of the family in ops.def is registered from the
// generated op codes (vk/ew_codes.h), so adding such an op needs no edit here.
#include <algorithm>
#include <string>

#include "tensorgrad/ir/error.h"
#include "tensorgrad/vk/error.h"
#include "vk/kernels/ew_own_kernels.h"

namespace tg::vk {

namespace {

constexpr std::size_t kMaxRank = 6;
constexpr std::uint32_t kFlagContiguous = 8;  // FLAG_CONTIGUOUS in the shader

struct BinaryPush {
  std::uint32_t op = 0;
  std::uint32_t n = 0;
  std::uint32_t rank = 0;
  std::uint32_t flags = 0;
  std::uint32_t shape[kMaxRank] = {};
  std::uint32_t strides[3][kMaxRank] = {};
};
static_assert(sizeof(BinaryPush) == 112);

const EwOwnKernels kBinaryOps(EwFamily::binary);

// Then the shader's form: every operand at the output index (vec4 words) or broadcast strides.
const LaunchPath kContiguous{"vulkan", "elementwise_binary", "contiguous"};
const LaunchPath kBroadcast{"vulkan", "elementwise_binary", "broadcast"};
// The contiguous form covers vec4 words and a tail of n % 4 elements (the fused kernel too).
const SizeThreshold kVec4Threshold{"vulkan", "elementwise", "vec4_width", 4};

KernelLaunch plan(const Graph& graph, const Node& node) {
  const EwOwnKernel& op = kBinaryOps[node.op];
  const Shape& out = graph.type(node.output).shape;
  const std::size_t rank = out.size();
  const std::size_t k = node.inputs.size();

  // Per input, its element stride along each output axis.
  std::vector<std::int64_t> extents(out.begin(), out.end());
  std::vector<std::vector<std::int64_t>> strides(k, std::vector<std::int64_t>(rank, 0));
  BinaryPush push;
  push.op = op.code;
  push.n = static_cast<std::uint32_t>(num_elements(out));
  for (std::size_t j = 0; j < 3; ++j) {
    if (j >= k) {
      push.flags |= 1u << j;  // unused operand: read at the output index of binding 0's range
      continue;
    }
    const Shape& in = graph.type(node.inputs[j]).shape;
    if (in == out) push.flags |= 1u << j;
    const std::vector<std::int64_t> own = row_major_strides(in);
    const std::size_t lead = rank - in.size();
    for (std::size_t d = 0; d < in.size(); ++d) strides[j][lead + d] = in[d] == 1 ? 0 : own[d];
  }
  // Drop extent-1 axes, then merge axis d into d+1 where every input continues contiguously.
  std::vector<std::int64_t> e2;
  std::vector<std::vector<std::int64_t>> s2(k);
  for (std::size_t d = 0; d < rank; ++d) {
    if (extents[d] == 1) continue;
    const bool mergeable = !e2.empty() && [&] {
      for (std::size_t j = 0; j < k; ++j)
        if (s2[j].back() != strides[j][d] * extents[d]) return false;
      return true;
    }();
    if (mergeable) {
      e2.back() *= extents[d];
      for (std::size_t j = 0; j < k; ++j) s2[j].back() = strides[j][d];
    } else {
      e2.push_back(extents[d]);
      for (std::size_t j = 0; j < k; ++j) s2[j].push_back(strides[j][d]);
    }
  }
  if (e2.size() > kMaxRank) {
    throw CompileError("Vulkan kernel for '" + std::string(op_name(node.op)) + "': output " +
                       graph.type(node.output).to_string() + " broadcasts over " + std::to_string(e2.size()) +
                       " axes after merging, above the " + std::to_string(kMaxRank) + " the shader supports");
  }
  push.rank = static_cast<std::uint32_t>(e2.size());
  for (std::size_t d = 0; d < e2.size(); ++d) {
    push.shape[d] = static_cast<std::uint32_t>(e2[d]);
    for (std::size_t j = 0; j < k; ++j) push.strides[j][d] = static_cast<std::uint32_t>(s2[j][d]);
  }

  KernelLaunch launch;
  launch.shader = "elementwise_binary";
  const bool contiguous = (push.flags & 7u) == 7u;  // every operand at the output index
  if (contiguous) push.flags |= kFlagContiguous;
  launch.bindings.assign(node.inputs.begin(), node.inputs.end());
  while (launch.bindings.size() < 3) launch.bindings.push_back(node.inputs[0]);  // unused operand slot
  launch.bindings.push_back(node.output);
  append_pod(launch.push, push);
  // Fast path: one invocation per vec4, and at least one per trailing word (n % 4 of them).
  launch.items = contiguous ? std::max<std::uint64_t>(push.n / 4, push.n % 4) : push.n;
  launch.loop_passes = simple_kernel_passes(launch.items, launch.group_size);
  launch.paths = {op.path, contiguous ? &kContiguous : &kBroadcast};
  return launch;
}

}  // namespace

void register_elementwise_binary_kernels(KernelPlanTable& table) {
  for (const OpId op : kBinaryOps.ops()) {
    // The binary shaders have no params: refuse, when the table is built, an op that would need them.
    if (ew_param_count(op) != 0) {
      throw Error("Vulkan elementwise kernels: op '" + std::string(op_name(op)) +
                  "' of elementwise_binary has attributes; the binary shaders take none (only "
                  "elementwise_unary ops pass real attributes, as p0 and p1)");
    }
    table[static_cast<std::size_t>(op)] = plan;
  }
}

}  // namespace tg::vk
