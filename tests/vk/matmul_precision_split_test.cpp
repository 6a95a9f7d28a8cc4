// ProgramOptions::matmul_precision split and fast against the f64 oracle, on whatever kernel the
// device routes them to (on lavapipe the portable kernels' emulation, shaders/matmul_split.glsl;
// on a device with bf16 matrix units shaders/matmul_coopmat.comp). The kernels add the part
// products in their own orders, so results are judged by bounds, never bit for bit across kernels:
//  - split within the fp32 matmul tolerance class, as ieee is (both checked): the class bound of
//    tests/vk/vk_matmul_test.cpp (relative to max(1, the largest |value|)) and, so that operands
//    of 1e30 or 1e-30 are judged at their own scale, the same ulps per output relative to
//    sum_k |a_ik b_kj|;
//  - fast within the bound of its products, 3.02 2^-16 |a b| each (docs/vulkan.md, "Matmul
//    precision (ieee, split, fast)"), plus the class, and outside the fp32 class on an input built
//    for it, so the modes provably differ;
//  - ieee with the same bits as a Program with default options.
// Small (64x64) and large (128x128, under ScopedSmallLaunchThresholdsForTesting) tiles, split-K,
// transposed operands, batched and broadcast products, large and small magnitudes, values near
// FLT_MAX, and inf and NaN operands. Each case prints its largest errors (docs figures).
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "support/library.h"
#include "tensorgrad/vk/executor.h"
#include "vk/kernels/kernels.h"
#include "vk/kernels/matmul_units.h"
#include "vk_oracle_check.h"
#include "vk_test_support.h"

