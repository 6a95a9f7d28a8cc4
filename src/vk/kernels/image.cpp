// Launches of the image family on NCHW tensors: conv2d, conv2d_input_grad and conv2d_weight_grad
// as implicit GEMMs (conv_gemm.cpp, shaders/conv2d_gemm.comp), max_pool2d (shaders/max_pool2d.comp)
// and max_pool2d_grad (shaders/max_pool2d_grad.comp). Every pooled output element is picked by one
// invocation in the interpreter's order, or, when its windows are large, by one 256-invocation
// workgroup with a fixed-shape shared-memory tree: deterministic either way. The gradient of windows
// that do not overlap (stride >= kernel) runs one invocation per window, which finds the argmax once
// and writes the window's cell of the input plane. Every launch declares
// its loop passes (kernels.h); pooling gradients with windows above 53x53 at stride 1 (each input
// element re-finds the argmax of up to k*k windows of k*k taps) declare more than lavapipe's
// 65535, and check_loop_limit refuses them there by name.
#include "tensorgrad/ir/ops/ids/image.h"

#include <algorithm>
#include <initializer_list>
#include <limits>
#include <string>
#include <string_view>

#include "tensorgrad/ir/error.h"
#include "tensorgrad/vk/error.h"
#include "vk/kernels/conv_gemm.h"
#include "vk/kernels/kernels.h"

