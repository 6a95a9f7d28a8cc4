// Adversarial value placement (tests/support/adversarial_values.h) on Vulkan: every reduction-like
// op at lengths just around the thresholds its Vulkan kernel declares (src/vk/kernels/*.cpp: rows of
// at most 32 terms per invocation, 32-lane segments up to 1024, 256-lane workgroups, chunks of 8192
// split across workgroups and combined, the losses' class slices, sum_to_shape's blocks, split-K,
// conv2d's serial taps), with the decisive value at each block, lane-stride and chunk edge and in
// the tail, checked against the plain serial loops of tests/support/adversarial_cases.h (which the
// f64 oracle meets exactly: tests/unit/adversarial_reductions_test.cpp). Long rows also run with
// one workgroup (every grid-stride loop's remainder) and under the small launch thresholds (the
// workgroup combine of split rows). One Program per graph, run once per placement: lavapipe is slow.
#include <gtest/gtest.h>

#include <array>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "support/adversarial_cases.h"
#include "tensorgrad/vk/executor.h"
#include "vk/kernels/kernels.h"
#include "vk_test_support.h"

namespace tg::vk {
namespace {

using namespace tg::testing;  // NOLINT(google-build-using-namespace): the case builders

class VkAdversarial : public testing::VkTest {
 protected:
  // Every pattern at every position on one Program built from the first case (small_integers,
  // which places nothing, once); counts the misses and keeps the first few.
  void sweep(const std::vector<std::int64_t>& positions,
             const std::function<AdversarialCase(Pattern, std::int64_t)>& make, ProgramOptions options = {}) {
    if (!ctx_) ctx_ = make_context();
    std::optional<Program> program;
    for (const Pattern p : kAllPatterns) {
      for (const std::int64_t at : positions) {
        const AdversarialCase c = make(p, p == Pattern::small_integers ? 0 : at);
        if (!program) program.emplace(ctx_, c.graph, options);
        ++runs_;
        const std::string miss = check_outputs(c, program->run(c.inputs), Real(std::numeric_limits<float>::epsilon()));
        if (!miss.empty() && ++failed_ <= 5) misses_ += "\n  " + miss;
        if (p == Pattern::small_integers) break;
      }
    }
  }
  void expect_all_passed() {
    EXPECT_EQ(failed_, 0) << failed_ << " of " << runs_ << " runs missed; the first:" << misses_;
    EXPECT_GT(runs_, 0);
    if (ctx_) {
      EXPECT_NO_VALIDATION_MESSAGES(ctx_);
    }
  }

