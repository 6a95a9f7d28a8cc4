// Launches of the precision family: cast (shaders/cast.comp). The only kernel that reads or writes
// f16 and bf16 buffers (2 bytes per element): the executor lowers every other op on 16-bit values
// to f32 between casts (vk/low_precision_lowering.h). The source and result dtypes are
// specialization constants, so each pair compiles to its own straight-line conversion.
#include "tensorgrad/ir/ops/ids/precision.h"

#include <cstdint>

#include "vk/kernels/kernels.h"

namespace tg::vk {

namespace {

// The shader's dtype codes (cast.comp's F32 .. BF16).
std::uint32_t cast_dtype_code(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return 0;
    case DType::i32:
      return 1;
    case DType::boolean:
      return 2;
    case DType::f16:
      return 3;
    case DType::bf16:
      return 4;
  }
  return 0;
}

// By source: a float's 32-bit word, a 16-bit pattern widened exactly first, or an integer (i32,
// bool) rounded once, directly to the result's precision.
const LaunchPath kFromF32{"vulkan", "cast", "from_f32"};
const LaunchPath kFrom16Bit{"vulkan", "cast", "from_16bit"};
const LaunchPath kFromInts{"vulkan", "cast", "from_ints"};

KernelLaunch cast(const Graph& graph, const Node& node) {
  const DType from = graph.type(node.inputs[0]).dtype;
  const TensorType& out = graph.type(node.output);
  const auto n = static_cast<std::uint32_t>(out.size());
  KernelLaunch launch;
  launch.shader = "cast";
  launch.bindings = {node.inputs[0], node.output};
  append_pod(launch.push, n);
  launch.items = n;
  launch.specialization = {cast_dtype_code(from), cast_dtype_code(out.dtype)};
  launch.loop_passes = simple_kernel_passes(launch.items, launch.group_size);
  launch.paths = {is_low_precision(from) ? &kFrom16Bit : is_float(from) ? &kFromF32 : &kFromInts};
  return launch;
}

}  // namespace

void register_precision_kernels(KernelPlanTable& table) { table[static_cast<std::size_t>(op::Cast)] = cast; }

}  // namespace tg::vk
