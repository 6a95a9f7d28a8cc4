// The image family (conv2d, conv2d_input_grad, conv2d_weight_grad, max_pool2d, max_pool2d_grad) on
// the Vulkan executor against the f64 oracle: the ops' own samples, their gradient graphs (first
// and, through the convolution adjoints, second order), the convolutions' geometry (per-axis
// strides and padding, dilation, groups) across the implicit GEMM's tiles, K slices and split-K,
// pooling's two shader modes (one invocation per output element, one workgroup for large windows),
// edge shapes (1x1 kernels and images, stride above the kernel, windows entirely in the padding,
// empty channel and batch dims), a grid-stride loop past the executor's 65535 workgroups, pooling
// ties, NaN, signed zeros and infinities routed as the interpreter routes them, and the refusal of
// geometry the shaders cannot index. Convolutions meet the op's tolerance class; pooling values
// and pooled gradients of small integers are exact. Under the validation layer when
// TG_VK_VALIDATION=1.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "property/graph_gen.h"
#include "support/library.h"
#include "support/op_seed.h"
#include "support/tolerance.h"
#include "tensorgrad/ir/ops/ids/image.h"
#include "tensorgrad/vk/executor.h"
#include "vk/kernels/kernels.h"
#include "vk_oracle_check.h"
#include "vk_test_support.h"

