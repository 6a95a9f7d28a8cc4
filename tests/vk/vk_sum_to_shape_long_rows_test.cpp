// sum_to_shape over many contiguous rows longer than one 256-term block (staged = 5, "contiguous
// long rows": LayerNorm's row sums over a width of 768): a workgroup stages 16 / blocks whole rows
// in shared memory, one invocation adds each block, one each row's block partials. It must equal
// the f32 interpreter bit for bit (sign of zero included), so the inputs mix magnitudes until the
// summation order shows in the bits (checked: a plain left-to-right sum differs). Both sides of
// every threshold: 256/257 terms (mode 3 / mode 5), the upper bound 4096/4097 (mode 5 / a
// workgroup per row), rows per workgroup from 8 (257 terms) down to 1 (4096), fewer rows than a
// workgroup takes and a ragged last group, lengths that are and are not multiples of 256, a 3-D
// [B, T, C] -> [B, T, 1]. Each asserts from the dispatch labels which path ran. Past 65535
// workgroups (524281 rows of 257 terms, 0.5 GB) is too large for a lavapipe run: only planned.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "support/library.h"
#include "tensorgrad/ir/ops/ids/layout.h"
#include "tensorgrad/vk/executor.h"
#include "vk/kernels/kernels.h"
#include "vk_oracle_check.h"
#include "vk_test_support.h"

