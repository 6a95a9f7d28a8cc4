// max_pool2d_grad's window-cell mode (shaders/max_pool2d_grad.comp mode 2, src/vk/kernels/image.cpp):
// windows that do not overlap (stride >= kernel) each write their cell of the input plane, which
// must give the gather's bits: 0.0 + g at the window's argmax (so a -0 gradient lands as +0 and a NaN
// stays NaN), +0 everywhere else, the gaps between windows included. Each test runs its cases in one
// graph against the f64 oracle, exactly and with the sign of zero, and asserts which launch path
// each case takes, on both sides of each threshold: stride kernel - 1 (the gather) against kernel and
// above (cells), padding, planes that are not multiples of the stride (the last cell takes the rest),
// 1x1 planes, one window over the whole plane, ties, NaN and infinities inside windows, a grid-stride
// loop under a workgroup cap, and the cell size past which the gather runs (lavapipe's loop limit).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "support/library.h"
#include "tensorgrad/ir/launch_paths.h"
#include "tensorgrad/ir/ops/ids/image.h"
#include "tensorgrad/vk/executor.h"
#include "vk/kernels/kernels.h"
#include "vk_oracle_check.h"
#include "vk_test_support.h"

namespace tg::vk {
namespace {

using testing::check_against_oracle;
using testing::VkTest;

const std::string kCells = "vulkan/max_pool2d_grad/window_cells";
const std::string kSerial = "vulkan/max_pool2d_grad/serial";
const std::string kWorkgroup = "vulkan/max_pool2d_grad/workgroup_per_output";

struct PoolCase {
  std::string name;
  Shape x;  // [N, C, H, W]
  std::int64_t kernel, stride, padding;
  std::string path;  // the launch path the planner must pick at full thresholds
};

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

// Small integers (ties in most windows) with NaN, both zeros and both infinities among them.
HostTensor tricky_x(const Shape& shape, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> pick(0, 19);
  std::vector<float> v(static_cast<std::size_t>(num_elements(shape)));
  for (float& e : v) {
    const int r = pick(rng);
    e = r == 0 ? kNaN : r == 1 ? -0.0f : r == 2 ? 0.0f : r == 3 ? -kInf : r == 4 ? kInf : static_cast<float>(r % 5 - 2);
  }
  return HostTensor::f32(shape, v);
}

// Gradients: small integers, many -0 (which must come out +0), NaN and infinities.
HostTensor tricky_g(const Shape& shape, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> pick(0, 15);
  std::vector<float> v(static_cast<std::size_t>(num_elements(shape)));
  for (float& e : v) {
    const int r = pick(rng);
    e = r < 4 ? -0.0f : r == 4 ? kNaN : r == 5 ? -kInf : r == 6 ? kInf : static_cast<float>(r % 7 - 3);
  }
  return HostTensor::f32(shape, v);
}

std::int64_t windows(std::int64_t extent, std::int64_t k, std::int64_t s, std::int64_t p) {
  return (extent + 2 * p - k) / s + 1;
}

struct Built {
  Graph graph;
  TensorMap in;
};

// One graph holding every case's max_pool2d_grad (output = the case's name).
Built build(const std::vector<PoolCase>& cases, std::uint32_t seed) {
  GraphBuilder b("pool_cells");
  TracingScope scope(b);
  TensorMap in;
  for (const PoolCase& c : cases) {
    const Shape g{c.x[0], c.x[1], windows(c.x[2], c.kernel, c.stride, c.padding),
                  windows(c.x[3], c.kernel, c.stride, c.padding)};
    b.output(c.name, max_pool2d_grad(b.input(c.name + "_x", {DType::f32, c.x}), b.input(c.name + "_g", {DType::f32, g}),
                                     c.kernel, c.stride, c.padding));
    in.emplace(c.name + "_x", tricky_x(c.x, seed++));
    in.emplace(c.name + "_g", tricky_g(g, seed++));
  }
  return {b.take(), std::move(in)};
}

// The launch the planner makes for the node writing output `name`.
KernelLaunch planned(const Graph& g, const std::string& name) {
  const ValueId value = *g.find_output(name);
  for (const Node& node : g.nodes()) {
    if (node.output == value) return kernel_plan_table()[static_cast<std::size_t>(node.op)](g, node);
  }
  ADD_FAILURE() << "no node writes " << name;
  return {};
}

void expect_planned_paths(const Built& built, const std::vector<PoolCase>& cases) {
  for (const PoolCase& c : cases) {
    const KernelLaunch launch = planned(built.graph, c.name);
    ASSERT_FALSE(launch.paths.empty()) << c.name;
    EXPECT_EQ(launch.paths.front()->name(), c.path) << c.name;
  }
}

// max_pool2d_grad's Vulkan path hits while a Program of g is built (paths are hit at recording).
std::map<std::string, std::uint64_t> pool_grad_hits(const std::shared_ptr<Context>& ctx, const Graph& g,
                                                    ProgramOptions options = {}) {
  const auto counts = [] {
    std::map<std::string, std::uint64_t> out;
    for (const LaunchPathCount& p : launch_path_counts())
      if (p.backend == "vulkan" && p.kernel == "max_pool2d_grad") out[p.name()] = p.hits;
    return out;
  };
  const auto before = counts();
  const Program program(ctx, g, options);
  std::map<std::string, std::uint64_t> hits;
  for (const auto& [name, n] : counts()) hits[name] = n - before.at(name);
  return hits;
}

std::size_t count_path(const std::vector<PoolCase>& cases, const std::string& path) {
  return static_cast<std::size_t>(
      std::count_if(cases.begin(), cases.end(), [&](const PoolCase& c) { return c.path == path; }));
}

// Plans, asserts each case's path (planned and recorded), then runs against the oracle bit for bit.
void check_cases(const std::shared_ptr<Context>& ctx, const std::vector<PoolCase>& cases, std::uint32_t seed) {
  const Built built = build(cases, seed);
  expect_planned_paths(built, cases);
  const auto hits = pool_grad_hits(ctx, built.graph);
  for (const std::string& path : {kCells, kSerial, kWorkgroup}) {
    EXPECT_EQ(hits.at(path), count_path(cases, path)) << path;
  }
  check_against_oracle(ctx, built.graph, built.in, {.signed_zeros = true});
}

// Both sides of the overlap threshold, padding, leftover rows and columns, gaps, 1x1 planes and one
// window over the whole plane.
TEST_F(VkTest, PoolCellsOnBothSidesOfOverlapMatchTheOracleBitForBit) {
  auto ctx = make_context();
  const std::vector<PoolCase> cases = {
      {"overlap_k2_s1", {2, 3, 8, 8}, 2, 1, 0, kSerial},
      {"overlap_k3_s2_p1", {2, 3, 9, 10}, 3, 2, 1, kSerial},
      {"overlap_k4_s3_p2", {1, 2, 11, 9}, 4, 3, 2, kSerial},
      {"k2_s2", {2, 3, 8, 8}, 2, 2, 0, kCells},  // the W7 workload's geometry
      {"k3_s3", {2, 3, 9, 12}, 3, 3, 0, kCells},
      {"k4_s4_p2", {1, 2, 11, 9}, 4, 4, 2, kCells},
      {"k3_s3_p1", {2, 2, 10, 11}, 3, 3, 1, kCells},
      {"k2_s2_leftover", {2, 2, 7, 9}, 2, 2, 0, kCells},  // a row and a column after the last window
      {"k3_s3_leftover", {1, 3, 11, 13}, 3, 3, 0, kCells},
      {"k2_s3_gaps", {2, 2, 8, 10}, 2, 3, 0, kCells},
      {"k2_s3_p1_gaps", {1, 3, 7, 8}, 2, 3, 1, kCells},
      {"k3_s5_p1_gaps", {2, 1, 12, 13}, 3, 5, 1, kCells},
      {"k1_s1", {2, 2, 5, 6}, 1, 1, 0, kCells},
      {"k1_s2", {2, 2, 5, 6}, 1, 2, 0, kCells},
      {"one_by_one", {3, 2, 1, 1}, 1, 1, 0, kCells},
      {"one_by_one_s3", {3, 2, 1, 1}, 1, 3, 0, kCells},
      {"one_by_one_padded", {2, 2, 1, 1}, 2, 2, 1, kCells},  // windows of one tap in the padding's corner
      {"whole_plane", {2, 3, 5, 5}, 5, 5, 0, kCells},
      {"whole_plane_padded", {2, 2, 5, 4}, 6, 7, 3, kCells},
      {"huge_stride", {2, 2, 5, 7}, 2, 100, 0, kCells},  // one window at the corner, the rest zeros
  };
  check_cases(ctx, cases, 10);
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

// Every small geometry without overlap: planes of 1-9 rows and columns, kernels 1-4, strides k, k + 1
// and k + 3, every legal padding: the cell partition at every remainder of the stride.
TEST_F(VkTest, PoolCellsEverySmallGeometryMatchesTheOracleBitForBit) {
  auto ctx = make_context();
  std::vector<PoolCase> cases;
  for (std::int64_t k = 1; k <= 4; ++k) {
    for (const std::int64_t s : {k, k + 1, k + 3}) {
      for (std::int64_t p = 0; p <= k / 2; ++p) {
        const std::int64_t lo = std::max<std::int64_t>(1, k - 2 * p);
        for (std::int64_t h = lo; h <= 9; ++h) {
          const std::int64_t w = lo + (h * 5 + k) % (10 - lo);
          cases.push_back({"k" + std::to_string(k) + "s" + std::to_string(s) + "p" + std::to_string(p) + "_" +
                               std::to_string(h) + "x" + std::to_string(w),
                           {1, 2, h, w},
                           k,
                           s,
                           p,
                           kCells});
        }
      }
    }
  }
  check_cases(ctx, cases, 1000);
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

// Against the gather itself, NaN payloads included: windows of 9+ taps run the cells at full
// thresholds and the workgroup gather under the test thresholds (8 compares).
TEST_F(VkTest, PoolCellsRepeatTheGathersBits) {
  auto ctx = make_context();
  const std::vector<PoolCase> cases = {
      {"k3_s3", {2, 3, 9, 11}, 3, 3, 0, kCells},
      {"k3_s4_p1", {2, 2, 10, 13}, 3, 4, 1, kCells},
      {"k4_s4_p2", {1, 3, 11, 9}, 4, 4, 2, kCells},
      {"whole_plane", {2, 2, 5, 5}, 5, 5, 0, kCells},
  };
  const Built built = build(cases, 50);
  expect_planned_paths(built, cases);
  const auto bits = [&](const TensorMap& out, const std::string& name) {
    const auto v = out.at(name).f32_data();
    std::vector<std::uint32_t> words(v.size());
    std::memcpy(words.data(), v.data(), v.size() * sizeof(float));
    return words;
  };
  EXPECT_EQ(pool_grad_hits(ctx, built.graph).at(kCells), cases.size());
  Program cells(ctx, built.graph);
  const TensorMap by_cells = cells.run(built.in);
  const ScopedSmallLaunchThresholdsForTesting small;
  EXPECT_EQ(pool_grad_hits(ctx, built.graph).at(kWorkgroup), cases.size());
  Program gather(ctx, built.graph);
  const TensorMap by_gather = gather.run(built.in);
  for (const PoolCase& c : cases) EXPECT_EQ(bits(by_cells, c.name), bits(by_gather, c.name)) << c.name;
  check_against_oracle(ctx, built.graph, built.in, {.signed_zeros = true, .replay = false, .guards = false});
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

// Many planes (6300 windows, 25 workgroups) under a cap of 1-3 workgroups, so each invocation
// walks many windows of its grid-stride loop, and unlimited.
TEST_F(VkTest, PoolCellsGridStrideUnderAWorkgroupCap) {
  auto ctx = make_context();
  const std::vector<PoolCase> cases = {{"many_planes", {3, 700, 6, 5}, 2, 2, 0, kCells}};
  const Built built = build(cases, 70);
  const InterpResult oracle = interpret(built.graph, built.in, {.compute = ComputeType::f64});
  const HostTensor& want = oracle.outputs.at("many_planes");
  for (const std::uint32_t cap : {0u, 1u, 3u}) {
    SCOPED_TRACE("max_workgroups " + std::to_string(cap));
    EXPECT_EQ(pool_grad_hits(ctx, built.graph, {.max_workgroups = cap}).at(kCells), 1u);
    Program program(ctx, built.graph, {.max_workgroups = cap});
    const HostTensor got = program.run(built.in).at("many_planes");
    std::size_t bad = 0;
    for (std::size_t i = 0; i < want.size(); ++i) {
      const double v = got.at(i), w = want.at(i);
      const bool ok = (std::isnan(v) && std::isnan(w)) || (v == w && std::signbit(v) == std::signbit(w));
      if (!ok && ++bad <= 3) ADD_FAILURE() << "[" << i << "]: Vulkan " << v << ", oracle " << w;
    }
    EXPECT_EQ(bad, 0u);
  }
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

// The cell limit (4096 elements, for lavapipe's loop limit): a 64x64 cell and 4096x1 ones (the
// second holding the row after the last window) take the cells; one more row or column takes the
// gather. The cells' declared loop passes stay far below 65535, and lavapipe computes them right.
TEST_F(VkTest, PoolCellsLoopLimitThreshold) {
  auto ctx = make_context();
  const std::vector<PoolCase> cases = {
      {"cell_64x64", {1, 2, 64, 64}, 64, 64, 0, kCells},
      {"cell_63x64_padded", {1, 2, 63, 64}, 64, 64, 1, kCells},
      {"cell_65x64", {1, 2, 65, 64}, 64, 64, 0, kSerial},
      {"cell_64x65", {1, 2, 64, 65}, 64, 64, 0, kSerial},
      {"column_4096", {1, 2, 4096, 1}, 1, 4096, 0, kCells},
      {"column_4096_and_one", {1, 2, 4097, 1}, 1, 4096, 0, kCells},  // cells of 4096 and 1 rows
      {"column_4097", {1, 2, 4097, 1}, 1, 4097, 0, kSerial},
      {"row_4097", {1, 2, 1, 4097}, 1, 4097, 0, kSerial},
  };
  const Built built = build(cases, 90);
  for (const PoolCase& c : cases) {
    if (c.path == kCells) {
      EXPECT_LE(planned(built.graph, c.name).loop_passes, 30000u) << c.name;
    }
  }
  check_cases(ctx, cases, 90);
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

// No device: the planner's choice. Cells only without overlap and within the cell limit; under the
// test thresholds also only when the window is within the serial compare limit (8), so windows of
// 9 taps take the workgroup gather there.
TEST(VkPoolCells, PlannerPicksCellsOnlyForDisjointWindowsWithinTheLimits) {
  const std::vector<PoolCase> cases = {
      {"overlap", {2, 3, 8, 8}, 2, 1, 0, kSerial}, {"touching", {2, 3, 8, 8}, 2, 2, 0, kCells},
      {"gaps", {2, 3, 8, 8}, 2, 3, 0, kCells},     {"k3_s3", {1, 1, 9, 9}, 3, 3, 0, kCells},
      {"k8_s8", {1, 1, 64, 64}, 8, 8, 0, kCells},  {"big_cell", {1, 1, 4096, 2}, 2, 4096, 0, kSerial},
      {"k2_s2_p1", {1, 1, 7, 7}, 2, 2, 1, kCells},
  };
  const Built built = build(cases, 1);
  expect_planned_paths(built, cases);
  const ScopedSmallLaunchThresholdsForTesting small;
  EXPECT_EQ(planned(built.graph, "touching").paths.front()->name(), kCells);
  EXPECT_EQ(planned(built.graph, "k3_s3").paths.front()->name(), kWorkgroup);
  EXPECT_EQ(planned(built.graph, "overlap").paths.front()->name(), kWorkgroup);  // 4 windows x 4 taps
}

}  // namespace
}  // namespace tg::vk
