// Launches of the losses family (shaders/losses.comp): nll_loss and cross_entropy over the last
// (class) axis. Rows are the positions (every axis but the last), so no reshape is needed.
// nll_loss and short cross-entropy rows get one invocation per row; long cross-entropy rows one
// 256-invocation workgroup each (max and sum of exp combined by fixed-shape trees). A "sum" or
// "mean" adds the row losses in ONE workgroup (per-invocation partials over rows l, l+256, ...,
// then a tree): deterministic, no atomics. Up to 256 rows that workgroup also computes the losses
// (one dispatch); above, a first dispatch computes them across the grid into the node's scratch
// and the second adds them in the same order (same bits; a [4096, 65] mean went from one
// workgroup doing all 4096 rows to 4096 workgroups). The one workgroup of the one-dispatch form
// computes every row, so it is kept for short rows only (kOneDispatchTermSlices), and past
// kChunkLength row losses the second step is a split sum (append_scratch_sum: chunk partials,
// then their combine), where one workgroup would loop positions / 256 times per invocation, past
// llvmpipe's loop limit (kernels.h) for 2^24 rows. The targets are checked through the executor's
// index check (IndexCheck, "target"), as the interpreter's RuntimeError.
#include "tensorgrad/ir/ops/ids/losses.h"

#include <string>
#include <string_view>
#include <vector>

#include "tensorgrad/ir/error.h"
#include "tensorgrad/vk/error.h"
#include "vk/kernels/kernels.h"

