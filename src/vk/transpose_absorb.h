#pragma once
// Internal: transposes absorbed into matmul. A matmul operand produced by a transpose of the last
// two axes (swap_axes of axes rank-2 and rank-1, or a permute that swaps only those two) is read
// from the transpose's input by the matmul shader's transposed-operand variant (a specialization
// constant), and the transpose's launch gets items = 0 (no dispatch) when nothing else needs its
// output. docs/vulkan-fusion.md ("Absorbed transposes") gives the rules.
#include <cstddef>
#include <utility>
#include <vector>

#include "tensorgrad/ir/graph.h"
#include "vk/kernels/kernels.h"

namespace tg::vk {

struct AbsorbedTransposes {
  // (output, input) of every transpose whose dispatch was dropped: the output is never written,
  // and the matmuls that read it now read the input (directly or through further dropped
  // transposes), which their launches list in extra_reads. Outputs are never graph outputs.
  std::vector<std::pair<ValueId, ValueId>> dropped;
};

// `launches` holds one launch per node (after elementwise fusion, which never touches matmul or
// layout launches). A transpose is dropped only when its output is not a graph output and every
// node reading it is a matmul that can read the transposed layout there, or another dropped
// transpose; each such matmul's launch is re-planned to read the chain's first value that is not
// a dropped transpose's output (an even number of transposes cancels out). Bit-identical results.
AbsorbedTransposes absorb_transposes(const Graph& graph, std::vector<KernelLaunch>& launches);

}  // namespace tg::vk
