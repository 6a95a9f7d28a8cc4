// The matrix-unit matmul (shaders/matmul_coopmat.comp) against the f64 oracle on a device that has
// matrix units: f16 and bf16 operands (one part, exact products), f32 under split (six bf16 part
// products, the fp32 tolerance class) and fast (three, its documented bound), on both sides of the
// 128 tile edges and the 16-wide K slices, split-K and ragged K ranges, batched and broadcast
// products, transposed operands read in place, 1-D operands, K = 0, and large magnitudes (1e+-30,
// operands near the largest float).
// Each case also checks that the matrix-unit path ran. CI's lavapipe has no cooperative matrices:
// these skip there, saying so; docs/testing.md gives the command that runs them on the GPU machine.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "matrix_units_test_support.h"
#include "support/library.h"
#include "tensorgrad/vk/executor.h"
#include "vk/kernels/matmul_units.h"
#include "vk_oracle_check.h"
#include "vk_test_support.h"

namespace tg::vk {
namespace {

using testing::random_f32;
using testing::VkTest;

struct Case {
  Shape a, b;
  bool lhs_t = false;  // built as swap_axes of an input stored transposed
  bool rhs_t = false;
  float scale_a = 1.f;  // the operands' magnitudes
  float scale_b = 1.f;
};

std::string describe(const Case& c) {
  return shape_to_string(c.a) + (c.lhs_t ? "^T" : "") + " x " + shape_to_string(c.b) + (c.rhs_t ? "^T" : "") +
         " scales " + std::to_string(c.scale_a) + ", " + std::to_string(c.scale_b);
}

Shape swapped(Shape s) {
  if (s.size() >= 2) std::swap(s[s.size() - 2], s.back());
  return s;
}

HostTensor scaled_input(DType dtype, const Shape& shape, std::uint32_t seed, float scale) {
  HostTensor t = random_f32(shape, seed);
  std::vector<float> v(t.size());
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(t.at(i)) * scale;
  if (dtype == DType::f32) return HostTensor::f32(shape, std::move(v));
  return HostTensor::low_precision(dtype, shape, v);
}

// Runs c = a x b with operands of `dtype` (16-bit ones cast up to an f32 product) under
// `precision`; returns the largest error relative to the oracle's scale (max(1, max |c|)) and
// fails where it exceeds `bound_ulps` times the fp32 class's bound (1: the class itself).
double check(const std::shared_ptr<Context>& ctx, const Case& c, DType dtype, MatmulPrecision precision,
             double bound_factor, std::uint32_t seed) {
  SCOPED_TRACE(describe(c) + " " + std::string(dtype_name(dtype)) + " " + std::string(to_string(precision)));
  GraphBuilder builder("units");
  TracingScope scope(builder);
  Tensor a = builder.input("a", {dtype, c.lhs_t ? swapped(c.a) : c.a});
  Tensor b = builder.input("b", {dtype, c.rhs_t ? swapped(c.b) : c.b});
  Tensor lhs = c.lhs_t ? swap_axes(a, -2, -1) : a;
  Tensor rhs = c.rhs_t ? swap_axes(b, -2, -1) : b;
  builder.output("c", dtype == DType::f32 ? matmul(lhs, rhs) : matmul(lhs, rhs, DType::f32));
  const Graph g = builder.take();
  const TensorMap in{{"a", scaled_input(dtype, g.type(*g.find_input("a")).shape, seed, c.scale_a)},
                     {"b", scaled_input(dtype, g.type(*g.find_input("b")).shape, seed + 1, c.scale_b)}};
  reset_launch_path_counts();
  Program program(ctx, g, {.matmul_precision = precision});
  std::uint64_t unit_hits = 0;
  for (const LaunchPathCount& p : launch_path_counts()) {
    if (p.kernel == "matmul" && p.path.rfind("matrix_units", 0) == 0) unit_hits += p.hits;
  }
  const bool empty = num_elements(c.a) == 0 || num_elements(c.b) == 0;
  if (!empty) {
    EXPECT_EQ(unit_hits, 1u) << "the product ran on the matrix units";
  }
  const double worst = testing::largest_error_within_fp32_class(g, in, program.run(in), "c", bound_factor);
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
  return worst;
}

// Both sides of every threshold of the launch: the 128 tile edges in M and N, K around the 16-wide
// slices and long enough to split, the ragged K ranges past 32768 (2048 slices of 16), batches,
// broadcast batches, vectors.
std::vector<Case> boundary_cases() {
  std::vector<Case> cases;
  for (std::int64_t m : {1, 127, 128, 129}) {
    for (std::int64_t n : {1, 127, 128, 129, 257}) cases.push_back({{m, 33}, {33, n}});
  }
  for (std::int64_t k : {1, 15, 16, 17, 31, 32, 33, 255, 256, 257}) cases.push_back({{130, k}, {k, 140}});
  cases.push_back({{64, 4096}, {4096, 64}});       // few tiles, long K: split-K
  cases.push_back({{16, 40000}, {40000, 24}});     // K past one range's loop: ragged ranges
  cases.push_back({{1024, 512}, {512, 1024}});     // 64 full tiles, interior stores
  cases.push_back({{3, 130, 70}, {3, 70, 129}});   // batched
  cases.push_back({{2, 3, 65, 40}, {3, 40, 66}});  // a broadcast batch dim
  cases.push_back({{300}, {300, 130}});            // a vector lhs
  cases.push_back({{130, 300}, {300}});            // a vector rhs
  cases.push_back({{0, 16}, {16, 5}});
  cases.push_back({{7, 0}, {0, 9}});  // K = 0: zeros (the portable kernel's zero_k path)
  cases.push_back({{200, 48}, {48, 136}, true, false});
  cases.push_back({{200, 48}, {48, 136}, false, true});
  cases.push_back({{2, 129, 33}, {2, 33, 131}, true, true});
  return cases;
}

class MatrixUnitsTest : public testing::MatrixUnitsFixture {};

TEST_F(MatrixUnitsTest, SixteenBitOperandsAtEveryThreshold) {
  std::uint32_t seed = 1;
  for (DType dtype : {DType::f16, DType::bf16}) {
    if (dtype == DType::f16 ? !support_.f16 : !support_.bf16) continue;
    for (const Case& c : boundary_cases()) {
      if (num_elements(c.a) == 0 || num_elements(c.b) == 0 || c.a.back() == 0) continue;
      check(ctx_, c, dtype, MatmulPrecision::ieee, 1.0, seed += 2);
    }
  }
}

TEST_F(MatrixUnitsTest, SplitIsWithinTheFp32ClassAtEveryThresholdAndMagnitude) {
  if (!support_.bf16) GTEST_SKIP() << "split runs on bf16 units: " << support_.why_not;
  std::uint32_t seed = 101;
  double worst = 0;
  for (const Case& c : boundary_cases()) {
    if (num_elements(c.a) == 0 || num_elements(c.b) == 0 || c.a.back() == 0) continue;
    worst = std::max(worst, check(ctx_, c, DType::f32, MatmulPrecision::split, 1.0, seed += 2));
  }
  for (const auto& [sa, sb] : {std::pair{1e30f, 1e-30f}, std::pair{1e-30f, 1e30f}, std::pair{1e15f, 1e15f},
                               std::pair{1e-15f, 1e-15f}, std::pair{1e30f, 1e5f}, std::pair{1.7e38f, 1e-6f}}) {
    worst = std::max(worst, check(ctx_, {{130, 257}, {257, 129}, false, false, sa, sb}, DType::f32,
                                  MatmulPrecision::split, 1.0, seed += 2));
  }
  std::cout << "split: largest error / max(1, max |c|) = " << worst << "\n";
}

TEST_F(MatrixUnitsTest, FastStaysWithinItsDocumentedBound) {
  if (!support_.bf16) GTEST_SKIP() << "fast runs on bf16 units: " << support_.why_not;
  // Three products of bf16 parts drop terms of at most ~2^-16 of each product: 2^7 times the f32
  // unit roundoff per product, so fast is bounded by 256 times the fp32 class.
  std::uint32_t seed = 301;
  double worst = 0;
  for (const Case& c : boundary_cases()) {
    if (num_elements(c.a) == 0 || num_elements(c.b) == 0 || c.a.back() == 0) continue;
    worst = std::max(worst, check(ctx_, c, DType::f32, MatmulPrecision::fast, 256.0, seed += 2));
  }
  // Near the largest float the parts are cut toward zero: p0 + p1 must not round up to infinity.
  worst = std::max(worst, check(ctx_, {{130, 257}, {257, 129}, false, false, 1.7e38f, 1e-6f}, DType::f32,
                                MatmulPrecision::fast, 256.0, seed += 2));
  std::cout << "fast: largest error / max(1, max |c|) = " << worst << "\n";
}

}  // namespace
}  // namespace tg::vk
