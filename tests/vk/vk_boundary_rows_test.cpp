// Boundary tests of the row kernels (reduce, softmax, softmax_causal, the losses) against the
// oracle, on both sides of every threshold of their launch logic (src/vk/kernels/reduce.cpp,
// softmax.cpp, indexing.cpp, losses.cpp): row modes at lengths 32/33 and 1024/1025 and 127/128 rows;
// the split across workgroups at lengths 8192/8193 (kChunkLength), 255/256 rows (kSplitBelowRows),
// 32/33 chunks per row (the combine's modes), strided and two-axis rows; the losses' one-dispatch
// form at 256/257 rows and 1024/1280 class slices, and their split sums at 8192/8193 and
// 262144/262145 rows. Each test asserts from the dispatch labels that the paths it names ran.
#include <gtest/gtest.h>

#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "support/library.h"
#include "vk_boundary_check.h"
#include "vk_oracle_check.h"
#include "vk_test_support.h"

namespace tg::vk {
namespace {

using testing::BoundaryCheck;
using testing::check_boundaries;
using testing::random_f32;
using testing::random_indices;
using testing::VkTest;

struct Rows {
  std::string name;
  Shape shape;
  std::vector<std::int64_t> axes;  // reduced (the first is the softmax axis)
};

// Every reduce op's row modes and splits: 13 shapes x 6 ops.
TEST_F(VkTest, BoundaryReduceRowModesAndChunks) {
  auto ctx = make_context();
  const std::vector<Rows> rows = {
      {"serial32", {130, 32}, {1}},       {"segments33", {130, 33}, {1}},     {"group127", {127, 33}, {1}},
      {"segments1024", {128, 1024}, {1}}, {"group1025", {128, 1025}, {1}},    {"whole8192", {3, 8192}, {1}},
      {"split8193", {3, 8193}, {1}},      {"split255rows", {255, 8193}, {1}}, {"whole256rows", {256, 8193}, {1}},
      {"parts32", {1, 262144}, {1}},      {"parts33", {1, 262145}, {1}},      {"strided", {8193, 3}, {0}},
      {"two_axes", {4, 3, 4096}, {0, 2}}};
  GraphBuilder b("reduce_boundaries");
  TracingScope scope(b);
  TensorMap in;
  BoundaryCheck check;
  std::uint32_t seed = 10;
  for (const Rows& r : rows) {
    Tensor x = b.input(r.name, {DType::f32, r.shape});
    HostTensor values = random_f32(r.shape, ++seed);
    b.output("sum_" + r.name, sum(x, r.axes));
    b.output("mean_" + r.name, mean(x, r.axes));
    b.output("max_" + r.name, max(x, r.axes));
    b.output("min_" + r.name, min(x, r.axes));
    if (r.axes.size() == 1) {
      b.output("argmax_" + r.name, argmax(x, r.axes[0]));
      b.output("argmin_" + r.name, argmin(x, r.axes[0]));
      check.exact.push_back("argmax_" + r.name);
      check.exact.push_back("argmin_" + r.name);
    }
    in.emplace(r.name, std::move(values));
  }
  const Graph g = b.take();
  // Across chunks: row 1 of split8193 ties its maximum at 100 (chunk 0) and 8192 (chunk 1), the
  // first wins; row 2 has its only NaN in the last chunk (max and the arg-ops pick it). parts33
  // ties its minimum at 5 and in its last slot, and has its maximum in the last chunk.
  auto split = in.at("split8193").mutable_wide();
  split[8193 + 100] = split[8193 + 8192] = 5.0;
  split[2 * 8193 + 8192] = std::numeric_limits<double>::quiet_NaN();
  auto parts = in.at("parts33").mutable_wide();
  parts[5] = parts[262144] = -5.0;
  parts[262140] = 5.0;
  const auto labels = check_boundaries(ctx, g, in, check);
  // split8193, split255rows, whole256rows (sums split past a chunk at any row count), parts32, parts33,
  // strided, two_axes
  EXPECT_EQ(labels.at("sum (chunks)"), 7u);
  EXPECT_EQ(labels.at("argmax (chunks)"), 5u);
  EXPECT_EQ(labels.at("argmin (chunk combine)"), 5u);
  EXPECT_EQ(labels.at("max (row segments)"), 2u);  // segments33, segments1024
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

TEST_F(VkTest, BoundarySoftmaxRowModesAndChunks) {
  auto ctx = make_context();
  const std::vector<Rows> rows = {
      {"serial32", {130, 32}, {1}},       {"segments33", {130, 33}, {1}},     {"group127", {127, 33}, {1}},
      {"segments1024", {128, 1024}, {1}}, {"group1025", {128, 1025}, {1}},    {"whole8192", {3, 8192}, {1}},
      {"split8193", {3, 8193}, {1}},      {"split255rows", {255, 8193}, {1}}, {"whole256rows", {256, 8193}, {1}},
      {"parts33", {1, 262145}, {1}},      {"strided", {8193, 3}, {0}}};
  GraphBuilder b("softmax_boundaries");
  TracingScope scope(b);
  TensorMap in;
  std::uint32_t seed = 40;
  for (const Rows& r : rows) {
    Tensor x = b.input(r.name, {DType::f32, r.shape});
    b.output("softmax_" + r.name, softmax(x, r.axes[0]));
    b.output("log_softmax_" + r.name, log_softmax(x, r.axes[0]));
    in.emplace(r.name, random_f32(r.shape, ++seed));
  }
  // A row around 1000 across two chunks: the maximum must come from every chunk.
  for (std::size_t i = 8193; i < 2 * 8193; ++i) in.at("split8193").mutable_wide()[i] += 1000.0;
  const auto labels = check_boundaries(ctx, b.take(), in);
  EXPECT_EQ(labels.at("softmax (chunk maxima)"), 4u);  // split8193, split255rows, parts33, strided
  EXPECT_EQ(labels.at("log_softmax (chunk sums)"), 4u);
  EXPECT_EQ(labels.at("softmax (chunk outputs)"), 4u);
  EXPECT_EQ(labels.at("softmax (row segments)"), 2u);
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

// softmax_causal's rows are matrix rows (T of them per matrix): never split, since T x T bounds T.
TEST_F(VkTest, BoundarySoftmaxCausalRowModes) {
  auto ctx = make_context();
  const std::vector<std::tuple<std::string, Shape>> cases = {{"serial32", {4, 32, 32}},
                                                             {"segments33", {4, 33, 33}},
                                                             {"group33", {3, 33, 33}},
                                                             {"segments1024", {1, 1024, 1024}},
                                                             {"group1025", {1, 1025, 1025}}};
  GraphBuilder b("softmax_causal_boundaries");
  TracingScope scope(b);
  TensorMap in;
  std::uint32_t seed = 60;
  for (const auto& [name, shape] : cases) {
    b.output(name, softmax_causal(b.input(name, {DType::f32, shape})));
    in.emplace(name, random_f32(shape, ++seed));
  }
  const auto labels = check_boundaries(ctx, b.take(), in);
  EXPECT_EQ(labels.at("softmax_causal (row segments)"), 2u);
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

HostTensor loss_targets(std::int64_t rows, std::int64_t classes, std::uint32_t seed) {
  return random_indices({rows}, classes, seed);
}

TEST_F(VkTest, BoundaryLossesAroundTheirDispatchForms) {
  auto ctx = make_context();
  struct Case {
    std::string name;
    std::int64_t rows, classes;
  };
  const std::vector<Case> cases = {{"serial32", 300, 32},     {"group33", 300, 33},      {"one256", 256, 5},
                                   {"two257", 257, 5},        {"slices1024", 256, 1024}, {"slices1280", 256, 1025},
                                   {"partials8192", 8192, 3}, {"split8193", 8193, 3},    {"parts32", 262144, 2},
                                   {"parts33", 262145, 2}};
  GraphBuilder b("loss_boundaries");
  TracingScope scope(b);
  TensorMap in;
  std::uint32_t seed = 80;
  for (const Case& c : cases) {
    Tensor x = b.input(c.name + "_x", {DType::f32, {c.rows, c.classes}});
    Tensor t = b.input(c.name + "_t", {DType::i32, {c.rows}});
    b.output(c.name + "_sum", cross_entropy(x, t, {.reduction = Reduction::sum}));
    b.output(c.name + "_mean", cross_entropy(x, t, {.reduction = Reduction::mean}));
    b.output(c.name + "_nll", nll_loss(x, t, {.reduction = Reduction::mean}));
    in.emplace(c.name + "_x", random_f32({c.rows, c.classes}, ++seed));
    in.emplace(c.name + "_t", loss_targets(c.rows, c.classes, ++seed));
  }
  b.output("none", cross_entropy(b.input("none_x", {DType::f32, {300, 40}}), b.input("none_t", {DType::i32, {300}}),
                                 {.reduction = Reduction::none}));
  in.emplace("none_x", random_f32({300, 40}, 99));
  in.emplace("none_t", loss_targets(300, 40, 100));
  const auto labels = check_boundaries(ctx, b.take(), in);
  // Row losses across the grid first: every case above 256 rows, and slices1280 (cross_entropy's
  // sum and mean; nll_loss's rows are serial, so slices1280 keeps its one dispatch there).
  EXPECT_EQ(labels.at("cross_entropy (rows)"), 2u * 8);
  EXPECT_EQ(labels.at("nll_loss (rows)"), 7u);
  // Then one workgroup adds them up to 8192 rows (serial32, group33, two257, slices1280,
  // partials8192), a split sum past that (split8193, parts32, parts33).
  EXPECT_EQ(labels.at("cross_entropy (mean)"), 5u);
  EXPECT_EQ(labels.at("cross_entropy (sum) (chunks)"), 3u);
  EXPECT_EQ(labels.at("cross_entropy (mean) (chunk combine)"), 3u);
  EXPECT_EQ(labels.at("nll_loss (mean) (chunks)"), 3u);
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

}  // namespace
}  // namespace tg::vk