namespace tg::vk {

namespace {

constexpr std::uint32_t kGroupSize = 256;
// Pooling: compares per output (window taps) or per input element (covering windows x taps).
constexpr std::int64_t kSerialPoolCompares = 4096;
// The pooling gradient's cell mode: the most input elements one invocation's cell may hold. A cell
// of A elements costs at most about 3A loop passes to write (A rows of one column) and its window
// as many to search, so one grid pass stays near 25,000, well inside lavapipe's 65535 even past the
// executor's workgroup cap; larger cells take the gather modes.
constexpr std::int64_t kPoolCellMaxElements = 4096;
constexpr std::int64_t kIntMax = std::numeric_limits<std::int32_t>::max();

const SizeThreshold kSerialPoolThreshold{"vulkan", "max_pool2d", "serial_max_compares", kSerialPoolCompares};
const SizeThreshold kPoolCellThreshold{"vulkan", "max_pool2d_grad", "window_cells_max_elements", kPoolCellMaxElements};

// Pooling: one invocation per output (mode 1) or a workgroup per output (mode 0).
const LaunchPath kPoolSerial{"vulkan", "max_pool2d", "serial"};
const LaunchPath kPoolWorkgroup{"vulkan", "max_pool2d", "workgroup_per_output"};
const LaunchPath kPoolGradSerial{"vulkan", "max_pool2d_grad", "serial"};
const LaunchPath kPoolGradWorkgroup{"vulkan", "max_pool2d_grad", "workgroup_per_output"};
// One invocation per window writing its cell (mode 2).
const LaunchPath kPoolGradCells{"vulkan", "max_pool2d_grad", "window_cells"};

[[noreturn]] void refuse(const Graph& graph, const Node& node, const std::string& why) {
  std::string types;
  for (ValueId v : node.inputs) types += (types.empty() ? "" : ", ") + graph.type(v).to_string();
  throw LimitError("Vulkan kernel for '" + std::string(op_name(node.op)) + "' on (" + types + "): " + why);
}

// The shaders index with 32-bit ints: every tensor, and every coordinate the geometry can reach
// (padded extents included), must stay below 2^31.
void require_int_indexing(const Graph& graph, const Node& node, std::initializer_list<std::int64_t> extents) {
  for (ValueId v : node.inputs) {
    if (graph.type(v).size() > kIntMax) refuse(graph, node, "an operand exceeds the shader's 2^31-1 element indexing");
  }
  if (graph.type(node.output).size() > kIntMax) {
    refuse(graph, node, "the output exceeds the shader's 2^31-1 element indexing");
  }
  for (std::int64_t e : extents) {
    if (e > kIntMax) refuse(graph, node, "an extent, stride or padded extent exceeds the shader's int range");
  }
}

// ---- conv2d, conv2d_input_grad, conv2d_weight_grad: implicit GEMMs (conv_gemm.cpp) ----

template <ConvRole Role>
KernelLaunch plan_conv_op(const Graph& graph, const Node& node) {
  return plan_conv_gemm(graph, node, Role);
}

// ---- max_pool2d, max_pool2d_grad ----

struct PoolPush {
  std::uint32_t mode = 0;
  std::uint32_t rows = 0;
  std::int32_t h = 0, w = 0;
  std::int32_t oh = 0, ow = 0;
  std::int32_t kernel = 0, stride = 0, padding = 0;
  std::int32_t zero_bits = 0;  // the gradient shader's run-time +0.0 (max_pool2d_grad.comp); unused forward
};
static_assert(sizeof(PoolPush) == 40);

// The longest cell along one axis of `count` windows over [0, extent) (max_pool2d_grad.comp, mode
// 2): the first [0, s - p), the middle ones s, the last [(count - 1) * s - p, extent), which holds
// the rows after the last window when extent is not a multiple of the stride; one window owns all.
std::int64_t longest_cell(std::int64_t extent, std::int64_t count, std::int64_t s, std::int64_t p) {
  if (count <= 1) return extent;
  return std::max({s - p, count > 2 ? s : 0, extent - ((count - 1) * s - p)});
}

KernelLaunch plan_pool(const Graph& graph, const Node& node, bool grad) {
  const Shape& x = graph.type(node.inputs[0]).shape;
  const std::int64_t k = node.attrs.integer("kernel");
  const std::int64_t s = node.attrs.integer("stride");
  const std::int64_t p = node.attrs.integer("padding");
  const std::int64_t oh = (x[2] + 2 * p - k) / s + 1;
  const std::int64_t ow = (x[3] + 2 * p - k) / s + 1;
  require_int_indexing(graph, node, {x[2], x[3], oh, ow, k, s, p, x[2] + 2 * p, x[3] + 2 * p});

  // Taps of a window inside the image, and (for the gradient) windows covering one element.
  const std::int64_t taps = std::min(k, x[2]) * std::min(k, x[3]);
  const std::int64_t per_axis = (k + s - 1) / s;
  const std::int64_t windows = grad ? std::min(per_axis, oh) * std::min(per_axis, ow) : 1;
  // Checked factor by factor first, so the product cannot overflow.
  const bool serial = taps <= launch_thresholds().serial_pool_max_compares &&
                      windows <= launch_thresholds().serial_pool_max_compares &&
                      windows * taps <= launch_thresholds().serial_pool_max_compares;
  // The gradient of windows that do not overlap: one invocation per window writes its cell. Its
  // argmax is the serial walk, so it keeps the serial compare limit too (at full thresholds a cell
  // within kPoolCellMaxElements implies it; the test thresholds send such windows to the gather
  // modes). On every device: it finds each argmax once instead of once per tap (k*k times), reads
  // each input element once and gives the gather's bits, and CI's lavapipe then tests the path
  // GPUs run. The shape rule gives oh, ow >= 1; the check keeps the cells' math away from oh == 0.
  const std::int64_t cell_h = longest_cell(x[2], oh, s, p);
  const std::int64_t cell_w = longest_cell(x[3], ow, s, p);
  const bool cells = grad && s >= k && oh >= 1 && ow >= 1 && serial && cell_h <= kPoolCellMaxElements &&
                     cell_w <= kPoolCellMaxElements && cell_h * cell_w <= kPoolCellMaxElements;
  // The shader's grid: windows (cells), else output elements (the forward) or input elements.
  const std::int64_t rows = cells ? graph.type(node.inputs[1]).size() : graph.type(node.output).size();

  PoolPush push;
  push.mode = cells ? 2u : serial ? 1u : 0u;
  push.rows = static_cast<std::uint32_t>(rows);
  push.h = static_cast<std::int32_t>(x[2]);
  push.w = static_cast<std::int32_t>(x[3]);
  push.oh = static_cast<std::int32_t>(oh);
  push.ow = static_cast<std::int32_t>(ow);
  push.kernel = static_cast<std::int32_t>(k);
  push.stride = static_cast<std::int32_t>(s);
  push.padding = static_cast<std::int32_t>(p);

  KernelLaunch launch;
  launch.shader = grad ? "max_pool2d_grad" : "max_pool2d";
  launch.bindings = {node.inputs[0]};
  if (grad) launch.bindings.push_back(node.inputs[1]);
  launch.bindings.push_back(node.output);
  launch.group_size = kGroupSize;
  launch.items = static_cast<std::uint64_t>(rows) * (cells || serial ? 1u : kGroupSize);
  // A window: two nested tap loops (serial), or a loop of taps / 256 and the tree (workgroup);
  // the gather re-finds it for each covering window, the cell mode finds it once and then writes
  // the cell (two nested loops). Not split: only windows above 53x53 at stride 1 for the gradient
  // (or above 16 million taps for the forward) reach llvmpipe's limit, and check_loop_limit
  // refuses those by name. Each mode holds 5 loops (the grid, two window or cell loops, two in the
  // argmax); the two modes not taken make one pass each, 10 in all, within the 16 added.
  const auto u = [](std::int64_t v) { return static_cast<std::uint64_t>(std::max<std::int64_t>(v, 0)); };
  const std::uint64_t window = serial ? loop_passes(u(std::min(k, x[2])), loop_passes(u(std::min(k, x[3]))), 1)
                                      : loop_passes(ceil_div(u(taps), kGroupSize)) + loop_passes(8);
  const std::uint64_t per_row =
      cells  ? window + loop_passes(u(cell_h), loop_passes(u(cell_w)), 1)
      : grad ? loop_passes(u(std::min(per_axis, oh)), loop_passes(u(std::min(per_axis, ow)), window, 2), 3)
             : window;
  launch.loop_passes = loop_passes(grid_iterations(launch.items, kGroupSize), per_row, grad ? 4 : 2) + 16;
  launch.paths = {grad     ? (cells    ? &kPoolGradCells
                              : serial ? &kPoolGradSerial
                                       : &kPoolGradWorkgroup)
                  : serial ? &kPoolSerial
                           : &kPoolWorkgroup};
  append_pod(launch.push, push);
  return launch;
}

KernelLaunch plan_max_pool2d(const Graph& graph, const Node& node) { return plan_pool(graph, node, false); }
KernelLaunch plan_max_pool2d_grad(const Graph& graph, const Node& node) { return plan_pool(graph, node, true); }

constexpr std::size_t slot(OpId id) { return static_cast<std::size_t>(id); }

}  // namespace

void register_image_kernels(KernelPlanTable& table) {
  table[slot(op::Conv2d)] = plan_conv_op<ConvRole::forward>;
  table[slot(op::Conv2dInputGrad)] = plan_conv_op<ConvRole::input_grad>;
  table[slot(op::Conv2dWeightGrad)] = plan_conv_op<ConvRole::weight_grad>;
  table[slot(op::MaxPool2d)] = plan_max_pool2d;
  table[slot(op::MaxPool2dGrad)] = plan_max_pool2d_grad;
}

}  // namespace tg::vk