namespace tg::vk {
namespace {

using testing::VkTest;

constexpr double kEps = std::numeric_limits<float>::epsilon();
// One fast product's relative error bound (tests/unit/matmul_split_arithmetic_test.cpp derives it).
constexpr double kFastProductBound = 3.02 * 0x1p-16;
// Products below the smallest normal f32 lose relative accuracy in every mode (subnormal steps).
constexpr double kUnderflowSlack = 0x1p-126;

struct Case {
  std::string name;
  Shape a, b;         // the stored inputs
  bool a_t = false;   // the graph reads swap_axes(a, -2, -1)
  bool b_t = false;   // the same for b
  float a_scale = 1;  // the inputs are uniform in [-2, 2) times these
  float b_scale = 1;
  std::size_t dispatches = 0;  // > 0: the ieee Program must record this many (2: split-K)
};

Graph matmul_graph(const Case& c) {
  GraphBuilder builder("matmul_precision");
  TracingScope scope(builder);
  Tensor a = builder.input("a", {DType::f32, c.a});
  Tensor b = builder.input("b", {DType::f32, c.b});
  builder.output("c", matmul(c.a_t ? swap_axes(a, -2, -1) : a, c.b_t ? swap_axes(b, -2, -1) : b));
  return builder.take();
}

HostTensor scaled_random(const Shape& shape, std::uint32_t seed, float scale) {
  const HostTensor t = testing::random_f32(shape, seed);
  std::vector<float> v(t.f32_data().begin(), t.f32_data().end());
  for (float& x : v) x *= scale;
  return HostTensor::f32(shape, std::move(v));
}

HostTensor absolute(const HostTensor& t) {
  std::vector<float> v(t.f32_data().begin(), t.f32_data().end());
  for (float& x : v) x = std::fabs(x);
  return HostTensor::f32(t.type.shape, std::move(v));
}

// One mode's result against the oracle.
struct Judged {
  std::int64_t off_class = 0;    // elements past the class bound
  std::int64_t off_per_sum = 0;  // past `per_sum_factor` * sum |a b| + kUnderflowSlack
  double worst_per_sum = 0;      // the largest |error| / sum |a b|
  double worst_relative = 0;     // the largest |error| / |expected| where |expected| >= 2^-8 sum |a b|
};

struct Oracle {
  HostTensor want;
  HostTensor abs_sum;  // sum_k |a_ik b_kj| per output: the graph on |a|, |b| (exact layout ops)
  double class_tolerance = 0;
  double fp32_factor = 0;  // 4 eps tolerance_ulps(matmul, K)
};

Oracle oracle_of(const Graph& g, const TensorMap& in, std::int64_t k) {
  Oracle o;
  o.want = interpret(g, in, {.compute = ComputeType::f64}).outputs.at("c");
  o.abs_sum = interpret(g, {{"a", absolute(in.at("a"))}, {"b", absolute(in.at("b"))}}, {.compute = ComputeType::f64})
                  .outputs.at("c");
  double scale = 1.0;
  for (const HostTensor* t : {&in.at("a"), &in.at("b"), static_cast<const HostTensor*>(&o.want)})
    for (double v : t->to_f64())
      if (std::isfinite(v)) scale = std::max(scale, std::fabs(v));
  o.fp32_factor = 4.0 * kEps * tolerance_ulps(ToleranceClass::matmul, k);
  o.class_tolerance = o.fp32_factor * scale;
  return o;
}

Judged judge(const HostTensor& got, const Oracle& o, double per_sum_factor) {
  Judged j;
  EXPECT_EQ(got.size(), o.want.size());
  for (std::size_t i = 0; i < o.want.size() && i < got.size(); ++i) {
    const double r = got.at(i);
    const double e = o.want.at(i);
    if ((std::isnan(r) && std::isnan(e)) || r == e) continue;
    const double error = std::fabs(r - e);  // NaN on one side or unequal infinities: NaN or inf
    const double sum = o.abs_sum.at(i);
    if (!(error <= o.class_tolerance)) ++j.off_class;
    if (!(error <= per_sum_factor * sum + kUnderflowSlack)) ++j.off_per_sum;
    if (sum > 0 && std::isfinite(sum)) j.worst_per_sum = std::max(j.worst_per_sum, error / sum);
    if (std::isfinite(e) && std::fabs(e) >= 0x1p-8 * sum && e != 0)
      j.worst_relative = std::max(j.worst_relative, error / std::fabs(e));
  }
  return j;
}

HostTensor run_with(const std::shared_ptr<Context>& ctx, const Graph& g, const TensorMap& in,
                    MatmulPrecision precision) {
  reset_launch_path_counts();
  Program program(ctx, g, {.matmul_precision = precision});
  // The route the setting asks for was planned (on the portable kernel or the matrix units).
  const std::string wanted = precision == MatmulPrecision::split  ? "split_terms"
                             : precision == MatmulPrecision::fast ? "fast_terms"
                                                                  : "";
  std::uint64_t hits = 0;
  for (const LaunchPathCount& path : launch_path_counts())
    if (path.kernel == "matmul" && (path.path == "split_terms" || path.path == "fast_terms")) {
      EXPECT_TRUE(path.hits == 0 || path.path == wanted) << path.name() << " under " << to_string(precision);
      hits += path.path == wanted ? path.hits : 0;
    }
  if (!wanted.empty()) {
    EXPECT_GT(hits, 0u) << "no " << wanted << " launch under " << to_string(precision);
  }
  return program.run(in).at("c");
}

// Runs the case in every mode and checks the bounds above; returns the three judgements.
struct Modes {
  Judged ieee, split, fast;
};

Modes check_case(const std::shared_ptr<Context>& ctx, const Case& c, const TensorMap& in) {
  SCOPED_TRACE(c.name);
  // The portable kernel's tiles and splits (CPU devices would run the fp32 product as row blocks).
  const ScopedMatmulKernelForTesting tiles(LaunchThresholds::ConvKernel::tiles);
  const Graph g = matmul_graph(c);
  const std::int64_t k = c.a_t ? c.a[c.a.size() - 2] : c.a.back();
  const Oracle o = oracle_of(g, in, k);

  Program plain(ctx, g);
  if (c.dispatches > 0) {
    EXPECT_EQ(plain.stats().dispatches, c.dispatches);
  }
  const HostTensor ieee_default = plain.run(in).at("c");
  const HostTensor ieee = run_with(ctx, g, in, MatmulPrecision::ieee);
  EXPECT_TRUE(ieee.size() == ieee_default.size() &&
              std::memcmp(ieee.f32_data().data(), ieee_default.f32_data().data(), ieee.size() * sizeof(float)) == 0)
      << "ieee must keep the default kernel's bits";

  Modes m;
  const HostTensor split = run_with(ctx, g, in, MatmulPrecision::split);
  const HostTensor fast = run_with(ctx, g, in, MatmulPrecision::fast);
  m.ieee = judge(ieee, o, o.fp32_factor);
  m.split = judge(split, o, o.fp32_factor);
  m.fast = judge(fast, o, o.fp32_factor + kFastProductBound);
  EXPECT_EQ(m.ieee.off_class, 0);
  EXPECT_EQ(m.ieee.off_per_sum, 0);
  EXPECT_EQ(m.split.off_class, 0) << "split outside the fp32 class";
  EXPECT_EQ(m.split.off_per_sum, 0) << "split outside the fp32 class at the operands' scale";
  EXPECT_EQ(m.fast.off_per_sum, 0) << "fast outside its documented bound";
  // The bounds of the arithmetic itself, whatever the kernel's order of additions: at most 6 K
  // (fast 3 K) exact part products summed, |error| <= gamma_6K sum |parts products| plus what the
  // omitted products leave out (tests/unit/matmul_split_arithmetic_test.cpp). Tighter than the
  // class at small K, where the inputs built below tell split from anything weaker.
  const double kU = 0x1p-24;
  const double n = static_cast<double>(k);
  EXPECT_EQ(judge(split, o, (3.04 + 6.1 * n) * kU).off_per_sum, 0) << "split outside its own bound";
  EXPECT_EQ(judge(fast, o, kFastProductBound + 3.1 * n * kU).off_per_sum, 0) << "fast outside its own bound";
  // On random inputs the bounds above are loose (they sum worst cases over K); there split's
  // products, off by at most 3.04 u, leave its errors at the accumulation's, about ieee's. A
  // margin of 4x plus 8 u allows for another kernel's order of additions; an omitted product of
  // 2^-16 of the leading one shows as tens of u (docs/vulkan.md's figures).
  EXPECT_LE(m.split.worst_per_sum, 4.0 * m.ieee.worst_per_sum + 8.0 * kU) << "split much less accurate than ieee";
  std::printf(
      "%-34s K %5lld  |err|/sum|ab| in 2^-24: ieee %7.3f split %7.3f fast %9.1f;  |err|/|c|: ieee %.2e "
      "split %.2e fast %.2e\n",
      c.name.c_str(), static_cast<long long>(k), m.ieee.worst_per_sum * 0x1p24, m.split.worst_per_sum * 0x1p24,
      m.fast.worst_per_sum * 0x1p24, m.ieee.worst_relative, m.split.worst_relative, m.fast.worst_relative);
  return m;
}

Modes check_random(const std::shared_ptr<Context>& ctx, const Case& c, std::uint32_t seed) {
  return check_case(ctx, c,
                    {{"a", scaled_random(c.a, seed, c.a_scale)}, {"b", scaled_random(c.b, seed + 1, c.b_scale)}});
}

TEST_F(VkTest, MatmulPrecisionSplitSmallTiles) {
  auto ctx = make_context();
  check_random(ctx, {"small tiles, scalar rows", {70, 50}, {50, 90}, false, false, 1, 1, 1}, 1);
  check_random(ctx, {"small tiles, vec4 rows", {64, 96}, {96, 64}}, 3);
  check_random(ctx, {"small tiles, split-K", {64, 256}, {256, 64}, false, false, 1, 1, 2}, 5);
  check_random(ctx, {"small tiles, split-K ragged", {7, 1024}, {1024, 9}, false, false, 1, 1, 2}, 7);
}

TEST_F(VkTest, MatmulPrecisionSplitLargeTiles) {
  auto ctx = make_context();
  ScopedSmallLaunchThresholdsForTesting small_thresholds;
  check_random(ctx, {"large tiles, ragged", {130, 36}, {36, 132}, false, false, 1, 1, 1}, 11);
  check_random(ctx, {"large tiles, scalar A", {128, 30}, {30, 128}}, 13);
  check_random(ctx, {"large tiles, split-K", {128, 256}, {256, 128}, false, false, 1, 1, 2}, 15);
  check_random(ctx, {"large tiles, 256 x 256 x 256", {256, 256}, {256, 256}}, 17);
}

TEST_F(VkTest, MatmulPrecisionSplitTransposedAndBatchedOperands) {
  auto ctx = make_context();
  check_random(ctx, {"transposed lhs", {40, 70}, {40, 50}, true, false}, 21);
  check_random(ctx, {"transposed rhs (vec4)", {70, 40}, {50, 40}, false, true}, 23);
  check_random(ctx, {"both transposed, batched", {3, 36, 20}, {3, 28, 36}, true, true}, 25);
  check_random(ctx, {"batched", {3, 40, 36}, {3, 36, 20}}, 27);
  check_random(ctx, {"batched lhs, 2-D rhs", {3, 40, 36}, {36, 20}}, 29);
  check_random(ctx, {"broadcast batch dims", {2, 1, 20, 24}, {3, 24, 28}}, 31);
  ScopedSmallLaunchThresholdsForTesting small_thresholds;
  check_random(ctx, {"large tiles, transposed rhs", {128, 40}, {130, 40}, false, true}, 33);
}

// The class bound relative to the largest value says little at 1e30; the per-output bound judges
// every result at its own scale.
TEST_F(VkTest, MatmulPrecisionSplitLargeAndSmallMagnitudes) {
  auto ctx = make_context();
  check_random(ctx, {"A 1e30, B 1e-30", {40, 36}, {36, 44}, false, false, 1e30f, 1e-30f}, 41);
  check_random(ctx, {"A 1e-30, B 1e30", {40, 36}, {36, 44}, false, false, 1e-30f, 1e30f}, 43);
  check_random(ctx, {"A 1e18, B 1e18", {40, 36}, {36, 44}, false, false, 1e18f, 1e18f}, 45);
  check_random(ctx, {"A 1e-15, B 1e-15", {40, 36}, {36, 44}, false, false, 1e-15f, 1e-15f}, 47);
  ScopedSmallLaunchThresholdsForTesting small_thresholds;
  check_random(ctx, {"large tiles, A 1e30, B 1e-30", {128, 36}, {36, 128}, false, false, 1e30f, 1e-30f}, 49);
}

// Operands up to FLT_MAX itself, including those whose leading bf16 part rounds to nearest up to
// infinity (the split takes it toward zero), times operands small enough that every product and
// sum stays finite.
TEST_F(VkTest, MatmulPrecisionSplitNearTheLargestFloat) {
  auto ctx = make_context();
  const Case c{"near FLT_MAX", {24, 32}, {32, 20}};
  std::mt19937 rng(51);
  std::uniform_int_distribution<std::uint32_t> top(0x7f000000u, 0x7f7fffffu);
  std::vector<float> a(24 * 32);
  for (std::size_t i = 0; i < a.size(); ++i) {
    const std::uint32_t bits = i % 5 == 0 ? 0x7f7fffffu - static_cast<std::uint32_t>(i) : top(rng);
    a[i] = std::bit_cast<float>(bits) * ((rng() & 1u) ? 1.f : -1.f);
  }
  const Modes m = check_case(ctx, c, {{"a", HostTensor::f32(c.a, a)}, {"b", scaled_random(c.b, 52, 0x1p-8f)}});
  EXPECT_LT(m.split.worst_per_sum, 0x1p-20);
}

// Values whose second bf16 part is as large as it gets (x = 1 + 0x7fff 2^-23: p0 = 1, p1 = 2^-8):
// fast drops a1 b1 = 2^-16 from every product, all of one sign, past the fp32 class at K = 4,
// while split and ieee stay within it.
TEST_F(VkTest, MatmulPrecisionFastIsNotFp32AccurateSplitIs) {
  auto ctx = make_context();
  const Case c{"largest second parts", {64, 4}, {4, 64}};
  const float x = 1.0f + 0x7fff * 0x1p-23f;
  const Modes m = check_case(ctx, c,
                             {{"a", HostTensor::f32(c.a, std::vector<float>(64 * 4, x))},
                              {"b", HostTensor::f32(c.b, std::vector<float>(4 * 64, x))}});
  EXPECT_EQ(m.fast.off_class, 64 * 64) << "fast should fall outside the fp32 class here";
  EXPECT_GT(m.fast.worst_relative, 0x1p-17);
  EXPECT_LT(m.split.worst_relative, 0x1p-22);
}

// Values with large third parts (y = 1 + 2^-9 + 63 2^-23: p0 = 1, p1 = 2^-9, p2 = 63 2^-23 ~
// 2^-17): split needs a0b2 and a2b0 (each ~2^7 u of the product); without them it would leave the
// fp32 class here, as fast does.
TEST_F(VkTest, MatmulPrecisionSplitNeedsTheThirdParts) {
  auto ctx = make_context();
  const Case c{"large third parts", {64, 4}, {4, 64}};
  const float y = 1.0f + 0x1p-9f + 63 * 0x1p-23f;
  const Modes m = check_case(ctx, c,
                             {{"a", HostTensor::f32(c.a, std::vector<float>(64 * 4, y))},
                              {"b", HostTensor::f32(c.b, std::vector<float>(4 * 64, y))}});
  EXPECT_EQ(m.fast.off_class, 64 * 64) << "fast should fall outside the fp32 class here";
  EXPECT_LT(m.split.worst_relative, 0x1p-22);
}

// inf and NaN operands give the oracle's (IEEE's) results in every mode on the portable kernels
// (the matrix units' differ, see the skip): an inf times finite
// nonzero values is inf even where the other operand's low parts are zero (b = 1, 2), inf * 0 and
// inf - inf are NaN.
TEST_F(VkTest, MatmulPrecisionSplitInfAndNan) {
  auto ctx = make_context();
  if (matrix_unit_support(ctx->info()).bf16) {
    GTEST_SKIP() << "split and fast run on the bf16 matrix units here, whose low parts of an infinite operand are "
                    "NaN (inf - inf): an output reading one is NaN, not the fp32 product's inf (docs/vulkan.md)";
  }
  const Case c{"inf and NaN", {6, 8}, {8, 5}};
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> a(6 * 8, 1.5f);
  a[0 * 8 + 3] = inf;                                      // row 0: inf * column k=3 of b
  a[1 * 8 + 2] = -inf;                                     // row 1
  a[2 * 8 + 0] = std::numeric_limits<float>::quiet_NaN();  // row 2: NaN
  a[3 * 8 + 3] = inf;                                      // row 3: inf and -inf meet
  a[3 * 8 + 2] = -inf;
  std::vector<float> b(8 * 5);
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = 1.1f + static_cast<float>(i % 7);
  b[3 * 5 + 0] = 1.0f;  // low parts zero
  b[3 * 5 + 1] = 2.0f;
  b[3 * 5 + 2] = 0.0f;   // inf * 0
  b[3 * 5 + 3] = -1.1f;  // -inf
  b[2 * 5 + 4] = 0.0f;
  const Modes m = check_case(ctx, c, {{"a", HostTensor::f32(c.a, a)}, {"b", HostTensor::f32(c.b, b)}});
  (void)m;
}

}  // namespace
}  // namespace tg::vk
