// Launches of the image family on NCHW tensors: conv2d, conv2d_input_grad and conv2d_weight_grad
// (shaders/conv2d.comp, the op chosen by a push constant), max_pool2d (shaders/max_pool2d.comp)
// and max_pool2d_grad (shaders/max_pool2d_grad.comp). Every output element is summed (or picked)
// by one invocation in the interpreter's order, or, when its sum or its windows are long, by one
// 256-invocation workgroup with a fixed-shape shared-memory tree: deterministic either way. A
// convolution sum too long for one workgroup (row_chunks(): a weight gradient over a large image)
// is split into chunks across workgroups, their sums added in chunk order by a second dispatch.
// Every launch declares its loop passes (kernels.h); pooling gradients with windows above 53x53 at
// stride 1 (each input element re-finds the argmax of up to k*k windows of k*k taps) declare more
// than lavapipe's 65535, and check_loop_limit refuses them there by name.
#include "tensorgrad/ir/ops/ids/image.h"

#include <algorithm>
#include <initializer_list>
#include <limits>
#include <string>
#include <string_view>

#include "tensorgrad/ir/error.h"
#include "tensorgrad/vk/error.h"
#include "vk/kernels/kernels.h"

namespace tg::vk {

namespace {

constexpr std::uint32_t kGroupSize = 256;
// conv2d / conv2d_input_grad: terms per output element (C*kh*kw, O*kh*kw) at most this many run
// one invocation per output element, in the interpreter's order (direct convolution).
constexpr std::int64_t kSerialConvTerms = 4096;
// conv2d_weight_grad sums N*OH*OW terms for few outputs (the weight), so a workgroup per weight
// element pays off much sooner.
constexpr std::int64_t kSerialWeightGradTerms = 256;
// Pooling: compares per output (window taps) or per input element (covering windows x taps).
constexpr std::int64_t kSerialPoolCompares = 4096;
constexpr std::int64_t kIntMax = std::numeric_limits<std::int32_t>::max();

const SizeThreshold kSerialConvThreshold{"vulkan", "conv2d", "serial_max_terms", kSerialConvTerms};
const SizeThreshold kSerialWeightGradThreshold{"vulkan", "conv2d_weight_grad", "serial_max_terms",
                                               kSerialWeightGradTerms};
const SizeThreshold kSerialPoolThreshold{"vulkan", "max_pool2d", "serial_max_compares", kSerialPoolCompares};

// Per convolution op: one invocation per output (mode 1), a workgroup per output (mode 0), chunks
// across workgroups (mode 2) and their ordered sum.
struct ConvPaths {
  explicit ConvPaths(std::string_view op)
      : serial("vulkan", op, "serial"),
        workgroup("vulkan", op, "workgroup_per_output"),
        chunks("vulkan", op, "chunks"),
        chunk_sum("vulkan", op, "chunk_sum") {}
  LaunchPath serial, workgroup, chunks, chunk_sum;
};
const ConvPaths kConvPaths[] = {ConvPaths("conv2d"), ConvPaths("conv2d_input_grad"),
                                ConvPaths("conv2d_weight_grad")};  // by ConvOp
// Pooling: one invocation per output (mode 1) or a workgroup per output (mode 0).
const LaunchPath kPoolSerial{"vulkan", "max_pool2d", "serial"};
const LaunchPath kPoolWorkgroup{"vulkan", "max_pool2d", "workgroup_per_output"};
const LaunchPath kPoolGradSerial{"vulkan", "max_pool2d_grad", "serial"};
const LaunchPath kPoolGradWorkgroup{"vulkan", "max_pool2d_grad", "workgroup_per_output"};

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

// ---- conv2d, conv2d_input_grad, conv2d_weight_grad ----

enum ConvOp : std::uint32_t { conv, input_grad, weight_grad };

struct ConvPush {
  std::uint32_t op = 0;
  std::uint32_t mode = 0;
  std::uint32_t rows = 0;
  std::uint32_t len = 0;
  std::int32_t n = 0, c = 0, h = 0, w = 0;
  std::int32_t o = 0, oh = 0, ow = 0;
  std::int32_t kh = 0, kw = 0;
  std::int32_t stride = 0, padding = 0;
  std::uint32_t span = 0;  // mode 2: terms per chunk
};
static_assert(sizeof(ConvPush) == 64);

// Image [N,C,H,W], weight [O,C,KH,KW] and output grid [N,O,OH,OW] of the convolution behind each op.
struct ConvGeometry {
  std::int64_t n, c, h, w, o, oh, ow, kh, kw, stride, padding;
};

ConvGeometry conv_geometry(const Graph& graph, const Node& node, ConvOp op) {
  const Shape& a = graph.type(node.inputs[0]).shape;
  const Shape& b = graph.type(node.inputs[1]).shape;
  const Shape& out = graph.type(node.output).shape;
  const std::int64_t s = node.attrs.integer("stride");
  const std::int64_t p = node.attrs.integer("padding");
  if (op == conv) {  // x [N,C,H,W], w [O,C,KH,KW] -> y [N,O,OH,OW]
    return {a[0], a[1], a[2], a[3], b[0], out[2], out[3], b[2], b[3], s, p};
  }
  if (op == input_grad) {  // g [N,O,OH,OW], w [O,C,KH,KW] -> dx [N,C,H,W]
    return {a[0], b[1], out[2], out[3], a[1], a[2], a[3], b[2], b[3], s, p};
  }
  return {a[0], a[1], a[2], a[3], b[1], b[2], b[3], out[2], out[3], s, p};  // x, g -> dw [O,C,KH,KW]
}

KernelLaunch plan_conv(const Graph& graph, const Node& node, ConvOp op) {
  const ConvGeometry g = conv_geometry(graph, node, op);
  require_int_indexing(
      graph, node,
      {g.n, g.c, g.h, g.w, g.o, g.oh, g.ow, g.kh, g.kw, g.stride, g.padding, g.h + 2 * g.padding, g.w + 2 * g.padding});
  const std::int64_t rows = graph.type(node.output).size();
  // With a non-empty output every term count is at most an operand's size, so it fits the int
  // range checked above (an empty output launches nothing).
  const std::int64_t len = op == conv ? g.c * g.kh * g.kw : op == input_grad ? g.o * g.kh * g.kw : g.n * g.oh * g.ow;
  const bool serial = len <= (op == weight_grad ? launch_thresholds().serial_weight_grad_max_terms
                                                : launch_thresholds().serial_conv_max_terms);
  // Long sums split into chunks across workgroups (mode 2) as reductions do (row_chunks()).
  const std::uint64_t parts = serial || rows == 0 ? 1 : row_chunks(len, rows);
  if (static_cast<std::uint64_t>(rows) * parts > 0xffffffffull) {
    refuse(graph, node, "more than 2^32-1 (output, chunk) pairs for the shader's 32-bit indexing");
  }

  ConvPush push;
  push.op = op;
  push.mode = serial ? 1u : parts > 1 ? 2u : 0u;
  push.span = static_cast<std::uint32_t>(parts > 1 ? kChunkLength : len);
  push.rows = static_cast<std::uint32_t>(rows);
  push.len = static_cast<std::uint32_t>(len);
  const auto i32 = [](std::int64_t v) { return static_cast<std::int32_t>(v); };
  push.n = i32(g.n);
  push.c = i32(g.c);
  push.h = i32(g.h);
  push.w = i32(g.w);
  push.o = i32(g.o);
  push.oh = i32(g.oh);
  push.ow = i32(g.ow);
  push.kh = i32(g.kh);
  push.kw = i32(g.kw);
  push.stride = i32(g.stride);
  push.padding = i32(g.padding);

  KernelLaunch launch;
  launch.shader = "conv2d";
  launch.bindings = {node.inputs[0], node.inputs[1], node.output};
  launch.group_size = kGroupSize;
  // An empty output launches nothing; an empty operand (C or N of 0) gives zeros and is never read.
  launch.items = static_cast<std::uint64_t>(rows) * parts * (serial ? 1u : kGroupSize);
  // Serial: the interpreter's three nested loops over in-range taps (or whole output rows for
  // the weight gradient); workgroups: a term loop of span / 256 and the tree. The mode and the
  // serial functions of the other ops run their loops once, masked.
  const auto u = [](std::int64_t v) { return static_cast<std::uint64_t>(std::max<std::int64_t>(v, 0)); };
  const std::uint64_t serial_passes =
      op == conv ? loop_passes(u(g.c), loop_passes(u(std::min(g.kh, g.h)), loop_passes(u(std::min(g.kw, g.w))), 1), 2)
      : op == input_grad
          ? loop_passes(
                u(g.o),
                loop_passes(u(ceil_div(u(g.kh), u(g.stride))), loop_passes(u(ceil_div(u(g.kw), u(g.stride)))), 1), 2)
          : loop_passes(u(g.n), loop_passes(u(g.oh), loop_passes(u(g.ow)), 1), 2);
  const std::uint64_t body = serial ? serial_passes : loop_passes(ceil_div(push.span, kGroupSize)) + loop_passes(8);
  launch.loop_passes = loop_passes(grid_iterations(launch.items, kGroupSize), body, serial ? 3 : 2) + 16;
  const ConvPaths& paths = kConvPaths[op];
  launch.paths = {serial ? &paths.serial : parts > 1 ? &paths.chunks : &paths.workgroup};
  append_pod(launch.push, push);
  if (parts > 1) {
    launch.bindings.back() = kScratch;
    launch.scratch_bytes = 4 * static_cast<std::uint64_t>(rows) * parts;
    launch.label = std::string(op_name(node.op)) + " (chunks)";
    launch.then.push_back(ordered_sum_of_partials(node.output, static_cast<std::uint64_t>(rows), parts,
                                                  std::string(op_name(node.op)) + " (chunk sum)", paths.chunk_sum));
  }
  return launch;
}

template <ConvOp Op>
KernelLaunch plan_conv_op(const Graph& graph, const Node& node) {
  return plan_conv(graph, node, Op);
}

// ---- max_pool2d, max_pool2d_grad ----

struct PoolPush {
  std::uint32_t mode = 0;
  std::uint32_t rows = 0;
  std::int32_t h = 0, w = 0;
  std::int32_t oh = 0, ow = 0;
  std::int32_t kernel = 0, stride = 0, padding = 0;
  std::int32_t unused = 0;
};
static_assert(sizeof(PoolPush) == 40);

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
  const std::int64_t rows = graph.type(node.output).size();

