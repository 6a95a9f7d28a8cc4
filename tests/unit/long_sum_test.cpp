// Long sums in the interpreter (src/interp/tree_sum.h): sum and mean of 10^6 copies of 0.1f stay
// within 10x of PyTorch's error (about 6e-8 relative) on contiguous, strided and multi-axis slices,
// against the exact f64 sum of the f32 inputs; a slice gives the same bits whatever its layout or
// the path its reduction takes; and the bits do not depend on the thread count.
#include <gtest/gtest.h>
#include <tbb/global_control.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "support/library.h"

namespace tg {
namespace {

constexpr double kAllowedRelative = 6e-7;  // 10x PyTorch's error on the same sum

HostTensor run(const HostTensor& x, const std::function<Tensor(const Tensor&)>& build,
               ComputeType compute = ComputeType::f32) {
  GraphBuilder b("long_sum");
  TracingScope scope(b);
  b.output("y", build(b.input("x", x.type)));
  return interpret(b.take(), {{"x", x}}, {.compute = compute}).outputs.at("y");
}

// Relative error of every output against `exact` (each output's exact sum or mean).
double worst_relative_error(const HostTensor& y, double exact) {
  double worst = 0;
  for (double v : y.to_f64()) worst = std::max(worst, std::fabs(v - exact) / std::fabs(exact));
  return worst;
}

struct Layout {
  std::string name;
  Shape shape;
  Axes axes;
  std::int64_t terms;  // per output
};

// 10^6 terms per output (or 4 x 250000 where the slice is split over a leading and a last axis).
std::vector<Layout> long_layouts() {
  return {
      {"contiguous, one slice (blocked)", {1000000}, Axes::all(), 1000000},
      {"contiguous rows", {10, 100000}, 1, 100000},
      {"contiguous, several slices (blocked)", {2, 1000000}, 1, 1000000},
      {"strided: a leading axis", {1000000, 2}, 0, 1000000},
      {"strided: a leading axis, wide", {4000, 300}, 0, 4000},
      {"multi-axis", {1000, 2, 1000}, std::vector<std::int64_t>{0, 2}, 1000000},
      {"multi-axis, all", {1000, 1000}, Axes::all(), 1000000},
  };
}

TEST(LongSum, TenToTheSixTenthsWithinTenTimesPyTorch) {
  const float tenth = 0.1f;
  for (const Layout& l : long_layouts()) {
    SCOPED_TRACE(l.name);
    const HostTensor x = HostTensor::filled({DType::f32, l.shape}, tenth);
    const double exact_sum = static_cast<double>(l.terms) * static_cast<double>(tenth);  // exact in f64
    const double exact_mean = static_cast<double>(tenth);
    const double sum_error = worst_relative_error(run(x, [&](const Tensor& t) { return sum(t, l.axes); }), exact_sum);
    const double mean_error =
        worst_relative_error(run(x, [&](const Tensor& t) { return mean(t, l.axes); }), exact_mean);
    EXPECT_LE(sum_error, kAllowedRelative);
    EXPECT_LE(mean_error, kAllowedRelative);
    // The f64 oracle sums in the same tree: far below f32's error.
    EXPECT_LE(worst_relative_error(run(
                                       x, [&](const Tensor& t) { return sum(t, l.axes); }, ComputeType::f64),
                                   exact_sum),
              1e-14);
  }
}

TEST(LongSum, LengthsAroundTheLeavesAndBlocks) {
  // Below, at and above the leaf (8), the split block (4096) and the split threshold (32768).
  for (const std::int64_t n : {1, 7, 8, 9, 4095, 4096, 4097, 32767, 32768, 32769, 65537, 1000003}) {
    SCOPED_TRACE("n = " + std::to_string(n));
    for (const Shape& shape : {Shape{n}, Shape{3, n}, Shape{n, 3}}) {
      const HostTensor x = HostTensor::filled({DType::f32, shape}, 0.1f);
      const Axes axes = shape.size() == 1 ? Axes::all() : Axes(shape[1] == 3 ? 0 : 1);
      const double exact = static_cast<double>(n) * static_cast<double>(0.1f);
      EXPECT_LE(worst_relative_error(run(x, [&](const Tensor& t) { return sum(t, axes); }), exact), kAllowedRelative);
    }
  }
}

std::vector<float> pseudo_random(std::int64_t n, std::uint64_t seed) {
  SampleRng rng(seed);
  std::vector<float> v(static_cast<std::size_t>(n));
  for (float& x : v) x = static_cast<float>(rng.uniform(-1, 3));
  return v;
}

// The tree depends only on the slice's length: a slice summed alone (blocked), as one of many rows,
// as a strided column, or through two reduced axes gives the same bits.
TEST(LongSum, TheSameSliceGivesTheSameBitsOnEveryPath) {
  for (const std::int64_t n : {7, 300, 4097, 40000, 100003}) {
    SCOPED_TRACE("n = " + std::to_string(n));
    const std::vector<float> row = pseudo_random(n, static_cast<std::uint64_t>(n));
    const float alone =
        static_cast<float>(run(HostTensor::f32({n}, row), [](const Tensor& t) { return sum(t); }).at(0));
    // Nine copies as rows (the contiguous-rows path), and as columns (tiles over a leading axis).
    std::vector<float> rows, columns(static_cast<std::size_t>(9 * n));
    for (int r = 0; r < 9; ++r) rows.insert(rows.end(), row.begin(), row.end());
    for (std::int64_t i = 0; i < n; ++i)
      for (int c = 0; c < 9; ++c) columns[static_cast<std::size_t>(i * 9 + c)] = row[static_cast<std::size_t>(i)];
    const HostTensor by_rows = run(HostTensor::f32({9, n}, rows), [](const Tensor& t) { return sum(t, 1); });
    const HostTensor by_columns = run(HostTensor::f32({n, 9}, columns), [](const Tensor& t) { return sum(t, 0); });
    for (int k = 0; k < 9; ++k) {
      EXPECT_EQ(static_cast<float>(by_rows.at(static_cast<std::size_t>(k))), alone);
      EXPECT_EQ(static_cast<float>(by_columns.at(static_cast<std::size_t>(k))), alone);
    }
    if (n % 7 == 0 || n == 300) {  // n = a * b: the slice through two reduced axes around a kept one
      const std::int64_t a = n == 300 ? 12 : 7;
      const std::int64_t b = n / a;
      std::vector<float> split(static_cast<std::size_t>(2 * n));
      for (std::int64_t i = 0; i < a; ++i)
        for (std::int64_t k = 0; k < 2; ++k)
          for (std::int64_t j = 0; j < b; ++j)
            split[static_cast<std::size_t>((i * 2 + k) * b + j)] = row[static_cast<std::size_t>(i * b + j)];
      const HostTensor two_axes = run(HostTensor::f32({a, 2, b}, split), [](const Tensor& t) {
        return sum(t, std::vector<std::int64_t>{0, 2});
      });
      EXPECT_EQ(static_cast<float>(two_axes.at(0)), alone);
      EXPECT_EQ(static_cast<float>(two_axes.at(1)), alone);
    }
  }
}

TEST(LongSum, SameBitsWithOneThreadAndAllThreads) {
  for (const Layout& l : long_layouts()) {
    SCOPED_TRACE(l.name);
    const HostTensor x = HostTensor::f32(l.shape, pseudo_random(num_elements(l.shape), 5));
    for (ComputeType compute : {ComputeType::f32, ComputeType::f64}) {
      const auto build = [&](const Tensor& t) { return mean(t, l.axes); };
      const HostTensor many = run(x, build, compute);
      HostTensor one;
      {
        tbb::global_control single(tbb::global_control::max_allowed_parallelism, 1);
        one = run(x, build, compute);
      }
      EXPECT_EQ(many.to_f64(), one.to_f64());
    }
  }
}

}  // namespace
}  // namespace tg