namespace tg::vk {
namespace {

using testing::VkTest;

constexpr OpId kFamily[] = {op::Conv2d, op::Conv2dInputGrad, op::Conv2dWeightGrad, op::MaxPool2d, op::MaxPool2dGrad};

using testing::f32_tolerance;
using testing::random_f32;
using testing::small_integers_f32;

// Runs g on Vulkan and on the f64 oracle. Each output within its bound in `tolerance` (absent:
// exact, NaN matching NaN, and zeros of the same sign: the ops route signed zeros as the
// interpreter does). With `thorough`, also a replay that must repeat the bits and a run with guard
// regions (no write outside a value).
void check(const std::shared_ptr<Context>& ctx, const Graph& g, const TensorMap& in,
           const std::map<std::string, double>& tolerance, bool thorough = true) {
  testing::check_against_oracle(ctx, g, in,
                                {.tolerance = tolerance, .signed_zeros = true, .replay = thorough, .guards = thorough});
}

// One output, compared under graph_tolerance (or exactly).
void check_one(const std::shared_ptr<Context>& ctx, const Graph& g, const TensorMap& in, bool exact = false) {
  std::map<std::string, double> tolerance;
  if (!exact)
    for (const auto& out : g.outputs()) tolerance[out.name] = f32_tolerance(g, in);
  check(ctx, g, in, tolerance);
}

// Samples of one op, gathered into one graph (one Program, so pipelines compile once), each sample
// compared with its own single-op bound. Pooling is exact: max_pool2d selects, and max_pool2d_grad's
// samples feed small-integer gradients whose sums f32 holds exactly.
TEST_F(VkTest, ImageSamplesMatchTheF64Oracle) {
  auto ctx = make_context();
  for (const OpId op : kFamily) {
    ASSERT_TRUE(has_kernel(op)) << op_name(op);
    const bool exact = op == op::MaxPool2d || op == op::MaxPool2dGrad;
    GraphBuilder b(std::string(op_name(op)) + "_samples");
    TensorMap inputs;
    std::map<std::string, double> tolerance;
    std::string described;
    for (std::uint64_t seed = 1; seed <= 30; ++seed) {
      SampleRng rng(seed * 7919 + tg::testing::op_seed(op));
      const auto sample = op_def(op).samples(rng, std::nullopt);
      ASSERT_TRUE(sample.has_value());
      const tg::testing::GraphCase c = tg::testing::build_single_op(op, *sample, rng);
      const std::string tag = "s" + std::to_string(seed);
      std::vector<Tensor> operands;
      for (std::size_t i = 0; i < sample->inputs.size(); ++i) {
        const std::string name = tag + "_x" + std::to_string(i);
        operands.push_back(b.input(name, sample->inputs[i]));
        inputs.emplace(name, c.inputs.at("x" + std::to_string(i)));
      }
      b.output(tag, b.emit(op, operands, sample->attrs, SourceLoc{"vk_image_test", 1, 0}));
      if (!exact) tolerance[tag] = f32_tolerance(c.graph, c.inputs);
      described += tag + ":" + print_graph(c.graph, {.locations = false});
    }
    SCOPED_TRACE(std::string(op_name(op)) + " samples\n" + described);
    check(ctx, b.take(), inputs, tolerance);
  }
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

// Gradient graphs (loss = sum(y * w)) of the differentiable ops on a few samples: conv2d's gradient
// runs both adjoints, the adjoints' gradients run conv2d and each other (second order), and
// max_pool2d's runs max_pool2d_grad. A graph needing an op with no Vulkan kernel yet is skipped
// naming it, after every graph that can run has been checked.
TEST_F(VkTest, ImageGradientGraphsMatchTheF64Oracle) {
  auto ctx = make_context();
  std::vector<std::string> missing;
  for (const OpId op : kFamily) {
    if (!op_def(op).differentiable) continue;
    for (std::uint64_t seed = 1; seed <= 4; ++seed) {
      SampleRng rng(seed * 104729 + tg::testing::op_seed(op));
      const auto sample = op_def(op).samples(rng, std::nullopt);
      ASSERT_TRUE(sample.has_value());
      tg::testing::GraphCase c = tg::testing::build_single_op(op, *sample, rng);
      const ValueId y = *c.graph.find_output("y");
      const TensorType y_type = c.graph.type(y);
      GraphBuilder b(c.graph.name());
      b.mutable_graph() = c.graph;
      {
        TracingScope scope(b);
        b.output("loss", sum(b.wrap(y) * b.input("w", y_type)));
      }
      c.inputs.emplace("w", random_f32(y_type.shape, static_cast<std::uint32_t>(seed)));
      std::vector<std::string> wrt;
      for (const auto& in : c.graph.inputs()) wrt.push_back(in.name);
      const Graph grads = differentiate(b.take(), {.loss = "loss", .wrt = wrt});
      const auto lacking =
          std::find_if(grads.nodes().begin(), grads.nodes().end(), [](const Node& n) { return !has_kernel(n.op); });
      if (lacking != grads.nodes().end()) {
        missing.push_back(std::string(op_name(op)) + "'s gradient needs '" + std::string(op_name(lacking->op)) + "'");
        continue;
      }
      SCOPED_TRACE(std::string(op_name(op)) + " gradient, seed " + std::to_string(seed) + "\n" +
                   print_graph(grads, {.locations = false}));
      const double tol = f32_tolerance(grads, c.inputs);
      std::map<std::string, double> tolerance;
      for (const auto& out : grads.outputs()) tolerance[out.name] = tol;
      check(ctx, grads, c.inputs, tolerance, false);
    }
  }
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
  if (!missing.empty()) {
    std::sort(missing.begin(), missing.end());
    missing.erase(std::unique(missing.begin(), missing.end()), missing.end());
    GTEST_SKIP() << "no Vulkan kernel yet for:\n" << testing::join_lines(missing);
  }
}

// PyTorch's geometry across the implicit GEMM's edges (conv_gemm.cpp), each case running conv2d and
// both adjoints against the oracle: channels not multiples of 4 (scalar A loads and C stores),
// per-axis strides above the kernel, dilations 2 and 3, depthwise (groups = channels) and groups 2
// and 3, kernels larger than the image with padding, 1x1 kernels, batch 1, and products spanning
// several tiles in M and in NC, several K slices, and split-K (ragged and even ranges).
struct ConvCase {
  Shape x, w;
  Pair2d stride = 1;
  Conv2dPadding padding = 0;
  Pair2d dilation = 1;
  std::int64_t groups = 1;
};

void check_conv_cases(const std::shared_ptr<Context>& ctx, const std::vector<ConvCase>& cases, std::uint32_t seed) {
  int index = 0;
  for (const ConvCase& k : cases) {
    SCOPED_TRACE("case " + std::to_string(index) + ": x " + shape_to_string(k.x) + " w " + shape_to_string(k.w));
    GraphBuilder b("conv_" + std::to_string(index));
    TracingScope scope(b);
    Tensor x = b.input("x", {DType::f32, k.x});
    Tensor w = b.input("w", {DType::f32, k.w});
    const Conv2dOptions opts{.stride = k.stride, .padding = k.padding, .dilation = k.dilation, .groups = k.groups};
    Tensor y = conv2d(x, w, opts);
    Tensor g = b.input("g", y.type());
    b.output("y", y);
    b.output("dx", conv2d_input_grad(g, w, k.x[2], k.x[3], opts));
    b.output("dw", conv2d_weight_grad(x, g, k.w[2], k.w[3], opts));
    const Graph graph = b.take();
    const TensorMap in{{"x", random_f32(k.x, seed + index)},
                       {"w", random_f32(k.w, seed + 100 + index)},
                       {"g", random_f32(graph.type(*graph.find_output("y")).shape, seed + 200 + index)}};
    check_one(ctx, graph, in);
    ++index;
  }
}

TEST_F(VkTest, ImageConvolutionGeometries) {
  auto ctx = make_context();
  check_conv_cases(ctx,
                   {
                       {{2, 3, 9, 11}, {4, 3, 3, 2}, 1, 1},                       // channels off vec4, odd planes
                       {{1, 2, 7, 7}, {3, 2, 3, 3}, 2, 2},                        // stride 2, wide padding
                       {{2, 1, 10, 8}, {2, 1, 2, 3}, {3, 4}, {1, 0}},             // strides above the kernel
                       {{2, 4, 12, 10}, {6, 4, 3, 3}, 1, {2, 1}, {2, 3}},         // dilations 2 and 3
                       {{2, 8, 9, 9}, {8, 1, 3, 3}, 1, 1, 1, 8},                  // depthwise
                       {{2, 6, 8, 7}, {4, 3, 3, 3}, {2, 1}, 1, 1, 2},             // groups 2, per-axis stride
                       {{1, 9, 6, 6}, {6, 3, 1, 1}, 1, 0, 1, 3},                  // groups 3, 1x1
                       {{2, 4, 15, 13}, {4, 2, 3, 2}, 2, {3, 1}, 3, 2},           // dilated, strided, grouped
                       {{1, 2, 3, 3}, {2, 2, 5, 5}, 1, 2},                        // kernel larger than the image
                       {{1, 5, 4, 4}, {7, 5, 1, 1}},                              // batch 1, 1x1
                       {{3, 12, 2, 4}, {8, 6, 2, 1}, {1, 3}, {1, 0}, {2, 1}, 2},  // non-square everything
                   },
                   100);
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

// Products spanning tiles (M 70 and 65: two row tiles; NC past 64), K slices (17 and 180 taps) and
// split-K: the weight gradients' K = N*OH*OW splits into ranges (even and ragged), the forward's
// long C*KH*KW of one tile too.
TEST_F(VkTest, ImageConvolutionTilesAndSplitK) {
  auto ctx = make_context();
  check_conv_cases(ctx,
                   {
                       {{2, 20, 17, 19}, {70, 20, 3, 3}, 1, 1},       // 2 x 11 tiles, K 180, dW split ragged
                       {{4, 17, 8, 8}, {65, 17, 1, 1}, 1, 0},         // M 65, K 17; dW K 256 in 4 ranges
                       {{1, 300, 3, 3}, {2, 300, 3, 3}, 1, 1},        // forward K 2700 of one tile: split
                       {{2, 3, 24, 24}, {64, 3, 3, 3}, 1, 1},         // exactly one row tile, dW K 1152
                       {{2, 16, 16, 16}, {32, 4, 3, 3}, 1, 1, 1, 4},  // groups 4, split dW per group
                   },
                   400);
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

// Size-1 everything, a kernel as large as the padded image, windows lying wholly in the padding
// (zeros), and empty operands: C = 0 and O = 0 (every output a sum of no terms: each op's
// gemm_zero_k path), N = 0 (empty outputs launch nothing) and an image of 0x0 whose padding alone
// gives a 2x2 output.
TEST_F(VkTest, ImageConvolutionEdgeShapes) {
  auto ctx = make_context();
  GraphBuilder b("conv_edges");
  TracingScope scope(b);
  Tensor one = b.input("one", {DType::f32, {1, 1, 1, 1}});
  Tensor one_w = b.input("one_w", {DType::f32, {1, 1, 1, 1}});
  Tensor img = b.input("img", {DType::f32, {2, 3, 4, 5}});
  Tensor full_w = b.input("full_w", {DType::f32, {2, 3, 6, 7}});
  Tensor wide_w = b.input("wide_w", {DType::f32, {1, 3, 1, 1}});
  Tensor no_c = b.input("no_c", {DType::f32, {2, 0, 4, 4}});
  Tensor no_c_w = b.input("no_c_w", {DType::f32, {3, 0, 2, 2}});
  Tensor no_n = b.input("no_n", {DType::f32, {0, 3, 4, 5}});
  Tensor no_hw = b.input("no_hw", {DType::f32, {1, 1, 0, 0}});
  b.output("one", conv2d(one, one_w));
  b.output("one_padded", conv2d(one, one_w, {.padding = 2}));                 // 5x5, only the centre nonzero
  b.output("full", conv2d(img, full_w, {.padding = 1}));                      // one window covering the padded image
  b.output("strided_1x1", conv2d(img, wide_w, {.stride = 3, .padding = 2}));  // corners in the padding
  b.output("no_c", conv2d(no_c, no_c_w, {.padding = 1}));
  b.output("no_c_dw", conv2d_weight_grad(no_c, b.input("no_c_g", {DType::f32, {2, 5, 4, 4}}), 1, 1, {}));  // empty dw
  b.output("no_n", conv2d(no_n, full_w, {.padding = 1}));
  b.output("no_n_dw", conv2d_weight_grad(no_n, b.input("no_n_g", {DType::f32, {0, 2, 1, 1}}), 6, 7, {.padding = 1}));
  b.output("no_hw", conv2d(no_hw, one_w, {.padding = 1}));
  b.output("no_hw_dw", conv2d_weight_grad(no_hw, b.input("no_hw_g", {DType::f32, {1, 4, 2, 2}}), 1, 1, {.padding = 1}));
  b.output("one_dx", conv2d_input_grad(b.input("one_g", {DType::f32, {1, 1, 5, 5}}), one_w, 1, 1, {.padding = 2}));
  // O = 0: an input gradient summing no terms (zeros).
  b.output("no_o_dx", conv2d_input_grad(b.input("no_o_g", {DType::f32, {2, 0, 4, 4}}),
                                        b.input("no_o_w", {DType::f32, {0, 3, 1, 1}}), 4, 4, {}));
  const Graph g = b.take();
  TensorMap in;
  std::uint32_t seed = 1;
  for (const auto& input : g.inputs()) in.emplace(input.name, random_f32(g.type(input.value).shape, seed++));
  // Both kernels: the tiles GPUs run and the row blocks CPU devices run (their zero-K paths).
  for (const auto kernel : {LaunchThresholds::ConvKernel::tiles, LaunchThresholds::ConvKernel::rows}) {
    const ScopedConvKernelForTesting forced(kernel);
    check_one(ctx, g, in);
  }
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

// The tile loop past the workgroup cap. Everywhere: three ops of several tiles, groups and K
// ranges each, under a cap of 3 workgroups (ProgramOptions::max_workgroups). On GPUs also at the
// executor's 65535: a depthwise 1x1 convolution of 65537 groups is 65537 one-tile products, the
// last one in workgroup 0's second pass (lavapipe takes minutes over 65537 workgroups).
TEST_F(VkTest, ImageGridStrideWrapsPastTheWorkgroupLimit) {
  auto ctx = make_context();
  {
    GraphBuilder b("conv_capped");
    TracingScope scope(b);
    Tensor x = b.input("x", {DType::f32, {2, 6, 9, 10}});
    Tensor w = b.input("w", {DType::f32, {70, 3, 3, 3}});
    const Conv2dOptions opts{.padding = 1, .groups = 2};
    Tensor y = conv2d(x, w, opts);
    Tensor g = b.input("g", y.type());
    b.output("y", y);
    b.output("dx", conv2d_input_grad(g, w, 9, 10, opts));
    b.output("dw", conv2d_weight_grad(x, g, 3, 3, opts));
    const Graph graph = b.take();
    const TensorMap in{{"x", random_f32({2, 6, 9, 10}, 1)},
                       {"w", random_f32({70, 3, 3, 3}, 2)},
                       {"g", random_f32(graph.type(*graph.find_output("y")).shape, 3)}};
    const InterpResult oracle = interpret(graph, in, {.compute = ComputeType::f64, .keep_all_values = true});
    const double tol = f32_tolerance(graph, oracle);
    Program program(ctx, graph, {.max_workgroups = 3});
    const TensorMap got = program.run(in);
    for (const auto& [name, want] : oracle.outputs) {
      const auto v = got.at(name).to_f64();
      std::size_t bad = 0;
      for (std::size_t i = 0; i < v.size(); ++i) bad += std::fabs(v[i] - want.at(i)) <= tol ? 0 : 1;
      EXPECT_EQ(bad, 0u) << name;
    }
  }
  if (ctx->info().type != DeviceType::cpu) {
    constexpr std::int64_t kGroups = 65537;
    GraphBuilder b("conv_wrap");
    TracingScope scope(b);
    Tensor x = b.input("x", {DType::f32, {1, kGroups, 1, 2}});
    Tensor w = b.input("w", {DType::f32, {kGroups, 1, 1, 1}});
    b.output("y", conv2d(x, w, {.groups = kGroups}));
    const TensorMap in{{"x", random_f32({1, kGroups, 1, 2}, 1)}, {"w", random_f32({kGroups, 1, 1, 1}, 2)}};
    const Graph graph = b.take();
    check_one(ctx, graph, in);
    Program program(ctx, graph);
    EXPECT_NE(program.run(in).at("y").at(2 * kGroups - 1), 0.0);  // the last group's, in the wrapped pass
  }
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

// Pooling picks the interpreter's element: the first maximum on ties (including -0 against +0),
// the first NaN over everything, -inf and +inf as ordinary values; the gradient goes to that element
// and overlapping windows add up. Plus size-1 kernels, stride above the kernel, padding, and windows
// large enough for the workgroup modes (4225 taps forward; up to 2x3 windows of 1089 taps backward).
// The gradients of disjoint windows ({1,1,0}, {2,2,0}, {2,3,1}) run the window cells; the overlapping
// ones keep both gather modes tested (vk_pool_cells_test.cpp crosses between them).
TEST_F(VkTest, ImagePoolingTiesNaNAndBothModes) {
  auto ctx = make_context();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  // Plane 0 all ties; plane 1 signed zeros and infinities; plane 2 NaNs; plane 3 random.
  std::vector<float> special(4 * 6 * 6);
  for (int i = 0; i < 36; ++i) {
    special[i] = 1.5f;
    special[36 + i] = (i % 3 == 0) ? -0.0f : (i % 3 == 1 ? 0.0f : -inf);
    special[72 + i] = (i % 7 == 3) ? nan : static_cast<float>(i % 5);
    special[108 + i] = static_cast<float>((i * 17) % 11) - 5.0f;
  }
  special[36 + 20] = inf;
  struct Pool {
    std::int64_t kernel, stride, padding;
  };
  const Pool pools[] = {{1, 1, 0}, {2, 2, 0}, {3, 1, 1}, {3, 2, 1}, {2, 3, 1}, {4, 1, 2}, {6, 1, 3}};
  GraphBuilder b("pool_special");
  TracingScope scope(b);
  Tensor x = b.input("x", {DType::f32, {2, 2, 6, 6}});
  TensorMap in{{"x", HostTensor::f32({2, 2, 6, 6}, special)}};
  int index = 0;
  for (const Pool& p : pools) {
    const std::string tag = std::to_string(index);
    Tensor y = max_pool2d(x, p.kernel, {.stride = p.stride, .padding = p.padding});
    Tensor g = b.input("g" + tag, y.type());
    in.emplace("g" + tag, small_integers_f32(y.shape(), 40 + index));
    b.output("y" + tag, y);
    b.output("dx" + tag, max_pool2d_grad(x, g, p.kernel, p.stride, p.padding));
    ++index;
  }
  // Workgroup modes: a 65x65 window (4225 taps) forward; up to 2x3 covering windows of 33x33 backward.
  Tensor big = b.input("big", {DType::f32, {1, 2, 65, 70}});
  in.emplace("big", small_integers_f32({1, 2, 65, 70}, 7));  // many ties among 7 values
  Tensor big_y = max_pool2d(big, 65, {.stride = 1});
  b.output("big_y", big_y);
  Tensor mid = b.input("mid", {DType::f32, {2, 1, 34, 35}});
  in.emplace("mid", small_integers_f32({2, 1, 34, 35}, 8));
  Tensor mid_y = max_pool2d(mid, 33, {.stride = 1});  // 2x3 windows
  Tensor mid_g = b.input("mid_g", mid_y.type());
  in.emplace("mid_g", small_integers_f32(mid_y.shape(), 9));
  b.output("mid_y", mid_y);
  b.output("mid_dx", max_pool2d_grad(mid, mid_g, 33, 1, 0));
  check(ctx, b.take(), in, {});
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

// Geometry beyond the shaders' int indexing is refused before anything runs, naming the op and the
// operand types: a padding of 2^31 (the output stays 2x2 through an equally large stride).
TEST_F(VkTest, ImageRefusesGeometryBeyondIntIndexing) {
  auto ctx = make_context();
  const std::int64_t huge = std::int64_t{1} << 31;
  GraphBuilder b("huge_padding");
  TracingScope scope(b);
  Tensor x = b.input("x", {DType::f32, {1, 1, 1, 1}});
  Tensor w = b.input("w", {DType::f32, {1, 1, 1, 1}});
  b.output("y", conv2d(x, w, {.stride = 2 * huge, .padding = huge}));
  const Graph g = b.take();
  ASSERT_EQ(g.type(*g.find_output("y")).shape, (Shape{1, 1, 2, 2}));
  try {
    Program program(ctx, g);
    FAIL() << "compiled a conv2d with padding 2^31";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("'conv2d'"), std::string::npos) << what;
    EXPECT_NE(what.find("f32[1,1,1,1]"), std::string::npos) << what;
    EXPECT_NE(what.find("int range"), std::string::npos) << what;
  }
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

}  // namespace
}  // namespace tg::vk