namespace tg::vk {

namespace {

constexpr std::uint32_t kGroupSize = 256;
// Up to this many classes a cross-entropy row is one invocation's work (as softmax.cpp).
constexpr std::int64_t kSerialClasses = 32;

enum : std::uint32_t { kNll = 0, kCrossEntropy = 1 };
enum : std::uint32_t { kSerial = 0, kGroup = 1, kPartials = 2 };
// Above this many rows a sum or mean computes the row losses across the grid first.
constexpr std::int64_t kOneDispatchRows = 256;
// ...and when its one workgroup's loops over all the rows' classes stay short: rows x
// ceil(classes / 256) at most this (group-mode rows of 256 classes cost one pass each).
constexpr std::uint64_t kOneDispatchTermSlices = 1024;
// Passes of the loops of losses.comp's branches a launch does not take (each runs once, masked).
constexpr std::uint64_t kMaskedPasses = 16;
enum : std::uint32_t { kNone = 0, kMean = 1, kSum = 2 };

const SizeThreshold kSerialClassesThreshold{"vulkan", "losses", "serial_max_classes", kSerialClasses};
const SizeThreshold kOneDispatchRowsThreshold{"vulkan", "losses", "one_dispatch_max_rows", kOneDispatchRows};
const SizeThreshold kOneDispatchSlicesThreshold{"vulkan", "losses", "one_dispatch_max_term_slices",
                                                static_cast<std::int64_t>(kOneDispatchTermSlices)};
const SizeThreshold kSliceThreshold{"vulkan", "losses", "workgroup_row_slice_classes", kGroupSize};

// Per op, the reduction's forms: row losses out (none), one workgroup doing it all, or row losses
// into scratch then their sum (one workgroup's partials_sum, or append_scratch_sum's split sum).
// cross_entropy's row computing dispatches also name their row mode.
struct LossPaths {
  explicit LossPaths(std::string_view op)
      : no_reduction("vulkan", op, "no_reduction"),
        one_dispatch("vulkan", op, "one_dispatch"),
        rows_to_scratch("vulkan", op, "rows_to_scratch"),
        partials_sum("vulkan", op, "partials_sum"),
        scratch_sum("vulkan", op, "scratch_sum") {}
  LaunchPath no_reduction, one_dispatch, rows_to_scratch, partials_sum, scratch_sum;
};
const LossPaths kLossPaths[] = {LossPaths("nll_loss"), LossPaths("cross_entropy")};  // by op code
const LaunchPath kSerialRows{"vulkan", "cross_entropy", "serial_rows"};
const LaunchPath kWorkgroupRows{"vulkan", "cross_entropy", "workgroup_rows"};

struct LossPush {
  std::uint32_t op = 0;
  std::uint32_t mode = 0;
  std::uint32_t reduction = 0;
  std::uint32_t positions = 0;
  std::uint32_t classes = 0;
};
static_assert(sizeof(LossPush) == 20);

std::uint32_t reduction_code(const Node& node) {
  const std::string& reduction = node.attrs.string("reduction");
  if (reduction == "none") return kNone;
  if (reduction == "mean") return kMean;
  if (reduction == "sum") return kSum;
  // The shape rule refuses anything else before a graph can reach the executor.
  throw CompileError("Vulkan kernel for '" + std::string(op_name(node.op)) + "': unknown reduction \"" + reduction +
                     "\"");
}

KernelLaunch plan_loss(const Graph& graph, const Node& node, std::uint32_t op) {
  const TensorType& scores = graph.type(node.inputs[0]);
  const std::int64_t classes = scores.shape.back();  // >= 1: checked by the shape rule
  const std::int64_t positions = graph.type(node.inputs[1]).size();
  if (scores.size() > 0xffffffffll) {
    throw LimitError("Vulkan kernel for '" + std::string(op_name(node.op)) + "' on " + scores.to_string() + " and " +
                     graph.type(node.inputs[1]).to_string() + ": more than 2^32-1 elements");
  }
  LossPush push;
  push.op = op;
  push.mode = (op == kNll || classes <= kSerialClasses) ? kSerial : kGroup;
  push.reduction = reduction_code(node);
  push.positions = static_cast<std::uint32_t>(positions);
  push.classes = static_cast<std::uint32_t>(classes);

  KernelLaunch launch;
  launch.shader = "losses";
  launch.bindings = {node.inputs[0], node.inputs[1], node.output};
  launch.group_size = kGroupSize;
  const auto rows = static_cast<std::uint64_t>(positions);
  const std::uint64_t row_items = push.mode == kSerial ? rows : rows * kGroupSize;
  launch.index_check = IndexCheck{node.inputs[1], classes, "target"};
  // Loop passes of one row's loss: serial cross-entropy loops twice over the classes (nll_loss's
  // loops run once, masked); a workgroup row loops twice over the classes past the first 256.
  const auto slices = ceil_div(static_cast<std::uint64_t>(classes), kGroupSize);
  const std::uint64_t row_passes = push.mode == kGroup   ? 2 * loop_passes(slices - 1)
                                   : op == kCrossEntropy ? 2 * loop_passes(static_cast<std::uint64_t>(classes))
                                                         : 2;
  const std::uint64_t row_loop = loop_passes(grid_iterations(row_items, kGroupSize), row_passes, 2) + kMaskedPasses;
  const bool one_dispatch =
      positions <= kOneDispatchRows && (push.mode == kSerial || rows * slices <= kOneDispatchTermSlices);
  const LossPaths& paths = kLossPaths[op];
  // The row mode, on the dispatches that compute row losses.
  const auto with_mode = [&](const LaunchPath& path) {
    std::vector<const LaunchPath*> out{&path};
    if (op == kCrossEntropy) out.push_back(push.mode == kSerial ? &kSerialRows : &kWorkgroupRows);
    return out;
  };
  if (push.reduction == kNone) {
    launch.items = row_items;
    launch.loop_passes = row_loop;
    launch.paths = with_mode(paths.no_reduction);
  } else if (one_dispatch) {
    // One workgroup, even for no rows: the scalar output (0 or NaN) must still be written.
    launch.items = kGroupSize;
    launch.paths = with_mode(paths.one_dispatch);
    launch.loop_passes = (push.mode == kSerial ? loop_passes(ceil_div(rows, kGroupSize), row_passes, 2)
                                               : loop_passes(rows, row_passes, 2)) +
                         kMaskedPasses;
  } else {
    LossPush rows_push = push;
    rows_push.reduction = kNone;
    append_pod(launch.push, rows_push);
    launch.bindings.back() = kScratch;
    launch.scratch_bytes = 4 * rows;
    launch.items = row_items;
    launch.loop_passes = row_loop;
    launch.label = std::string(op_name(node.op)) + " (rows)";
    launch.paths = with_mode(paths.rows_to_scratch);
    if (row_chunks(positions, 1) > 1) {
      launch.scratch_bytes = append_scratch_sum(
          launch, node.output, rows, push.reduction == kMean,
          std::string(op_name(node.op)) + (push.reduction == kMean ? " (mean)" : " (sum)"), paths.scratch_sum);
      return launch;
    }
    KernelLaunch add;  // the same pipeline; binds the node's status word, never writes it
    add.shader = launch.shader;
    add.bindings = {kScratch, node.inputs[1], node.output};
    add.index_check = launch.index_check;
    push.mode = kPartials;
    append_pod(add.push, push);
    add.items = kGroupSize;
    add.group_size = kGroupSize;
    add.loop_passes = loop_passes(ceil_div(rows, kGroupSize)) + kMaskedPasses;
    add.label = std::string(op_name(node.op)) + " (" + (push.reduction == kMean ? "mean" : "sum") + ")";
    add.paths = {&paths.partials_sum};
    launch.then.push_back(std::move(add));
    return launch;
  }
  append_pod(launch.push, push);
  return launch;
}

template <std::uint32_t Op>
KernelLaunch plan(const Graph& graph, const Node& node) {
  return plan_loss(graph, node, Op);
}

constexpr std::size_t slot(OpId id) { return static_cast<std::size_t>(id); }

}  // namespace

void register_losses_kernels(KernelPlanTable& table) {
  table[slot(op::NllLoss)] = plan<kNll>;
  table[slot(op::CrossEntropy)] = plan<kCrossEntropy>;
}

}  // namespace tg::vk
