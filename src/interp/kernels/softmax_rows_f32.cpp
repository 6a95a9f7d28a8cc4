#include "softmax_rows_f32.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

// The 32-byte vector helpers below are always inlined, so no vector crosses a call boundary and
// the compilers' note that their ABI differs without AVX does not apply.
#if defined(__GNUC__)
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

namespace tg::interp {

namespace {

// Eight float lanes (GCC/Clang vector extensions): AVX registers in the AVX2 clone, pairs of SSE
// registers in the baseline one.
using Floats = float __attribute__((vector_size(32)));
using Ints = std::int32_t __attribute__((vector_size(32)));
constexpr int kLanes = 8;

[[gnu::always_inline]] inline Floats load(const float* p) {
  Floats v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

[[gnu::always_inline]] inline void store(float* p, Floats v) { std::memcpy(p, &v, sizeof v); }

[[gnu::always_inline]] inline Floats splat(float x) { return Floats{} + x; }

// exp(x) for x <= 0 or NaN (softmax's x - max); see the header for its precision.
[[gnu::always_inline]] inline Floats exp_nonpositive(Floats x) {
  const Floats lowest = splat(-104.0F);  // exp(-104) is below the smallest subnormal
  const Floats clamped = x < lowest ? lowest : x;
  const Floats round = splat(12582912.0F);  // 1.5 * 2^23: adding and subtracting it rounds
  const Floats n = (clamped * 1.44269504088896341F + round) - round;
  // ln 2 in two parts; n * 0.693359375 (9 significant bits) is exact for |n| < 2^8.
  const Floats r = (clamped - n * 0.693359375F) - n * -2.12194440e-4F;
  // exp(r) for |r| <= ln2 / 2: Taylor to degree 7 (truncation below 0.1 ulp).
  Floats p = splat(1.0F / 5040.0F);
  p = p * r + 1.0F / 720.0F;
  p = p * r + 1.0F / 120.0F;
  p = p * r + 1.0F / 24.0F;
  p = p * r + 1.0F / 6.0F;
  p = p * r + 0.5F;
  p = p * r + 1.0F;
  p = p * r + 1.0F;
  // 2^n in two factors so that results below 2^-126 come out subnormal rather than wrong.
  const Ints k = __builtin_convertvector(n, Ints);
  const Ints tiny = k < -126;
  const Ints k1 = tiny ? k + 64 : k;
  const Floats scale = std::bit_cast<Floats>((k1 + 127) << 23);
  const Floats result = p * scale * (tiny ? splat(0x1p-64F) : splat(1.0F));
  const Floats flushed = x < lowest ? splat(0.0F) : result;
  return x != x ? x : flushed;  // NaN stays NaN
}

[[gnu::always_inline]] inline float exp_nonpositive(float x) {
  float lanes[kLanes] = {x};
  store(lanes, exp_nonpositive(load(lanes)));
  return lanes[0];
}

[[gnu::always_inline]] inline float row_max(const float* row, std::int64_t length) {
  Floats lanes = splat(-std::numeric_limits<float>::infinity());
  std::int64_t j = 0;
  for (; j + kLanes <= length; j += kLanes) {
    const Floats v = load(row + j);
    lanes = lanes < v ? v : lanes;
  }
  float m = -std::numeric_limits<float>::infinity();
  for (int l = 0; l < kLanes; ++l) m = m < lanes[l] ? lanes[l] : m;
  for (; j < length; ++j) m = m < row[j] ? row[j] : m;
  return m;
}

// Terms per lane in a leaf of the row sum (tree_sum.h's kTreeLeaf): a leaf is kLeafVectors
// vectors, each lane adding its terms in index order.
constexpr std::int64_t kLeafVectors = 8;

// tree_sum.h's TreeSum with a vector of lanes for T: one tree per lane, of the same shape as the
// sum op's. A copy rather than TreeSum<Floats> so that every step is inlined into the AVX2 and the
// baseline builds alike: an out-of-line function taking 32-byte vectors would be called with
// different ABIs from the two.
class LaneTree {
 public:
  [[gnu::always_inline]] void push(Floats leaf) {
    int level = 0;
    for (std::uint64_t bit = 1; (leaves_ & bit) != 0; bit <<= 1, ++level) leaf = slots_[level] + leaf;
    slots_[level] = leaf;
    ++leaves_;
  }
  // The occupied slots added from the lowest level up.
  [[gnu::always_inline]] Floats total() const {
    Floats acc = {};
    bool any = false;
    for (int level = 0; (leaves_ >> level) != 0; ++level) {
      if (((leaves_ >> level) & 1) == 0) continue;
      acc = any ? slots_[level] + acc : slots_[level];
      any = true;
    }
    return acc;
  }

 private:
  Floats slots_[64];  // slot l is read only while bit l of leaves_ says it holds 2^l leaves
  std::uint64_t leaves_ = 0;
};

// One leaf of the row sum: exp(row - m) over the vectors [v, v + kLeafVectors) (fewer at the end),
// each lane adding its terms in order; writes each exp to `out` when it is not null and moves v on.
[[gnu::always_inline]] inline Floats leaf_sum(const float* row, float m, float* out, std::int64_t& v,
                                              std::int64_t vectors) {
  const std::int64_t end = std::min(v + kLeafVectors, vectors);
  Floats leaf = {};
  for (; v < end; ++v) {
    const Floats e = exp_nonpositive(load(row + v * kLanes) - m);
    leaf += e;
    if (out != nullptr) store(out + v * kLanes, e);
  }
  return leaf;
}

// Sum of exp(row - m), writing each exp to `out` when it is not null. Each of the 8 lanes sums its
// terms (every 8th) as tree_sum.h does: leaves of kLeafVectors terms combined pairwise by the
// fixed tree of LaneTree, so the error grows like log n rather than n / 8. The lanes are then
// added in a fixed pairwise order, and the scalar tail last. The order depends only on `length`:
// the bits do not depend on the thread count or on the build (AVX2 or baseline).
[[gnu::always_inline]] inline float exp_sum(const float* row, float m, float* out, std::int64_t length) {
  const std::int64_t vectors = length / kLanes;
  std::int64_t v = 0;
  Floats lanes = leaf_sum(row, m, out, v, vectors);
  if (v < vectors) {  // more than one leaf (one leaf is its own tree total: the same bits)
    LaneTree tree;
    tree.push(lanes);
    while (v < vectors) tree.push(leaf_sum(row, m, out, v, vectors));
    lanes = tree.total();
  }
  float tail = 0.0F;
  for (std::int64_t j = vectors * kLanes; j < length; ++j) {
    const float e = exp_nonpositive(row[j] - m);
    tail += e;
    if (out != nullptr) out[j] = e;
  }
  // A fixed pairwise order over the lanes, then the tail.
  const float s01 = lanes[0] + lanes[1], s23 = lanes[2] + lanes[3];
  const float s45 = lanes[4] + lanes[5], s67 = lanes[6] + lanes[7];
  return ((s01 + s23) + (s45 + s67)) + tail;
}

}  // namespace

namespace {

[[gnu::always_inline]] inline void rows(const float* x, float* y, std::int64_t first, std::int64_t last,
                                        std::int64_t length, bool log) {
  for (std::int64_t r = first; r < last; ++r) {
    const float* row = x + r * length;
    float* out = y + r * length;
    const float m = row_max(row, length);
    if (log) {
      // (x - max) - log(sum), as the generic kernel: no rounding of max + log(sum) at x's scale.
      const float log_sum = std::log(exp_sum(row, m, nullptr, length));
      for (std::int64_t j = 0; j < length; ++j) out[j] = (row[j] - m) - log_sum;
    } else {
      const float sum = exp_sum(row, m, out, length);
      for (std::int64_t j = 0; j < length; ++j) out[j] /= sum;
    }
  }
}

#if defined(__GNUC__) && defined(__x86_64__)
// AVX2 where the CPU has it, chosen by a CPUID test rather than target_clones: an ifunc resolver
// runs before ThreadSanitizer's runtime is up and crashes instrumented builds. avx2 does not imply
// fma, so neither version contracts into fused multiply-adds and both give the same bits.
[[gnu::target("avx2")]] void rows_avx2(const float* x, float* y, std::int64_t first, std::int64_t last,
                                       std::int64_t length, bool log) {
  rows(x, y, first, last, length, log);
}
bool use_avx2() {
  static const bool supported = __builtin_cpu_supports("avx2");
  return supported;
}
#else
void rows_avx2(const float* x, float* y, std::int64_t first, std::int64_t last, std::int64_t length, bool log) {
  rows(x, y, first, last, length, log);
}
bool use_avx2() { return false; }
#endif

}  // namespace

void softmax_rows_f32_baseline(const float* x, float* y, std::int64_t first, std::int64_t last, std::int64_t length,
                               bool log) {
  rows(x, y, first, last, length, log);
}

void softmax_rows_f32(const float* x, float* y, std::int64_t first, std::int64_t last, std::int64_t length, bool log) {
  if (use_avx2()) {
    rows_avx2(x, y, first, last, length, log);
  } else {
    softmax_rows_f32_baseline(x, y, first, last, length, log);
  }
}

namespace {
[[gnu::always_inline]] inline void exp_values(const float* x, float* y, std::int64_t n) {
  std::int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes) store(y + j, exp_nonpositive(load(x + j)));
  for (; j < n; ++j) y[j] = exp_nonpositive(x[j]);
}
#if defined(__GNUC__) && defined(__x86_64__)
[[gnu::target("avx2")]] void exp_values_avx2(const float* x, float* y, std::int64_t n) { exp_values(x, y, n); }
#else
void exp_values_avx2(const float* x, float* y, std::int64_t n) { exp_values(x, y, n); }
#endif
}  // namespace

void exp_nonpositive_f32(const float* x, float* y, std::int64_t n) {
  if (use_avx2()) {
    exp_values_avx2(x, y, n);
  } else {
    exp_values(x, y, n);
  }
}

}  // namespace tg::interp