  PoolPush push;
  push.mode = serial ? 1u : 0u;
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
  launch.items = static_cast<std::uint64_t>(rows) * (serial ? 1u : kGroupSize);
  // A window: two nested tap loops (serial), or a loop of taps / 256 and the tree (workgroup);
  // the gradient re-finds it for each covering window. Not split: only windows above 53x53 at
  // stride 1 for the gradient (or above 16 million taps for the forward) reach llvmpipe's limit,
  // and check_loop_limit refuses those by name.
  const auto u = [](std::int64_t v) { return static_cast<std::uint64_t>(std::max<std::int64_t>(v, 0)); };
  const std::uint64_t window = serial ? loop_passes(u(std::min(k, x[2])), loop_passes(u(std::min(k, x[3]))), 1)
                                      : loop_passes(ceil_div(u(taps), kGroupSize)) + loop_passes(8);
  const std::uint64_t per_row =
      grad ? loop_passes(u(std::min(per_axis, oh)), loop_passes(u(std::min(per_axis, ow)), window, 2), 3) : window;
  launch.loop_passes = loop_passes(grid_iterations(launch.items, kGroupSize), per_row, grad ? 4 : 2) + 16;
  launch.paths = {grad ? (serial ? &kPoolGradSerial : &kPoolGradWorkgroup) : (serial ? &kPoolSerial : &kPoolWorkgroup)};
  append_pod(launch.push, push);
  return launch;
}

KernelLaunch plan_max_pool2d(const Graph& graph, const Node& node) { return plan_pool(graph, node, false); }
KernelLaunch plan_max_pool2d_grad(const Graph& graph, const Node& node) { return plan_pool(graph, node, true); }

constexpr std::size_t slot(OpId id) { return static_cast<std::size_t>(id); }

}  // namespace

void register_image_kernels(KernelPlanTable& table) {
  table[slot(op::Conv2d)] = plan_conv_op<conv>;
  table[slot(op::Conv2dInputGrad)] = plan_conv_op<input_grad>;
  table[slot(op::Conv2dWeightGrad)] = plan_conv_op<weight_grad>;
  table[slot(op::MaxPool2d)] = plan_max_pool2d;
  table[slot(op::MaxPool2dGrad)] = plan_max_pool2d_grad;
}

}  // namespace tg::vk
