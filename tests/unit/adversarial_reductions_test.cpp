// Adversarial value placement (tests/support/adversarial_values.h) on both interpreters: every
// reduction-like op at lengths around each split its interpreter kernel declares (sum tree leaves,
// blocks of the split slice, inner tiles, vector lanes, the losses' summation blocks, matmul's
// depth block, sum_to_shape's block), with the decisive value at every block edge and in the tail,
// checked against a plain serial loop (tests/support/adversarial_cases.h), not against the other
// interpreter: the f64 oracle and the f32 interpreter share their kernels' templates, so a split
// bug would be in both. Integer patterns and selections (max, min, arg-reductions) are exact.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <functional>
#include <string>
#include <vector>

#include "support/adversarial_cases.h"

namespace tg::testing {
namespace {

constexpr std::array<ComputeType, 2> kComputes{ComputeType::f32, ComputeType::f64};

Real eps_of(ComputeType compute) {
  return compute == ComputeType::f32 ? Real(std::numeric_limits<float>::epsilon())
                                     : Real(std::numeric_limits<double>::epsilon());
}

// Runs every case the sweep makes on both interpreters; fails with the first few misses.
class Sweep {
 public:
  void run(const AdversarialCase& c) {
    for (const ComputeType compute : kComputes) {
      ++runs_;
      const std::string miss =
          check_outputs(c, interpret(c.graph, c.inputs, {.compute = compute}).outputs, eps_of(compute));
      if (!miss.empty() && misses_.size() < 5)
        misses_.push_back((compute == ComputeType::f32 ? "interp_f32: " : "interp_f64: ") + miss);
      if (!miss.empty()) ++failed_;
    }
  }
  // Every pattern at every position (small_integers, which places nothing, once).
  void run_patterns(const std::vector<std::int64_t>& positions,
                    const std::function<AdversarialCase(Pattern, std::int64_t)>& make) {
    for (const Pattern p : kAllPatterns) {
      if (p == Pattern::small_integers) {
        run(make(p, 0));
        continue;
      }
      for (const std::int64_t at : positions) run(make(p, at));
    }
  }
  void expect_all_passed() const {
    std::string text;
    for (const std::string& m : misses_) text += "\n  " + m;
    EXPECT_EQ(failed_, 0) << failed_ << " of " << runs_ << " runs missed; the first:" << text;
    EXPECT_GT(runs_, 0);
  }

