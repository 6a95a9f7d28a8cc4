// Elementwise fusion with channel operands (src/vk/fusion_operands.h): an operand whose shape is 1s,
// then a block of the output's axes, then 1s, such as a conv bias [1, C, 1, 1] under [N, C, H, W],
// joins a fused run when each of its elements covers whole vec4s of the output (run, the product
// of the output's axes after the block, a multiple of 4) and is read at (i / run) % size. Every
// case runs the graph unfused and fused on Vulkan and demands the same bits, agreement with the
// f64 oracle, and a fused dispatch exactly when the run is whole vec4s (both sides of it).
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "support/library.h"
#include "tensorgrad/vk/executor.h"
#include "vk/fusion.h"
#include "vk/kernels/kernels.h"
#include "vk_oracle_check.h"
#include "vk_test_support.h"

namespace tg::vk {
namespace {

using testing::random_f32;
using testing::VkTest;

std::uint64_t hits(const std::string& name) {
  for (const LaunchPathCount& p : launch_path_counts())
    if (p.name() == name) return p.hits;
  ADD_FAILURE() << name << " is not a declared launch path";
  return 0;
}

struct Outcome {
  std::size_t plain = 0, fused = 0;  // dispatches
  std::uint64_t channel_hits = 0;    // vulkan/fusion/channel_operands hits recording the fused program
  std::vector<std::string> labels;   // the fused program's dispatches
  std::vector<std::string> paths;    // the fusion paths recording the fused program hit
};

// Runs g unfused and fused (with `options`): the same bits for every output, and the oracle's
// values within the graph tolerance.
Outcome run_both(const std::shared_ptr<Context>& ctx, const Graph& g, const TensorMap& inputs,
                 ProgramOptions options = {}) {
  ProgramOptions plain_options = options;
  plain_options.fuse_elementwise = false;
  options.timestamps = ctx->info().timestamps_supported;
  Program plain(ctx, g, plain_options);
  // A launch's paths are hit when a program records it (once, at build).
  const std::uint64_t before = hits("vulkan/fusion/channel_operands");
  std::map<std::string, std::uint64_t> recorded;
  for (const LaunchPathCount& p : launch_path_counts()) recorded[p.name()] = p.hits;
  Program fused(ctx, g, options);
  Outcome out{
      plain.stats().dispatches, fused.stats().dispatches, hits("vulkan/fusion/channel_operands") - before, {}, {}};
  for (const LaunchPathCount& p : launch_path_counts())
    if (p.kernel == "fusion" && p.hits > recorded[p.name()]) out.paths.push_back(p.name());
  const TensorMap a = plain.run(inputs), b = fused.run(inputs);
  for (const DispatchTiming& t : fused.timings()) out.labels.push_back(t.op);
  EXPECT_EQ(a.size(), b.size());
  for (const auto& [name, x] : a) {
    const HostTensor& y = b.at(name);
    EXPECT_EQ(x.type, y.type) << name;
    for (std::size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (std::bit_cast<std::uint32_t>(static_cast<float>(x.at(i))) !=
          std::bit_cast<std::uint32_t>(static_cast<float>(y.at(i)))) {
        ADD_FAILURE() << name << "[" << i << "]: unfused " << x.at(i) << ", fused " << y.at(i);
        break;
      }
    }
  }
  testing::check_against_oracle(ctx, g, inputs, {.otherwise = std::nullopt});
  return out;
}

std::string str(const Shape& s) {
  std::string out = "[";
  for (std::size_t d = 0; d < s.size(); ++d) out += (d ? "," : "") + std::to_string(s[d]);
  return out + "]";
}

std::string joined(const std::vector<std::string>& labels) {
  std::string out;
  for (const std::string& l : labels) out += " " + l;
  return out;
}

struct Case {
  Shape out, operand;
  bool fuses;           // run % 4 == 0
  bool channel = true;  // read as a channel operand when fused (not the spread or same form)
};

// The conv bias and its relu over outputs of rank 3 to 5, the operand as [1, C, 1, 1], [C, 1, 1],
// [1, C, 1], [C, 1] and blocks of two axes, on both sides of run % 4 == 0 (runs 2, 5, 6 against
// 4, 8, 12, 16; [2, 3, 2, 3] has n % 4 == 0 but run 6: the run decides, not n). Two neighbours of
// the form fuse as the cheaper forms: no axis before the block (spread), or neither before nor
// after it ([C] under [1, C]: the output's own words, which no form took before).
TEST_F(VkTest, FusionJoinsAChannelOperandWhenItsRunIsWholeVec4s) {
  auto ctx = make_context();
  const std::vector<Case> cases = {
      {{3, 5, 2, 6}, {1, 5, 1, 1}, true},      // run 12
      {{2, 3, 2, 2}, {1, 3, 1, 1}, true},      // run 4: the smallest
      {{2, 3, 2, 3}, {1, 3, 1, 1}, false},     // run 6, n = 36
      {{2, 3, 1, 2}, {1, 3, 1, 1}, false},     // run 2, n = 12
      {{2, 6, 4, 4}, {6, 1, 1}, true},         // [C, 1, 1] under rank 4
      {{4, 7, 8}, {1, 7, 1}, true},            // rank 3
      {{4, 7, 5}, {1, 7, 1}, false},           // run 5
      {{4, 7, 8}, {7, 1}, true},               // [C, 1] under rank 3
      {{3, 5, 6, 4}, {1, 5, 6, 1}, true},      // a block of two axes, run 4, size 30
      {{3, 5, 6, 2}, {1, 5, 6, 1}, false},     // the same block, run 2
      {{2, 3, 5, 4, 4}, {3, 5, 1, 1}, true},   // rank 5, block of two, run 16
      {{64, 32, 8, 8}, {1, 32, 1, 1}, true},   // W7_small's second conv layer
      {{1, 3, 4, 8}, {3, 1, 1}, true, false},  // nothing before the block: spread
      {{1, 6}, {6}, true, false},              // the output's words in its order: same
  };
  std::uint32_t seed = 1;
  for (const Case& c : cases) {
    SCOPED_TRACE(str(c.operand) + " under " + str(c.out));
    GraphBuilder b("channel_bias");
    TracingScope scope(b);
    const Tensor x = b.input("x", {DType::f32, c.out});
    const Tensor bias = b.input("bias", {DType::f32, c.operand});
    b.output("y", relu(x + bias));
    const Graph g = b.take();
    const TensorMap in{{"x", random_f32(c.out, ++seed)}, {"bias", random_f32(c.operand, ++seed)}};
    const Outcome o = run_both(ctx, g, in);
    EXPECT_EQ(o.plain, 2u);
    EXPECT_EQ(o.fused, c.fuses ? 1u : 2u);
    EXPECT_EQ(o.channel_hits, c.fuses && c.channel ? 1u : 0u);
    if (ctx->info().timestamps_supported) {
      const std::vector<std::string> want =
          c.fuses ? std::vector<std::string>{"fused(add,relu)"} : std::vector<std::string>{"add", "relu"};
      EXPECT_EQ(o.labels, want);
    }
  }
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

// One run reading several channel operands of different blocks (and one on the left of a sub),
// next to a periodic, a spread and a scalar operand; also under a one-workgroup cap, so every
// invocation loops over many vec4s (grid-stride) and reads each channel operand at many places.
TEST_F(VkTest, FusionReadsSeveralChannelOperandsInOneRun) {
  auto ctx = make_context();
  const Shape s{4, 6, 5, 8};
  GraphBuilder b("channels");
  TracingScope scope(b);
  const Tensor x = b.input("x", {DType::f32, s});
  const Tensor bias = b.input("bias", {DType::f32, {1, 6, 1, 1}});
  const Tensor scale = b.input("scale", {DType::f32, {6, 1, 1}});
  const Tensor plane = b.input("plane", {DType::f32, {1, 6, 5, 1}});
  const Tensor rows = b.input("rows", {DType::f32, {5, 1}});  // a middle axis alone, run 8
  const Tensor w = b.input("w", {DType::f32, {8}});           // periodic
  const Tensor n = b.input("n", {DType::f32, {4, 1, 1, 1}});  // spread
  const Tensor k = b.input("k", {DType::f32, {}});            // scalar
  const Tensor h = relu(scale * (x + bias) - plane);
  b.output("y", ((rows - h) * w + n) * k);
  b.output("h", h);  // stored too: a second output of the run
  const Graph g = b.take();
  const TensorMap in{{"x", random_f32(s, 31)},
                     {"bias", random_f32({1, 6, 1, 1}, 32)},
                     {"scale", random_f32({6, 1, 1}, 33)},
                     {"plane", random_f32({1, 6, 5, 1}, 34)},
                     {"rows", random_f32({5, 1}, 35)},
                     {"w", random_f32({8}, 36)},
                     {"n", random_f32({4, 1, 1, 1}, 37)},
                     {"k", random_f32({}, 38)}};
  for (std::uint32_t cap : {0u, 1u}) {
    SCOPED_TRACE("max_workgroups " + std::to_string(cap));
    const Outcome o = run_both(ctx, g, in, {.max_workgroups = cap});
    EXPECT_EQ(o.plain, 8u);
    EXPECT_EQ(o.fused, 1u);
    EXPECT_EQ(o.channel_hits, 1u);
    const auto has = [&](const std::string& path) {
      return std::find(o.paths.begin(), o.paths.end(), path) != o.paths.end();
    };
    EXPECT_TRUE(has("vulkan/fusion/periodic_operands"));
    EXPECT_TRUE(has("vulkan/fusion/spread_operands"));
    EXPECT_TRUE(has("vulkan/fusion/scalar_operands"));
    EXPECT_TRUE(has("vulkan/fusion/several_outputs"));
  }
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

// The push constants hold 11 channel operands' sizes (fusion.cpp, FusedPush): a chain reading 11
// distinct ones is one dispatch, one reading 12 is cut into two (vulkan/fusion/cut_at_limit), with
// the same bits. The chain starts with a broadcast_to of the first, so every input of the run is a
// channel operand and the 12-input limit does not cut it first. Their sizes differ (3, 12, 4), so
// each must read its own slot of the packed sizes.
TEST_F(VkTest, FusionCutsARunAtElevenChannelOperands) {
  auto ctx = make_context();
  const Shape s{2, 3, 4, 4};
  const std::vector<Shape> shapes = {{1, 3, 1, 1}, {3, 4, 1}, {4, 1}};  // runs 16, 4, 4
  for (int count : {11, 12}) {
    SCOPED_TRACE(std::to_string(count) + " channel operands");
    GraphBuilder b("many_channels");
    TracingScope scope(b);
    TensorMap in;
    std::vector<Tensor> operands;
    for (int j = 0; j < count; ++j) {
      const std::string name = "c" + std::to_string(j);
      const Shape& shape = shapes[static_cast<std::size_t>(j) % shapes.size()];
      operands.push_back(b.input(name, {DType::f32, shape}));
      in[name] = random_f32(shape, 40 + static_cast<std::uint32_t>(j));
    }
    Tensor h = broadcast_to(operands[0], s);
    for (std::size_t j = 1; j < operands.size(); ++j) h = j % 3 == 0 ? h * operands[j] : h + operands[j];
    b.output("y", h);
    const Graph g = b.take();
    const Outcome o = run_both(ctx, g, in);
    EXPECT_EQ(o.plain, static_cast<std::size_t>(count));
    EXPECT_EQ(o.fused, count == 11 ? 1u : 2u);
    const bool cut = std::find(o.paths.begin(), o.paths.end(), "vulkan/fusion/cut_at_limit") != o.paths.end();
    EXPECT_EQ(cut, count == 12);
  }
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

// A conv layer as W7 builds it: the [C] bias reshaped to [1, C, 1, 1] (a node before the run, not
// inside it) and added to the conv's output, then relu: the add and relu are one dispatch, in the
// forward and in the training graph, whose relu backward stays one dispatch with the mean's gradient.
TEST_F(VkTest, AConvLayersBiasAddAndReluAreOneDispatch) {
  auto ctx = make_context();
  if (!ctx->info().timestamps_supported) GTEST_SKIP() << ctx->info().summary() << " has no timestamp queries";
  GraphBuilder b("conv_layer");
  TracingScope scope(b);
  const Tensor x = b.input("x", {DType::f32, {4, 3, 8, 8}});
  const Tensor w = b.param("w", {DType::f32, {8, 3, 3, 3}});
  const Tensor bias = b.param("b", {DType::f32, {8}});
  const Tensor h = relu(conv2d(x, w, {.padding = 1}) + reshape(bias, {1, 8, 1, 1}));
  b.output("loss", mean(h));  // no elementwise op after the relu: the run is the add and relu
  const Graph forward = b.take();
  const Graph grads = differentiate(forward, {.loss = "loss"});
  const TensorMap in{
      {"x", random_f32({4, 3, 8, 8}, 51)}, {"w", random_f32({8, 3, 3, 3}, 52)}, {"b", random_f32({8}, 53)}};
  for (const Graph* g : {&forward, &grads}) {
    SCOPED_TRACE(g == &forward ? "forward" : "training graph");
    const Outcome o = run_both(ctx, *g, in);
    EXPECT_EQ(std::count(o.labels.begin(), o.labels.end(), "fused(add,relu)"), 1) << joined(o.labels);
    EXPECT_EQ(std::count(o.labels.begin(), o.labels.end(), "add"), 0) << joined(o.labels);
    // The relu backward: the mean's gradient spread over the relu's input, then where(x > 0, g, 0).
    if (g == &grads) {
      EXPECT_EQ(std::count(o.labels.begin(), o.labels.end(), "fused(broadcast_to,div,greater,where)"), 1)
          << joined(o.labels);
    }
  }
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

// Without a device: the fused launch names the channel form (path, specialization constant 31: the
// bitmask of channel inputs) and packs each channel input's run and size into the push constants
// (period[k] at byte 36 + 4k, the j-th channel input's size at byte 84 + 4j).
TEST(VkFusionPlan, AChannelOperandIsABitmaskAndPackedPushConstants) {
  GraphBuilder b("plan");
  TracingScope scope(b);
  const Tensor x = b.input("x", {DType::f32, {2, 3, 5, 4}});
  const Tensor w = b.input("w", {DType::f32, {4}});           // input 1: periodic
  const Tensor c = b.input("c", {DType::f32, {1, 3, 1, 1}});  // input 2: channel, run 20, size 3
  const Tensor p = b.input("p", {DType::f32, {3, 5, 1}});     // input 3: channel, run 4, size 15
  b.output("y", relu((x * w + c) - p));
  const Graph g = b.take();
  std::vector<KernelLaunch> launches;
  for (const Node& node : g.nodes())
    launches.push_back(kernel_plan_table()[static_cast<std::size_t>(node.op)](g, node));
  const std::vector<KernelLaunch> fused = fuse_elementwise(g, launches);
  const KernelLaunch& run = fused.back();
  ASSERT_EQ(run.shader, "fused_elementwise");
  EXPECT_EQ(run.label, "fused(mul,add,sub,relu)");
  ASSERT_EQ(run.specialization.size(), 32u);
  EXPECT_EQ(run.specialization[29], 0b0010u) << "periodic inputs";
  EXPECT_EQ(run.specialization[30], 0u) << "spread inputs";
  EXPECT_EQ(run.specialization[31], 0b1100u) << "channel inputs";
  ASSERT_EQ(run.push.size(), 128u);
  const auto word = [&](std::size_t byte) {
    std::uint32_t v = 0;
    for (std::size_t i = 0; i < 4; ++i) v |= std::to_integer<std::uint32_t>(run.push[byte + i]) << (8 * i);
    return v;
  };
  EXPECT_EQ(word(0), 120u);
  EXPECT_EQ(word(36 + 4), 4u) << "the periodic input's size";
  EXPECT_EQ(word(36 + 8), 20u) << "c's run";
  EXPECT_EQ(word(36 + 12), 4u) << "p's run";
  EXPECT_EQ(word(84), 3u) << "c's size";
  EXPECT_EQ(word(84 + 4), 15u) << "p's size";
  const bool named = std::any_of(run.paths.begin(), run.paths.end(), [](const LaunchPath* path) {
    return path->name() == "vulkan/fusion/channel_operands";
  });
  EXPECT_TRUE(named);
}

}  // namespace
}  // namespace tg::vk
