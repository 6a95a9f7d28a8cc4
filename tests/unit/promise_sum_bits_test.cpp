// The interpreter's summation promises (docs/ops.md, `sum`; src/interp/tree_sum.h), each pinned:
//   - every slice is added in one fixed pairwise tree (leaves of 8 terms in order, leaf sums
//     combined as a binary counter combines carries, the leftover partials from the smallest up),
//     so the result has the bits of that tree computed here independently, on every path the
//     reduce kernel takes (contiguous rows, blocked slices, tiles of strided columns, one or
//     several tiles, two reduced axes, a materialised transpose) and at 1, 2 and all threads;
//   - the rounding error stays within (7 + 2 log2(n / 8)) units of rounding times sum |x|;
//   - 10^6 copies of 0.1f sum to within 1e-7 relative on every path.
// Lengths sit below, at and above each threshold of reduce.cpp: the tree's leaf (8), the split
// block (4096), the split slice length (32768), the few-outputs limit (8 slices) and the inner
// tile (256 columns). The f32 inputs are random floats, the f64 ones random doubles of 53 bits,
// so any other association of the partials changes bits.
#include <gtest/gtest.h>
#include <tbb/global_control.h>

#include <bit>
#include <cmath>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "support/library.h"

namespace tg {
namespace {

// The reference tree, written from the docs' description rather than from tree_sum.h: the sum of
// `count` leaves (a power of two) from leaf `first`, halves added pairwise.
template <class T>
T perfect_tree(const std::vector<T>& x, std::int64_t first, std::int64_t count) {
  if (count == 1) {
    T leaf(0);
    const std::int64_t end = std::min<std::int64_t>((first + 1) * 8, static_cast<std::int64_t>(x.size()));
    for (std::int64_t i = first * 8; i < end; ++i) leaf += x[static_cast<std::size_t>(i)];
    return leaf;
  }
  return perfect_tree(x, first, count / 2) + perfect_tree(x, first + count / 2, count / 2);
}

// The leaves split into groups of 2^b for each set bit b of the leaf count, largest first; the
// group sums then added from the smallest (the last leaves) up.
template <class T>
T reference_tree_sum(const std::vector<T>& x) {
  const auto leaves = static_cast<std::int64_t>((x.size() + 7) / 8);
  std::vector<T> groups;
  std::int64_t first = 0;
  for (int bit = 62; bit >= 0; --bit) {
    const std::int64_t size = std::int64_t{1} << bit;
    if ((leaves & size) == 0) continue;
    groups.push_back(perfect_tree(x, first, size));
    first += size;
  }
  if (groups.empty()) return T(0);
  T acc = groups.back();
  for (std::size_t g = groups.size() - 1; g-- > 0;) acc = groups[g] + acc;
  return acc;
}

// The slice's values at the element type of `compute`: random floats in f32, random doubles in
// f64 (wide inputs), with magnitudes over a few binades so that partial sums round.
std::vector<double> slice_values(std::int64_t n, ComputeType compute, std::uint64_t seed) {
  SampleRng rng(seed);
  std::vector<double> v(static_cast<std::size_t>(n));
  for (double& x : v) {
    const double value = std::ldexp(rng.uniform(-1, 3), static_cast<int>(rng.uniform_int(-6, 6)));
    x = compute == ComputeType::f32 ? static_cast<double>(static_cast<float>(value)) : value;
  }
  return v;
}

HostTensor input(const Shape& shape, const std::vector<double>& values, ComputeType compute) {
  if (compute == ComputeType::f64) return HostTensor::of({DType::f32, shape}, values);
  return HostTensor::f32(shape, std::vector<float>(values.begin(), values.end()));
}

// One way to lay the slice out: the tensor holding `copies` copies of it, the graph reducing it,
// and the launch path this layout must take at length n.
struct Layout {
  std::string name;
  std::int64_t copies;
  std::function<Shape(std::int64_t n)> shape;
  std::function<std::size_t(std::int64_t n, std::int64_t copy, std::int64_t i)> position;
  std::function<Tensor(const Tensor&)> reduce;
  std::function<std::string(std::int64_t n)> path;  // "interp/sum/<path>"
};

// A slice of one term is dropped from the plan as a size-1 axis: the tile path adds nothing.
std::string rows_path(std::int64_t n, std::int64_t rows) {
  if (n == 1) return "one_tile";
  return n >= 32768 && rows <= 8 ? "blocked_slices" : "contiguous_rows";
}

std::vector<Layout> layouts() {
  const auto row_major = [](std::int64_t width) {
    return [width](std::int64_t n, std::int64_t copy, std::int64_t i) {
      return static_cast<std::size_t>(width == 0 ? copy * n + i : i * width + copy);
    };
  };
  return {
      {"alone: [n], all axes", 1, [](std::int64_t n) { return Shape{n}; }, row_major(0),
       [](const Tensor& t) { return sum(t); }, [](std::int64_t n) { return rows_path(n, 1); }},
      {"8 rows: [8, n], axis 1 (the most slices the blocked path takes)", 8,
       [](std::int64_t n) {
         return Shape{8, n};
       },
       row_major(0), [](const Tensor& t) { return sum(t, 1); }, [](std::int64_t n) { return rows_path(n, 8); }},
      {"9 rows: [9, n], axis 1", 9,
       [](std::int64_t n) {
         return Shape{9, n};
       },
       row_major(0), [](const Tensor& t) { return sum(t, 1); }, [](std::int64_t n) { return rows_path(n, 9); }},
      {"3 strided columns: [n, 3], axis 0", 3,
       [](std::int64_t n) {
         return Shape{n, 3};
       },
       row_major(3), [](const Tensor& t) { return sum(t, 0); }, [](std::int64_t) { return std::string("one_tile"); }},
      {"256 strided columns: [n, 256], axis 0", 256,
       [](std::int64_t n) {
         return Shape{n, 256};
       },
       row_major(256), [](const Tensor& t) { return sum(t, 0); }, [](std::int64_t) { return std::string("one_tile"); }},
      {"257 strided columns: [n, 257], axis 0", 257,
       [](std::int64_t n) {
         return Shape{n, 257};
       },
       row_major(257), [](const Tensor& t) { return sum(t, 0); },
       [](std::int64_t) { return std::string("several_tiles"); }},
      {"a materialised transpose: swap_axes([3, n]) over axis 0", 3,
       [](std::int64_t n) {
         return Shape{3, n};
       },
       row_major(0), [](const Tensor& t) { return sum(swap_axes(t, 0, 1), 0); },
       [](std::int64_t) { return std::string("one_tile"); }},
  };
}

// Two reduced axes around a kept one: [a, 2, n / a] over {0, 2}, for n with a factor a > 1.
std::optional<std::int64_t> smallest_factor(std::int64_t n) {
  for (std::int64_t a = 2; a * a <= n; ++a)
    if (n % a == 0) return a;
  return std::nullopt;
}

HostTensor run(const HostTensor& x, const std::function<Tensor(const Tensor&)>& build, ComputeType compute) {
  GraphBuilder b("promise_sum");
  TracingScope scope(b);
  b.output("y", build(b.input("x", x.type)));
  return interpret(b.take(), {{"x", x}}, {.compute = compute}).outputs.at("y");
}

// The widest layouts only at lengths up to here: [n, 257] of 32769 rows is already 8.4M elements.
constexpr std::int64_t kWideLayoutMaxLength = 32769;

const std::vector<std::int64_t> kLengths = {1,    7,    8,    9,     15,    16,    17,    63,    64,    65,    4095,
                                            4096, 4097, 8200, 32767, 32768, 32769, 36872, 65535, 65536, 65537, 94213};

// Runs `build` on x at 1 thread, 2 threads and all threads; every run must give `expected`'s bits.
void expect_bits_at_every_thread_count(const HostTensor& x, const std::function<Tensor(const Tensor&)>& build,
                                       ComputeType compute, const std::vector<double>& expected) {
  for (const int threads : {1, 2, 0}) {
    SCOPED_TRACE(threads == 0 ? std::string("all threads") : std::to_string(threads) + " thread(s)");
    std::optional<tbb::global_control> limit;
    if (threads > 0) limit.emplace(tbb::global_control::max_allowed_parallelism, static_cast<std::size_t>(threads));
    const std::vector<double> got = run(x, build, compute).to_f64();
    ASSERT_EQ(got.size(), expected.size());
    for (std::size_t k = 0; k < got.size(); ++k) {
      // Bit equality: == would let -0 pass for +0; the values here are never NaN.
      ASSERT_EQ(std::bit_cast<std::uint64_t>(got[k]), std::bit_cast<std::uint64_t>(expected[k]))
          << "output " << k << ": got " << got[k] << ", the reference tree gives " << expected[k];
    }
  }
}

class PromiseSumBits : public ::testing::TestWithParam<ComputeType> {};

TEST_P(PromiseSumBits, EveryPathGivesTheReferenceTreesBitsAtEveryThreadCount) {
  const ComputeType compute = GetParam();
  for (const std::int64_t n : kLengths) {
    SCOPED_TRACE("n = " + std::to_string(n));
    const std::vector<double> slice = slice_values(n, compute, static_cast<std::uint64_t>(n) * 7 + 1);
    double expected = 0;
    if (compute == ComputeType::f32) {
      expected = reference_tree_sum(std::vector<float>(slice.begin(), slice.end()));
    } else {
      expected = reference_tree_sum(slice);
    }
    for (const Layout& layout : layouts()) {
      if (layout.copies > 9 && n > kWideLayoutMaxLength) continue;
      SCOPED_TRACE(layout.name);
      const Shape shape = layout.shape(n);
      std::vector<double> values(static_cast<std::size_t>(num_elements(shape)));
      for (std::int64_t c = 0; c < layout.copies; ++c)
        for (std::int64_t i = 0; i < n; ++i) values[layout.position(n, c, i)] = slice[static_cast<std::size_t>(i)];
      const LaunchPath path("interp", "sum", layout.path(n));
      const std::uint64_t hits_before = path.hits();
      expect_bits_at_every_thread_count(input(shape, values, compute), layout.reduce, compute,
                                        std::vector<double>(static_cast<std::size_t>(layout.copies), expected));
      EXPECT_EQ(path.hits() - hits_before, 3U) << "the layout did not take " << path.name();
    }
    if (const auto a = smallest_factor(n)) {
      SCOPED_TRACE("two reduced axes: [a, 2, n / a] over {0, 2}");
      const std::int64_t b = n / *a;
      std::vector<double> values(static_cast<std::size_t>(2 * n));
      for (std::int64_t i = 0; i < *a; ++i)
        for (std::int64_t k = 0; k < 2; ++k)
          for (std::int64_t j = 0; j < b; ++j)
            values[static_cast<std::size_t>((i * 2 + k) * b + j)] = slice[static_cast<std::size_t>(i * b + j)];
      expect_bits_at_every_thread_count(input({*a, 2, b}, values, compute),
                                        [](const Tensor& t) {
                                          return sum(t, std::vector<std::int64_t>{0, 2});
                                        },
                                        compute, {expected, expected});
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Compute, PromiseSumBits, ::testing::Values(ComputeType::f32, ComputeType::f64),
                         [](const auto& compute) {
                           return std::string(compute.param == ComputeType::f32 ? "f32" : "f64");
                         });

struct SumCase {
  std::string name;
  Shape shape;
  Axes axes;
};

// docs/ops.md: "the rounding error is at most about (7 + 2 log2(n/8)) units of f32 rounding times
// sum |x|": 7 roundings inside a leaf, at most log2(leaves) up the perfect trees and as many
// combining the leftover partials. Terms of one sign, uniform in [0, 1) and nearly constant (whose
// roundings all lean one way, so a sequential sum's error grows like n), on every path.
TEST(PromiseSumError, WithinTheDocumentedRoundingsTimesTheAbsoluteSum) {
  for (const std::int64_t n : {9, 4097, 32769, 94213, 1000003}) {
    for (const bool nearly_constant : {false, true}) {
      SCOPED_TRACE("n = " + std::to_string(n) + (nearly_constant ? ", nearly constant" : ", uniform"));
      SampleRng rng(static_cast<std::uint64_t>(n));
      std::vector<float> x(static_cast<std::size_t>(n));
      long double exact = 0;
      for (float& v : x) {
        v = static_cast<float>(nearly_constant ? 0.1 * rng.uniform(1, 1.001) : rng.uniform(0, 1));
        exact += v;  // a 64-bit mantissa: off by under 2^-40 a term, far below the bound
      }
      const double leaves = std::ceil(static_cast<double>(n) / 8);
      const double bound = (7 + 2 * std::log2(leaves)) * 0x1p-24 * static_cast<double>(exact);
      for (const SumCase& c : {SumCase{"alone", {n}, Axes::all()}, SumCase{"9 rows", {9, n}, Axes(1)},
                               SumCase{"2 strided columns", {n, 2}, Axes(0)}}) {
        SCOPED_TRACE(c.name);
        std::vector<float> laid_out(static_cast<std::size_t>(num_elements(c.shape)));
        for (std::size_t i = 0; i < laid_out.size(); ++i)
          laid_out[i] = x[c.name == "9 rows" ? i % x.size() : c.shape.size() == 2 ? i / 2 : i];
        const HostTensor y = run(
            HostTensor::f32(c.shape, laid_out), [&](const Tensor& t) { return sum(t, c.axes); }, ComputeType::f32);
        for (const double v : y.to_f64()) EXPECT_LE(std::fabs(v - static_cast<double>(exact)), bound) << "sum " << v;
      }
    }
  }
}

// src/interp/tree_sum.h: "10^6 copies of 0.1f sum to within 1e-7 relative", on every path.
TEST(PromiseSumError, TenToTheSixTenthsWithinOneInTenMillion) {
  constexpr std::int64_t kTerms = 1000000;
  const double exact = kTerms * static_cast<double>(0.1F);
  for (const SumCase& c : {SumCase{"blocked", {kTerms}, Axes::all()}, SumCase{"contiguous rows", {9, kTerms}, Axes(1)},
                           SumCase{"strided columns", {kTerms, 3}, Axes(0)}}) {
    SCOPED_TRACE(c.name);
    const HostTensor y = run(
        HostTensor::filled({DType::f32, c.shape}, 0.1F), [&](const Tensor& t) { return sum(t, c.axes); },
        ComputeType::f32);
    for (const double v : y.to_f64()) EXPECT_LE(std::fabs(v - exact) / exact, 1e-7) << "sum " << v;
  }
}

}  // namespace
}  // namespace tg