 private:
  int runs_ = 0, failed_ = 0;
  std::vector<std::string> misses_;
};

// reduce.cpp: sum tree leaves of 8, tiles of 256 outputs, blocks of 4096 terms once a contiguous
// slice reaches 32768 terms (with at most 8 outputs).
constexpr std::array<std::int64_t, 4> kReduceSplits{8, 256, 4096, 32768};

TEST(AdversarialReductions, SumMeanMaxMinArgAtEveryBlockEdge) {
  Sweep sweep;
  for (const std::int64_t n : lengths_around(kReduceSplits)) {
    const std::vector<std::int64_t> at = split_positions(n, kReduceSplits);
    std::vector<std::pair<Shape, std::size_t>> layouts{{{1, n}, 1}, {{3, n}, 1}, {{n, 3}, 0}};
    if (n <= 513) layouts.push_back({{n, 257}, 0});  // several tiles of outputs
    for (const auto& layout : layouts) {
      sweep.run_patterns(at,
                         [&](Pattern p, std::int64_t pos) { return reduce_case(layout.first, layout.second, p, pos); });
    }
  }
  sweep.expect_all_passed();
}

// softmax.cpp: f32 rows in vectors of 8 lanes, tiles of 256 rows along a leading axis.
constexpr std::array<std::int64_t, 3> kSoftmaxSplits{8, 32, 256};

TEST(AdversarialReductions, SoftmaxAndLogSoftmaxAtEveryLaneAndTileEdge) {
  Sweep sweep;
  for (const std::int64_t n : lengths_around(kSoftmaxSplits)) {
    const std::vector<std::int64_t> at = split_positions(n, kSoftmaxSplits);
    std::vector<std::pair<Shape, std::size_t>> layouts{{{3, n}, 1}, {{n, 3}, 0}};
    if (n <= 257) layouts.push_back({{n, 257}, 0});
    for (const auto& layout : layouts) {
      sweep.run_patterns(
          at, [&](Pattern p, std::int64_t pos) { return softmax_case(layout.first, layout.second, p, pos); });
    }
  }
  sweep.expect_all_passed();
}

TEST(AdversarialReductions, LossesAtEverySummationBlockAndClassEdge) {
  Sweep sweep;
  // Per-position losses add in blocks of 4096 (deterministic_sum); tasks take 4096 / C positions.
  constexpr std::array<std::int64_t, 2> kRowSplits{4096 / 3, 4096};
  for (const std::int64_t rows : lengths_around(std::array<std::int64_t, 1>{4096})) {
    sweep.run_patterns(split_positions(rows, kRowSplits),
                       [&](Pattern p, std::int64_t pos) { return loss_case(rows, 3, true, p, pos); });
  }
  // A row's classes: the row maximum and the sum of exponentials, in index order.
  constexpr std::array<std::int64_t, 2> kClassSplits{8, 32};
  for (const std::int64_t classes : lengths_around(kClassSplits)) {
    sweep.run_patterns(split_positions(classes, kClassSplits),
                       [&](Pattern p, std::int64_t pos) { return loss_case(5, classes, false, p, pos); });
  }
  sweep.expect_all_passed();
}

TEST(AdversarialReductions, SumToShapeAtEveryBlockEdge) {
  Sweep sweep;
  constexpr std::array<std::int64_t, 1> kBlock{256};  // layout.cpp's summation block
  for (const std::int64_t n : lengths_around(kBlock)) {
    for (const bool leading : {true, false}) {
      sweep.run_patterns(split_positions(n, kBlock),
                         [&](Pattern p, std::int64_t pos) { return sum_to_shape_case(n, 3, leading, p, pos); });
    }
  }
  sweep.expect_all_passed();
}

TEST(AdversarialReductions, ScatterAddAtEveryTileEdge) {
  Sweep sweep;
  // indexing.cpp: tiles of 256 inner positions; updates a land at a % 5.
  for (const std::int64_t width : {255, 256, 257}) {
    for (const std::int64_t length : {7, 513}) {
      sweep.run_patterns(split_positions(length, std::array<std::int64_t, 2>{5, 256}),
                         [&](Pattern p, std::int64_t pos) { return scatter_add_case(length, width, 5, p, pos); });
    }
  }
  sweep.expect_all_passed();
}

TEST(AdversarialReductions, MatmulAtEveryDepthBlockEdge) {
  Sweep sweep;
  // matmul.cpp: depth blocks of 128, tasks of 64 rows x 128 columns, micro tiles of 4 rows.
  constexpr std::array<std::int64_t, 3> kDepthSplits{4, 8, 128};
  for (const std::int64_t k : lengths_around(std::array<std::int64_t, 1>{128})) {
    for (const auto& mn : std::array<std::pair<std::int64_t, std::int64_t>, 2>{{{5, 9}, {65, 131}}}) {
      sweep.run_patterns(split_positions(k, kDepthSplits),
                         [&](Pattern p, std::int64_t pos) { return matmul_case(mn.first, k, mn.second, p, pos); });
    }
  }
  sweep.expect_all_passed();
}

TEST(AdversarialReductions, Conv2dAtEveryTapEdge) {
  Sweep sweep;
  // Taps of a 4x4 kernel: 16 per channel; 4096 taps is the Vulkan kernel's serial limit.
  constexpr std::array<std::int64_t, 2> kTapSplits{16, 4096};
  for (const std::int64_t channels : {255, 256, 257}) {
    sweep.run_patterns(split_positions(channels * 16, kTapSplits),
                       [&](Pattern p, std::int64_t pos) { return conv2d_case(channels, 4, 5, p, pos); });
  }
  sweep.expect_all_passed();
}

// The generator itself: positions hit both edges of each block and the tail, sizes cross each split.
TEST(AdversarialValues, SplitPositionsAndLengths) {
  EXPECT_EQ(split_positions(10, std::array<std::int64_t, 1>{4}), (std::vector<std::int64_t>{0, 3, 4, 7, 8, 9}));
  EXPECT_EQ(split_positions(5, std::array<std::int64_t, 1>{8}), (std::vector<std::int64_t>{0, 4}));
  EXPECT_EQ(lengths_around(std::array<std::int64_t, 1>{8}), (std::vector<std::int64_t>{7, 8, 9, 17}));
  const std::vector<float> v = adversarial_values({2, 5, 3}, Pattern::huge_among_small, 4);
  for (std::int64_t o = 0; o < 2; ++o)
    for (std::int64_t i = 0; i < 3; ++i) EXPECT_EQ(v[static_cast<std::size_t>((o * 5 + 4) * 3 + i)], kHugeValue);
}

TEST(AdversarialValues, PlacementKeepsTheDrawnValues) {
  std::vector<double> values(60);
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<double>((i * 37) % 60) / 7.0;
  std::vector<double> placed = values;
  place_extremes_at_splits(placed, {4, 15}, std::array<std::int64_t, 1>{8}, 4);
  std::vector<double> a = values, b = placed;
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  EXPECT_EQ(a, b);  // a permutation: the domain's draw, no value made up
  EXPECT_NE(placed, values);
}

}  // namespace
}  // namespace tg::testing
