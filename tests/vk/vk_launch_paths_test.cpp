// Launch paths on the Vulkan executor (tensorgrad/ir/launch_paths.h, docs/testing.md "Launch
// paths"): every recorded dispatch names its paths (the executor refuses one that does not, so
// building a Program is the check, and the counts must grow), and chosen sizes take the path the
// kernels name for them. Paths are hit when a dispatch is recorded, i.e. when a Program is built.
#include <gtest/gtest.h>

#include <cstdint>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "support/library.h"
#include "tensorgrad/ir/launch_paths.h"
#include "tensorgrad/vk/executor.h"
#include "vk/kernels/kernels.h"
#include "vk_oracle_check.h"
#include "vk_test_support.h"

namespace tg::vk {
namespace {

using testing::random_f32;
using testing::random_indices;
using testing::VkTest;

bool is_grid(const LaunchPathCount& p) { return p.kernel.rfind("grid.", 0) == 0; }

// Every Vulkan path's hits so far, by name.
std::map<std::string, std::uint64_t> vulkan_counts() {
  std::map<std::string, std::uint64_t> out;
  for (const LaunchPathCount& p : launch_path_counts())
    if (p.backend == "vulkan") out[p.name()] = p.hits;
  return out;
}

// The Vulkan paths hit between `before` and now, with their new hits. Differences, not a reset:
// the counts of the rest of the process (a coverage record) stay whole.
std::map<std::string, std::uint64_t> hits_since(const std::map<std::string, std::uint64_t>& before) {
  std::map<std::string, std::uint64_t> out;
  for (const auto& [name, n] : vulkan_counts()) {
    const auto it = before.find(name);
    const std::uint64_t was = it == before.end() ? 0 : it->second;
    if (n > was) out[name] = n - was;
  }
  return out;
}

// Builds `g` (which records every dispatch) and returns the Vulkan paths that recording hit.
std::map<std::string, std::uint64_t> paths_of(const std::shared_ptr<Context>& ctx, const Graph& g,
                                              ProgramOptions options = {}) {
  const auto before = vulkan_counts();
  const Program program(ctx, g, options);
  return hits_since(before);
}

std::string listing(const std::map<std::string, std::uint64_t>& hits) {
  std::string out;
  for (const auto& [name, n] : hits) out += "  " + name + " x" + std::to_string(n) + "\n";
  return out;
}

#define EXPECT_PATH(hits, name) \
  EXPECT_TRUE((hits).contains(name)) << "missing " << (name) << "; hit:\n" << listing(hits)
#define EXPECT_NO_PATH(hits, name) EXPECT_FALSE((hits).contains(name)) << "unexpected " << (name)

struct Case {
  Graph graph;
  TensorMap inputs;
};

Case mlp_case() {
  GraphBuilder b("paths_mlp");
  TracingScope scope(b);
  Tensor x = b.input("x", {DType::f32, {32, 20}});
  Tensor w1 = b.input("w1", {DType::f32, {20, 48}});
  Tensor b1 = b.input("b1", {DType::f32, {48}});
  Tensor w2 = b.input("w2", {DType::f32, {48, 10}});
  Tensor t = b.input("t", {DType::i32, {32}});
  Tensor h = relu(matmul(x, w1) + b1);
  Tensor logits = matmul(h, swap_axes(swap_axes(w2, 0, 1), 0, 1));
  b.output("loss", cross_entropy(logits, t));
  b.output("probs", softmax(logits));
  b.output("bias_grad", sum_to_shape(h, {48}));
  b.output("argmax", argmax(logits, 1));
  b.output("norm", layer_norm(h, std::nullopt, std::nullopt));
  return {b.take(),
          {{"x", random_f32({32, 20}, 1)},
           {"w1", random_f32({20, 48}, 2)},
           {"b1", random_f32({48}, 3)},
           {"w2", random_f32({48, 10}, 4)},
           {"t", random_indices({32}, 10, 5)}}};
}

Case image_case() {
  GraphBuilder b("paths_image");
  TracingScope scope(b);
  Tensor x = b.input("x", {DType::f32, {2, 3, 8, 8}});
  Tensor w = b.input("w", {DType::f32, {4, 3, 3, 3}});
  Tensor y = conv2d(x, w, {.stride = 1, .padding = 1});
  Tensor p = max_pool2d(y, 2);
  b.output("pooled", reshape(p, {2, -1}));
  b.output("pool_grad", max_pool2d_grad(y, p, 2, 2, 0));
  b.output("input_grad", conv2d_input_grad(y, w, 8, 8, {.stride = 1, .padding = 1}));
  b.output("weight_grad", conv2d_weight_grad(x, y, 3, 3, {.stride = 1, .padding = 1}));
  return {b.take(), {{"x", random_f32({2, 3, 8, 8}, 6)}, {"w", random_f32({4, 3, 3, 3}, 7)}}};
}

Case indexing_case() {
  GraphBuilder b("paths_indexing");
  TracingScope scope(b);
  Tensor table = b.input("table", {DType::f32, {10, 8}});
  Tensor idx = b.input("idx", {DType::i32, {4}});
  Tensor e = embedding(table, idx);                                                 // [4, 8]
  Tensor scores = matmul(narrow(e, 1, 0, 4), permute(narrow(e, 1, 4, 4), {1, 0}));  // [4, 4]
  b.output("causal", softmax_causal(scores));
  b.output("masked", where_causal(scores, -1e9));
  b.output("one_hot", one_hot(idx, 10));
  b.output("taken", take_along_axis(e, reshape(idx, {4, 1}), 1));
  b.output("scattered", scatter_add(e, b.input("rows", {DType::i32, {4, 8}}), 1, 3));
  b.output("joined", concat({e, pad(e, 1, 1, 2)}, 1));
  b.output("steps", arange(7, DType::f32) + full({7}, 2.0));
  b.output("noise", dropout(e, 0.5) + randn({4, 8}) + ones({4, 8}) + zeros({4, 8}));
  b.output("nll", nll_loss(log_softmax(e), idx, {.reduction = Reduction::sum}));
  b.output("guarded", stop_gradient(e) / (abs(e) + 1.0));
  return {b.take(),
          {{"table", random_f32({10, 8}, 8)},
           {"idx", random_indices({4}, 8, 9)},
           {"rows", random_indices({4, 8}, 3, 10)},
           {std::string(kStepSeedInput), HostTensor::i32({}, {3})}}};
}

// (a) Every recorded dispatch names a path: building refuses one that does not, and each dispatch
// hits one grid path and at least one of its own.
TEST_F(VkTest, LaunchPathsEveryRecordedDispatchNamesAPath) {
  auto ctx = make_context();
  for (Case (*make)() : {mlp_case, image_case, indexing_case}) {
    const Case c = make();
    SCOPED_TRACE(c.graph.name());
    for (const bool fuse : {true, false}) {
      const auto before = vulkan_counts();
      ProgramOptions options;
      options.fuse_elementwise = fuse;
      options.absorb_transposes = fuse;
      Program program(ctx, c.graph, options);
      std::uint64_t grid = 0, own = 0;
      for (const auto& [name, n] : hits_since(before)) (name.rfind("vulkan/grid.", 0) == 0 ? grid : own) += n;
      EXPECT_GE(grid, program.stats().dispatches);
      EXPECT_GT(grid, 0u);
      EXPECT_GE(own, grid);
      const TensorMap got = program.run(c.inputs);
      EXPECT_EQ(got.size(), c.graph.outputs().size());
    }
  }
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

TEST_F(VkTest, LaunchPathsMatmulForms) {
  auto ctx = make_context();
  // The tiled kernel's tiles and splits (CPU devices run these products as row blocks).
  const ScopedMatmulKernelForTesting tiles(LaunchThresholds::ConvKernel::tiles);
  {
    // One small tile, K = 1024: split into 16 ranges of 64, then the ordered sum.
    GraphBuilder b("paths_split_k");
    TracingScope scope(b);
    b.output("y", matmul(b.input("a", {DType::f32, {64, 1024}}), b.input("b", {DType::f32, {1024, 64}})));
    const auto hits = paths_of(ctx, b.take());
    EXPECT_PATH(hits, "vulkan/matmul/small_tiles");
    EXPECT_PATH(hits, "vulkan/matmul/folded");
    EXPECT_PATH(hits, "vulkan/matmul/split_k");
    EXPECT_PATH(hits, "vulkan/matmul/split_k_sum");
    EXPECT_PATH(hits, "vulkan/ordered_sum_of_partials/vec4");
    EXPECT_NO_PATH(hits, "vulkan/matmul/unsplit");
  }
  {
    // K = 32769 has no even split: loop-limit ranges of 16400, the last one shorter.
    GraphBuilder b("paths_ragged_k");
    TracingScope scope(b);
    b.output("y", matmul(b.input("a", {DType::f32, {1, 32769}}), b.input("b", {DType::f32, {32769, 3}})));
    const auto hits = paths_of(ctx, b.take());
    EXPECT_PATH(hits, "vulkan/matmul/ragged_k");
    EXPECT_PATH(hits, "vulkan/matmul/scalar_a");
    EXPECT_PATH(hits, "vulkan/matmul/scalar_bc");
    EXPECT_PATH(hits, "vulkan/ordered_sum_of_partials/scalar");
  }
  {
    // A batched product reading a transposed rhs in place.
    GraphBuilder b("paths_batched_transposed");
    TracingScope scope(b);
    Tensor a = b.input("a", {DType::f32, {2, 8, 16}});
    Tensor w = b.input("w", {DType::f32, {2, 12, 16}});
    b.output("y", matmul(a, swap_axes(w, -2, -1)));
    const auto hits = paths_of(ctx, b.take());
    EXPECT_PATH(hits, "vulkan/matmul/batched");
    EXPECT_PATH(hits, "vulkan/matmul/unsplit");
    EXPECT_PATH(hits, "vulkan/matmul/transposed_rhs");
    EXPECT_PATH(hits, "vulkan/matmul/vec4_bt");
    EXPECT_NO_PATH(hits, "vulkan/swap_axes/strided_copy");  // absorbed: no dispatch
  }
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

TEST_F(VkTest, LaunchPathsRowModesAndSplits) {
  auto ctx = make_context();
  GraphBuilder b("paths_rows");
  TracingScope scope(b);
  b.output("split", sum(b.input("long", {DType::f32, {9000}})));                    // 1 row of 9000: chunks
  b.output("segments", max(b.input("medium", {DType::f32, {128, 64}}), 1));         // 128 rows of 64
  b.output("serial", softmax(b.input("short", {DType::f32, {5, 32}})));             // rows of 32
  b.output("group", log_softmax(b.input("wide", {DType::f32, {2, 33}})));           // few rows of 33
  b.output("arg_split", argmin(b.input("long2", {DType::f32, {8193}}), 0));         // chunks, index partials
  b.output("soft_split", softmax(b.input("long3", {DType::f32, {8193}})));          // three split dispatches
  b.output("causal", softmax_causal(b.input("square", {DType::f32, {128, 128}})));  // row segments
  const auto hits = paths_of(ctx, b.take());
  EXPECT_PATH(hits, "vulkan/sum/split_chunks");
  EXPECT_PATH(hits, "vulkan/sum/split_combine_serial");
  EXPECT_PATH(hits, "vulkan/max/row_segments");
  EXPECT_PATH(hits, "vulkan/softmax/row_per_invocation");
  EXPECT_PATH(hits, "vulkan/log_softmax/workgroup_per_row");
  EXPECT_PATH(hits, "vulkan/argmin/split_chunks");
  EXPECT_PATH(hits, "vulkan/softmax/split_maxima");
  EXPECT_PATH(hits, "vulkan/softmax/split_sums");
  EXPECT_PATH(hits, "vulkan/softmax/split_outputs");
  EXPECT_PATH(hits, "vulkan/softmax_causal/row_segments");
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

TEST_F(VkTest, LaunchPathsSumToShapeScatterAndLosses) {
  auto ctx = make_context();
  GraphBuilder b("paths_sums");
  TracingScope scope(b);
  b.output("row_blocks", sum_to_shape(b.input("rows", {DType::f32, {300, 4}}), {4}));       // 2 blocks of 256 rows
  b.output("contiguous", sum_to_shape(b.input("c", {DType::f32, {2000, 40}}), {2000, 1}));  // mode 3, short
  b.output("long_rows", sum_to_shape(b.input("l", {DType::f32, {3, 300}}), {3, 1}));        // mode 5
  Tensor updates = b.input("u", {DType::f32, {8193}});
  b.output("scatter", scatter_add(updates, b.input("ui", {DType::i32, {8193}}), 0, 4));  // 4 long columns
  Tensor logits = b.input("logits", {DType::f32, {300, 40}});
  b.output("ce", cross_entropy(logits, b.input("t", {DType::i32, {300}})));  // > 256 rows of 40 classes
  const auto hits = paths_of(ctx, b.take());
  EXPECT_PATH(hits, "vulkan/sum_to_shape/row_block_partials");
  EXPECT_PATH(hits, "vulkan/sum_to_shape/row_block_sum");
  EXPECT_PATH(hits, "vulkan/sum_to_shape/contiguous_rows_short");
  EXPECT_PATH(hits, "vulkan/sum_to_shape/contiguous_long_rows");
  EXPECT_PATH(hits, "vulkan/scatter_add/chunks");
  EXPECT_PATH(hits, "vulkan/scatter_add/chunk_sum");
  EXPECT_PATH(hits, "vulkan/cross_entropy/rows_to_scratch");
  EXPECT_PATH(hits, "vulkan/cross_entropy/workgroup_rows");
  EXPECT_PATH(hits, "vulkan/cross_entropy/partials_sum");
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

TEST_F(VkTest, LaunchPathsFusedAndOwnKernels) {
  auto ctx = make_context();
  {
    GraphBuilder b("paths_fused");
    TracingScope scope(b);
    b.output("y", exp(b.input("x", {DType::f32, {64}}) + b.input("z", {DType::f32, {64}})));
    const auto hits = paths_of(ctx, b.take());
    EXPECT_PATH(hits, "vulkan/add/fused");
    EXPECT_PATH(hits, "vulkan/exp/fused");
    EXPECT_PATH(hits, "vulkan/fusion/one_output");
    EXPECT_PATH(hits, "vulkan/fusion/whole_window");
    EXPECT_PATH(hits, "vulkan/fusion/same_shape_operands");
    EXPECT_NO_PATH(hits, "vulkan/add/own_kernel");
    EXPECT_NO_PATH(hits, "vulkan/exp/own_kernel");
  }
  {
    GraphBuilder b("paths_own");
    TracingScope scope(b);
    b.output("y", exp(b.input("x", {DType::f32, {64}})));
    const auto hits = paths_of(ctx, b.take());
    EXPECT_PATH(hits, "vulkan/exp/own_kernel");
    EXPECT_NO_PATH(hits, "vulkan/exp/fused");
  }
  {
    // A bias [8] under [4, 8] (periodic) and a row statistic [4, 1] (spread), both results stored.
    GraphBuilder b("paths_fused_kinds");
    TracingScope scope(b);
    Tensor x = b.input("x", {DType::f32, {4, 8}});
    Tensor h = x + b.input("bias", {DType::f32, {8}});
    b.output("h", h);
    b.output("y", tanh(h * b.input("scale", {DType::f32, {4, 1}})));
    const auto hits = paths_of(ctx, b.take());
    EXPECT_PATH(hits, "vulkan/fusion/several_outputs");
    EXPECT_PATH(hits, "vulkan/fusion/periodic_operands");
    EXPECT_PATH(hits, "vulkan/fusion/spread_operands");
    EXPECT_PATH(hits, "vulkan/tanh/fused");
  }
  {
    // Grid-stride loops at small sizes: one workgroup for 1000 elements.
    GraphBuilder b("paths_grid");
    TracingScope scope(b);
    b.output("y", exp(b.input("x", {DType::f32, {1000}})));
    ProgramOptions options;
    options.max_workgroups = 1;
    const auto hits = paths_of(ctx, b.take(), options);
    EXPECT_PATH(hits, "vulkan/grid.elementwise_unary/grid_stride");
  }
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

// Forms the random graphs seldom draw: an empty K, a fused abs, fused windows cut by the shader's
// step limit and by its output limit, and an input gradient of one tile whose K (O x kh x kw) splits
// into ranges.
TEST_F(VkTest, LaunchPathsSeldomDrawnForms) {
  auto ctx = make_context();
  const ScopedConvKernelForTesting tiles(LaunchThresholds::ConvKernel::tiles);  // the tiled input grad's split
  const ScopedMatmulKernelForTesting matmul_tiles(LaunchThresholds::ConvKernel::tiles);
  GraphBuilder b("paths_seldom");
  TracingScope scope(b);
  b.output("empty_k", matmul(b.input("a", {DType::f32, {2, 0}}), b.input("b", {DType::f32, {0, 3}})));
  Tensor x = b.input("x", {DType::f32, {16}});
  b.output("abs", abs(x) * x);
  Tensor chain = b.input("c", {DType::f32, {16}});
  for (int i = 0; i < 30; ++i) chain = neg(chain);  // past the 24 steps of one window
  b.output("chain", chain);
  Tensor y = b.input("y", {DType::f32, {16}});
  for (Tensor t : {exp(y), sin(y), cos(y), tanh(y), sigmoid(y)}) b.output("o" + std::to_string(t.id()), t);
  b.output("input_grad", conv2d_input_grad(b.input("g", {DType::f32, {1, 4097, 1, 1}}),
                                           b.input("w", {DType::f32, {4097, 1, 1, 1}}), 1, 1, {}));
  const auto hits = paths_of(ctx, b.take());
  EXPECT_PATH(hits, "vulkan/matmul/zero_k");
  EXPECT_PATH(hits, "vulkan/abs/fused");
  EXPECT_PATH(hits, "vulkan/fusion/cut_at_limit");
  EXPECT_PATH(hits, "vulkan/fusion/cut_at_outputs");
  EXPECT_PATH(hits, "vulkan/conv2d_input_grad/gemm_ragged_k");
  EXPECT_PATH(hits, "vulkan/conv2d_input_grad/gemm_split_k_sum");
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

// Every declared Vulkan path and threshold, printed for the record (and the list must be there).
TEST(LaunchPaths, VulkanPathsAndThresholdsAreDeclared) {
  std::size_t paths = 0;
  for (const LaunchPathCount& p : launch_path_counts()) {
    if (p.backend != "vulkan" || is_grid(p)) continue;
    std::cout << "path " << p.name() << "\n";
    ++paths;
  }
  std::size_t thresholds = 0;
  for (const SizeThresholdInfo& t : size_thresholds()) {
    if (t.backend != "vulkan") continue;
    std::cout << "threshold vulkan/" << t.kernel << "/" << t.what << " = " << t.value << "\n";
    ++thresholds;
  }
  EXPECT_GT(paths, 100u);
  EXPECT_GT(thresholds, 20u);
}

}  // namespace
}  // namespace tg::vk
