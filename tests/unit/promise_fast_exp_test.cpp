// The f32 row kernel's exp (src/interp/kernels/softmax_rows_f32.h, exp_nonpositive_f32), pinned to
// its documented precision: within 1.25 ulp of the exact exp over x <= 0, subnormal results
// included, and within 1 ulp of expf (docs/performance.md); -0 and 0 give 1, NaN stays NaN, and
// everything below -104 (down to -inf) gives 0. The reference is expl (a 64-bit mantissa).
//
// An ulp here is that of the exact result's binade in f32: 2^(e - 23) for a result in [2^e,
// 2^(e+1)), and 2^-149 for subnormal results.
//
// CI samples every binade of [-104, 0] densely and walks every input whose result is subnormal;
// TG_EXHAUSTIVE=1 walks every negative float: 25 s on a 16-core host, about a minute on 2 cores.
// Measured that way: 1.2183 ulp of the exact exp at x = -59.9542465, 1 ulp of expf, subnormal
// results within 0.78 ulp, every input below -104 giving +0.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "interp/kernels/softmax_rows_f32.h"

namespace {

constexpr double kUlpBoundVsExact = 1.25;  // softmax_rows_f32.h
constexpr double kUlpBoundVsExpf = 1.0;    // docs/performance.md

constexpr std::uint32_t kMinusZero = 0x80000000U;
constexpr std::uint32_t kMinus104 = 0xC2D00000U;  // -104.0f: below it the kernel returns 0
constexpr std::uint32_t kMinusInfinity = 0xFF800000U;

double ulp_of(long double exact) {
  if (exact < 0x1p-126L) return 0x1p-149;
  int exponent = 0;
  std::frexp(static_cast<double>(exact), &exponent);  // exact = m 2^exponent, m in [0.5, 1)
  return std::ldexp(1.0, std::max(exponent - 1, -126) - 23);
}

struct Worst {
  double vs_exact = 0, vs_expf = 0;
  float at_exact = 0, at_expf = 0;
  std::uint64_t checked = 0;
  void merge(const Worst& o) {
    note(o.vs_exact, o.at_exact, o.vs_expf, o.at_expf);
    checked += o.checked;
  }
  void note(double exact_error, float exact_at, double expf_error, float expf_at) {
    if (exact_error > vs_exact) {
      vs_exact = exact_error;
      at_exact = exact_at;
    }
    if (expf_error > vs_expf) {
      vs_expf = expf_error;
      at_expf = expf_at;
    }
  }
};

// The kernel's exp of every input pattern first, first + step, ... up to `last`, against expl and
// expf. Inputs are fed in batches so the vector body of the kernel runs.
Worst measure(std::uint32_t first, std::uint32_t last, std::uint32_t step) {
  constexpr std::size_t kBatch = 4096;
  std::vector<float> x(kBatch), y(kBatch);
  Worst worst;
  std::uint64_t bits = first;
  while (bits <= last) {
    std::size_t count = 0;
    for (; count < kBatch && bits <= last; ++count, bits += step) x[count] = std::bit_cast<float>(std::uint32_t(bits));
    tg::interp::exp_nonpositive_f32(x.data(), y.data(), static_cast<std::int64_t>(count));
    for (std::size_t i = 0; i < count; ++i) {
      const long double exact = std::exp(static_cast<long double>(x[i]));
      const double ulp = ulp_of(exact);
      const double vs_exact = static_cast<double>(std::fabs(static_cast<long double>(y[i]) - exact)) / ulp;
      const float libm = std::exp(x[i]);
      const double vs_expf = std::fabs(static_cast<double>(y[i]) - static_cast<double>(libm)) / ulp_of(libm);
      worst.note(vs_exact, x[i], vs_expf, x[i]);
    }
    worst.checked += count;
  }
  return worst;
}

void expect_within_bounds(const Worst& worst) {
  EXPECT_LE(worst.vs_exact, kUlpBoundVsExact) << "at x = " << std::hexfloat << worst.at_exact;
  EXPECT_LE(worst.vs_expf, kUlpBoundVsExpf) << "at x = " << std::hexfloat << worst.at_expf;
  std::printf("%llu inputs: largest error %.4f ulp of the exact exp (x = %.9g), %.4f ulp of expf (x = %.9g)\n",
              static_cast<unsigned long long>(worst.checked), worst.vs_exact, static_cast<double>(worst.at_exact),
              worst.vs_expf, static_cast<double>(worst.at_expf));
}

// Every binade of [-104, 0) sampled at a stride co-prime to the mantissa's powers of two (every
// 61st pattern: about 18 million inputs, each binade's low mantissa bits all visited).
TEST(PromiseFastExp, WithinItsUlpBoundsOnEveryBinadeSampled) {
  expect_within_bounds(measure(kMinusZero, kMinus104, 61));
}

// Every input whose result is subnormal or rounds to 0 or 2^-149: x in [-104, -87.33].
TEST(PromiseFastExp, WithinItsUlpBoundsOnEverySubnormalResult) {
  const std::uint32_t below_min_normal = std::bit_cast<std::uint32_t>(std::log(0x1p-126F));  // -87.336548
  expect_within_bounds(measure(below_min_normal, kMinus104, 1));
}

TEST(PromiseFastExp, EdgeInputs) {
  const std::vector<float> x = {0.0F, -0.0F, NAN, -NAN, -104.0F, std::nextafter(-104.0F, -200.0F), -1e30F, -INFINITY};
  std::vector<float> y(x.size());
  tg::interp::exp_nonpositive_f32(x.data(), y.data(), static_cast<std::int64_t>(x.size()));
  EXPECT_EQ(y[0], 1.0F);
  EXPECT_EQ(y[1], 1.0F);
  EXPECT_TRUE(std::isnan(y[2]));
  EXPECT_TRUE(std::isnan(y[3]));
  EXPECT_EQ(y[4], 0.0F);  // exp(-104) = 6.8e-46, below half the smallest subnormal
  for (std::size_t i = 5; i < x.size(); ++i) EXPECT_EQ(std::bit_cast<std::uint32_t>(y[i]), 0U) << "x = " << x[i];
}

// Everything below -104 gives +0: every such pattern, checked without a reference (cheap).
TEST(PromiseFastExp, EveryInputBelowTheRangeGivesZero) {
  constexpr std::size_t kBatch = 1 << 16;
  std::vector<float> x(kBatch), y(kBatch);
  std::uint64_t wrong = 0;
  // Every 7th pattern in CI (about 150 million), all of them under TG_EXHAUSTIVE=1.
  const char* exhaustive = std::getenv("TG_EXHAUSTIVE");
  const std::uint64_t step = exhaustive != nullptr && std::string(exhaustive) == "1" ? 1 : 7;
  for (std::uint64_t bits = kMinus104 + 1; bits <= kMinusInfinity;) {
    std::size_t count = 0;
    for (; count < kBatch && bits <= kMinusInfinity; ++count, bits += step)
      x[count] = std::bit_cast<float>(std::uint32_t(bits));
    tg::interp::exp_nonpositive_f32(x.data(), y.data(), static_cast<std::int64_t>(count));
    for (std::size_t i = 0; i < count; ++i) wrong += std::bit_cast<std::uint32_t>(y[i]) != 0;
  }
  EXPECT_EQ(wrong, 0U);
}

// Every negative float in [-104, 0], on every core: TG_EXHAUSTIVE=1.
TEST(PromiseFastExp, WithinItsUlpBoundsOnEveryInputExhaustively) {
  const char* exhaustive = std::getenv("TG_EXHAUSTIVE");
  if (exhaustive == nullptr || std::string(exhaustive) != "1") {
    GTEST_SKIP() << "about a minute on 2 cores: set TG_EXHAUSTIVE=1 (CI samples every binade instead)";
  }
  const unsigned threads = std::max(1U, std::thread::hardware_concurrency());
  constexpr std::uint32_t kChunk = 1U << 22;  // patterns per task, handed out in turn
  std::vector<Worst> worst(threads);
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      for (std::uint64_t first = kMinusZero + std::uint64_t{t} * kChunk; first <= kMinus104;
           first += std::uint64_t{threads} * kChunk) {
        const auto last = static_cast<std::uint32_t>(std::min<std::uint64_t>(first + kChunk - 1, kMinus104));
        worst[t].merge(measure(static_cast<std::uint32_t>(first), last, 1));
      }
    });
  }
  for (std::thread& thread : pool) thread.join();
  Worst all;
  for (const Worst& w : worst) all.merge(w);
  EXPECT_EQ(all.checked, std::uint64_t{kMinus104} - kMinusZero + 1);
  expect_within_bounds(all);
}

}  // namespace