namespace tg::vk {
namespace {

using testing::VkTest;

constexpr char kLongRows[] = "sum_to_shape (contiguous long rows)";

// Values of magnitudes 2^0 .. 2^20 and both signs: the partial sums round, so another grouping
// or order of the additions gives other bits.
std::vector<float> rounding_values(std::int64_t n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> unit(-1.f, 1.f);
  std::uniform_int_distribution<int> exponent(0, 20);
  std::vector<float> v(static_cast<std::size_t>(n));
  for (float& x : v) x = std::ldexp(unit(rng), exponent(rng));
  return v;
}

// f32 bits, with every NaN alike (the payload is not part of the contract).
std::uint32_t bits_of(double v) {
  return std::isnan(v) ? 0x7fc00000u : std::bit_cast<std::uint32_t>(static_cast<float>(v));
}

// Runs g with guards and timestamps; every output must carry the f32 interpreter's bits, again on a
// replay. Returns how many dispatches carry each label.
std::map<std::string, std::size_t> check_bits(const std::shared_ptr<Context>& ctx, const Graph& g,
                                              const TensorMap& in) {
  const TensorMap want = interpret(g, in, {.compute = ComputeType::f32}).outputs;
  Program program(ctx, g, {.guard_bytes = 64, .timestamps = true});
  for (int run = 0; run < 2; ++run) {
    const TensorMap got = program.run(in);
    for (const auto& [name, w] : want) {
      const HostTensor& v = got.at(name);
      EXPECT_EQ(v.type, w.type) << name;
      if (v.size() != w.size()) continue;
      std::size_t differ = 0;
      for (std::size_t i = 0; i < w.size(); ++i) {
        if (bits_of(v.at(i)) == bits_of(w.at(i))) continue;
        if (++differ <= 3) ADD_FAILURE() << name << "[" << i << "]: Vulkan " << v.at(i) << ", f32 " << w.at(i);
      }
      EXPECT_EQ(differ, 0u) << name << " (run " << run << "): elements differing from the f32 interpreter";
    }
  }
  EXPECT_TRUE(program.check_guards().empty()) << testing::join_lines(program.check_guards());
  std::map<std::string, std::size_t> labels;
  for (const DispatchTiming& t : program.timings()) ++labels[t.op];
  return labels;
}

TEST_F(VkTest, SumToShapeLongRowsEqualTheF32InterpreterBitForBit) {
  auto ctx = make_context();
  // The workgroup per long output GPUs take (CPU devices take block partials: vk_long_sums_test.cpp).
  const ScopedLongSumsForTesting gpu_sums(LaunchThresholds::LongSums::workgroup_per_output);
  // name, input shape, rows per workgroup in mode 5 (0: another mode).
  const std::vector<std::tuple<std::string, Shape, std::int64_t>> cases = {
      {"len256", {1025, 256}, 0},    // mode 3, the longest rows it takes
      {"len257", {1025, 257}, 8},    // 1025 rows: a last group of 1
      {"len257_few", {7, 257}, 8},   // fewer rows than a workgroup takes
      {"len768_few", {3, 768}, 5},   // an exact multiple of 256, 3 < 5 rows
      {"len768", {4, 129, 768}, 5},  // [B, T, C] -> [B, T, 1], 516 rows: a last group of 1
      {"len773", {3, 347, 773}, 4},  // 768 + 5: a last block of 5 terms, 1041 rows
      {"len2048", {7, 2048}, 2},     // 8 blocks a row
      {"len4096", {5, 4096}, 1},     // the upper bound: one row a workgroup
      {"len4097", {3, 4097}, 0},     // past it: a workgroup per row, in global memory
      {"w6", {8, 1024, 768}, 5}};    // W6's LayerNorm row sums
  GraphBuilder b("sum_to_shape_long_rows");
  TracingScope scope(b);
  TensorMap in;
  std::uint32_t seed = 300;
  std::size_t long_rows = 0;
  for (const auto& [name, shape, rows_per_group] : cases) {
    Shape to = shape;
    to.back() = 1;
    b.output(name, sum_to_shape(b.input(name, {DType::f32, shape}), to));
    std::vector<float> v = rounding_values(num_elements(shape), ++seed);
    const std::int64_t len = shape.back();
    const auto row = [&](std::int64_t r) { return v.begin() + r * len; };
    // Row 0: -0.0 only (sums start from +0.0, so +0.0); row 1: a NaN in its last block; row 2:
    // +-0.0 mixed with a value that cancels.
    std::fill(row(0), row(1), -0.0f);
    row(1)[len - 1] = std::numeric_limits<float>::quiet_NaN();
    std::fill(row(2), row(3), -0.0f);
    row(2)[3] = 1.5f;
    row(2)[len - 1] = -1.5f;
    in.emplace(name, HostTensor::f32(shape, v));
    long_rows += rows_per_group > 0 ? 1 : 0;
  }
  const Graph g = b.take();

  // The inputs tell orders apart: a left-to-right sum of a row (no blocks) differs from the
  // interpreter's bits in most rows.
  const TensorMap want = interpret(g, in, {.compute = ComputeType::f32}).outputs;
  const HostTensor& x = in.at("len773");
  std::size_t order_shows = 0;
  for (std::int64_t r = 3; r < 3 * 347; ++r) {
    float plain = 0.f;
    for (std::int64_t k = 0; k < 773; ++k) plain += static_cast<float>(x.at(static_cast<std::size_t>(r * 773 + k)));
    order_shows += bits_of(plain) != bits_of(want.at("len773").at(static_cast<std::size_t>(r))) ? 1 : 0;
  }
  EXPECT_GT(order_shows, 500u);
  EXPECT_TRUE(std::isnan(want.at("len773").at(1)));
  EXPECT_FALSE(std::signbit(want.at("len773").at(0)));

  const auto labels = check_bits(ctx, g, in);
  EXPECT_EQ(labels.at(kLongRows), long_rows);
  EXPECT_EQ(labels.at("sum_to_shape (contiguous rows)"), 1u);  // len256
  EXPECT_EQ(labels.at("sum_to_shape"), 1u);                    // len4097
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

// Plans sum_to_shape of a [rows, len] input to [rows, 1] (no device, no data).
KernelLaunch plan_rows(std::int64_t rows, std::int64_t len) {
  GraphBuilder b("plan");
  const std::vector<Tensor> x{b.input("x", {DType::f32, {rows, len}})};
  b.output("y", b.emit(op::SumToShape, x, {{"shape", std::vector<std::int64_t>{rows, 1}}},
                       SourceLoc{"vk_sum_to_shape_long_rows_test", 1, 0}));
  const Graph g = b.take();
  return kernel_plan_table()[static_cast<std::size_t>(op::SumToShape)](g, g.nodes().back());
}

// The workgroups mode 5 launches (16 / blocks rows each), and its loop passes where the executor's
// 65535-workgroup cap makes each workgroup take a second group of rows.
TEST(VkSumToShapeLongRows, PlansRowsPerWorkgroupAndLoopPasses) {
  for (const auto& [len, rows_per_group] : std::vector<std::pair<std::int64_t, std::uint64_t>>{
           {257, 8}, {512, 8}, {513, 5}, {768, 5}, {773, 4}, {1024, 4}, {2048, 2}, {2304, 1}, {4096, 1}}) {
    const KernelLaunch launch = plan_rows(1000, len);
    EXPECT_EQ(launch.label, kLongRows) << len;
    EXPECT_EQ(launch.items, (1000 + rows_per_group - 1) / rows_per_group * 256) << len;
    EXPECT_TRUE(launch.then.empty()) << len;
  }
  EXPECT_NE(plan_rows(1000, 256).label, kLongRows);
  EXPECT_NE(plan_rows(1000, 4097).label, kLongRows);
  const KernelLaunch one_group = plan_rows(std::int64_t{65535} * 8, 257);
  const KernelLaunch two_groups = plan_rows(std::int64_t{65535} * 8 + 1, 257);
  EXPECT_EQ(two_groups.label, kLongRows);
  EXPECT_EQ(one_group.loop_passes, plan_rows(1000, 257).loop_passes);
  EXPECT_GT(two_groups.loop_passes, one_group.loop_passes);
  EXPECT_LE(two_groups.loop_passes, kLoopBudget);
  // The largest rows of the mode at 2^25 elements (what one lavapipe value holds).
  EXPECT_LE(plan_rows(8192, 4096).loop_passes, kLoopBudget);
}

}  // namespace
}  // namespace tg::vk