 private:
  std::shared_ptr<Context> ctx_;
  int runs_ = 0, failed_ = 0;
  std::string misses_;
};

// Row modes: one invocation up to 32 terms, 32-lane segments (at least 128 rows) up to 1024,
// 256-lane workgroups; chunks of 8192 past that (sums always, others when few rows or past 65536).
constexpr std::array<std::int64_t, 3> kRowSplits{32, 256, kChunkLength};

std::uint64_t hits(const std::string& name) {
  for (const LaunchPathCount& p : launch_path_counts())
    if (p.name() == name) return p.hits;
  return 0;
}

TEST_F(VkAdversarial, ReductionsAtEveryLaneAndChunkEdge) {
  // The sweep must reach every row mode and both halves of a split row for each kind of fold.
  std::vector<std::string> paths;
  for (const char* op : {"sum", "max", "argmin"}) {
    for (const char* path : {"row_per_invocation", "row_segments", "workgroup_per_row", "split_chunks",
                             "split_combine_serial", "split_combine_workgroup"})
      paths.push_back(std::string("vulkan/") + op + "/" + path);
  }
  std::vector<std::uint64_t> before;
  for (const std::string& path : paths) before.push_back(hits(path));
  for (const std::int64_t n : std::array<std::int64_t, 6>{31, 33, 257, 1025, kChunkLength + 1, kMaxUnsplitLength + 1}) {
    const std::vector<std::int64_t> at = split_positions(n, kRowSplits);
    sweep(at, [&](Pattern p, std::int64_t pos) { return reduce_case({1, n}, 1, p, pos); });
    if (n <= 1025) {
      sweep(at, [&](Pattern p, std::int64_t pos) { return reduce_case({n, 3}, 0, p, pos); });
      sweep(at, [&](Pattern p, std::int64_t pos) { return reduce_case({130, n}, 1, p, pos); });  // segments
    }
  }
  // Split rows combined by a workgroup (small thresholds), and every grid-stride remainder.
  {
    const ScopedSmallLaunchThresholdsForTesting small;
    const std::int64_t n = 2 * kChunkLength + 1;
    sweep(split_positions(n, kRowSplits), [&](Pattern p, std::int64_t pos) { return reduce_case({1, n}, 1, p, pos); });
  }
  ProgramOptions one_group;
  one_group.max_workgroups = 1;
  for (const std::int64_t n : std::array<std::int64_t, 2>{257, kChunkLength + 1}) {
    sweep(
        split_positions(n, kRowSplits),
        [&](Pattern p, std::int64_t pos) {
          return reduce_case({3, n}, 1, p, pos);
        },
        one_group);
  }
  expect_all_passed();
  for (std::size_t i = 0; i < paths.size(); ++i) EXPECT_GT(hits(paths[i]), before[i]) << paths[i] << " not reached";
}

TEST_F(VkAdversarial, SoftmaxAtEveryLaneEdge) {
  for (const std::int64_t n : {31, 33, 257, 1025}) {
    const std::vector<std::int64_t> at = split_positions(n, kRowSplits);
    sweep(at, [&](Pattern p, std::int64_t pos) { return softmax_case({2, n}, 1, p, pos); });
    sweep(at, [&](Pattern p, std::int64_t pos) { return softmax_case({n, 3}, 0, p, pos); });
  }
  // A row past 8192 terms split into chunk maxima, chunk sums and outputs (softmax_split.comp).
  const std::int64_t n = kChunkLength + 1;
  sweep(split_positions(n, kRowSplits), [&](Pattern p, std::int64_t pos) { return softmax_case({1, n}, 1, p, pos); });
  expect_all_passed();
}

TEST_F(VkAdversarial, LossesAtEveryRowAndClassEdge) {
  // losses.cpp: classes serially up to 32, else 256-class slices per workgroup; the sum of the
  // per-position losses in one dispatch up to 256 rows.
  for (const std::int64_t rows : {255, 257}) {
    sweep(split_positions(rows, std::array<std::int64_t, 1>{32}),
          [&](Pattern p, std::int64_t pos) { return loss_case(rows, 3, true, p, pos); });
  }
  for (const std::int64_t classes : {31, 33, 257}) {
    sweep(split_positions(classes, std::array<std::int64_t, 2>{32, 256}),
          [&](Pattern p, std::int64_t pos) { return loss_case(3, classes, false, p, pos); });
  }
  expect_all_passed();
}

TEST_F(VkAdversarial, SumToShapeScatterAddAtEveryBlockEdge) {
  constexpr std::array<std::int64_t, 2> kBlocks{32, 256};  // layout.cpp: staged rows from 32, blocks of 256
  for (const std::int64_t n : {33, 257, 513}) {
    for (const bool leading : {true, false}) {
      sweep(split_positions(n, kBlocks),
            [&](Pattern p, std::int64_t pos) { return sum_to_shape_case(n, 3, leading, p, pos); });
    }
  }
  // indexing.cpp: a serial loop over up to 256 updates per output, a workgroup past that, chunks
  // across workgroups for long columns.
  for (const std::int64_t length : std::array<std::int64_t, 3>{255, 257, kChunkLength + 1}) {
    sweep(split_positions(length, kRowSplits),
          [&](Pattern p, std::int64_t pos) { return scatter_add_case(length, 3, 1, p, pos); });
  }
  expect_all_passed();
}

TEST_F(VkAdversarial, MatmulKAndConvTapsAtEveryRangeEdge) {
  // matmul.cpp: split-K over ranges, multiples of 16, from 64 terms; few tiles split from 256.
  constexpr std::array<std::int64_t, 3> kKSplits{16, 64, 256};
  for (const std::int64_t k : {17, 257, 1025}) {
    sweep(split_positions(k, kKSplits), [&](Pattern p, std::int64_t pos) { return matmul_case(5, k, 9, p, pos); });
  }
  // image.cpp: conv2d serially up to 4096 terms an output (a 4x4 kernel: 16 taps a channel).
  for (const std::int64_t channels : {255, 257}) {
    sweep(split_positions(channels * 16, std::array<std::int64_t, 2>{16, 4096}),
          [&](Pattern p, std::int64_t pos) { return conv2d_case(channels, 4, 5, p, pos); });
  }
  expect_all_passed();
}

}  // namespace
}  // namespace tg::vk
