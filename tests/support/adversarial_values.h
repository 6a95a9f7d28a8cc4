#pragma once
// Adversarial value placement: inputs whose decisive values sit where a kernel's splits put them.
// A reduction split into blocks, chunks, tiles, vector lanes or grid-stride passes combines partial
// results; a bug that loses or doubles one partial (the tail after the last whole block, the first
// lane of a tile) goes unseen on random data whenever the lost part holds nothing decisive: the
// maximum lies elsewhere, the lost terms are small against the tolerance. These patterns make the
// lost part decisive:
//   - extremum_high / extremum_low: one value far above (below) a background of distinct values
//     in [-1, 1], at a chosen position of every slice (max, min, argmax, argmin, softmax's max);
//   - huge_among_small: kHugeValue at the position among small integers (a lost or doubled term
//     moves a sum by 1024; softmax's exp overflows without the true maximum);
//   - small_integers: integers in [-4, 4], whose sums are exact in f32 as long as every partial
//     stays below 2^24, so any lost or doubled term shows whatever the tolerance.
// Positions come from split_positions(): the first and last term, and for each split size the
// first and last term of the first two and last two whole blocks and of the tail.
#include <algorithm>
#include <cstdint>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "tensorgrad/ir/shape.h"

namespace tg::testing {

// Large enough that a lost term shows in any sum and exp(x - max) overflows f32 and f64 without the
// true maximum (exp(1020) > 1e308), small enough that 8192 of them sum exactly in f32 (< 2^24).
inline constexpr float kHugeValue = 1024.0F;
inline constexpr float kExtremumValue = 4.0F;  // above (below) a background in [-1, 1]

enum class Pattern { extremum_high, extremum_low, huge_among_small, small_integers };

inline const char* pattern_name(Pattern p) {
  switch (p) {
    case Pattern::extremum_high:
      return "extremum_high";
    case Pattern::extremum_low:
      return "extremum_low";
    case Pattern::huge_among_small:
      return "huge_among_small";
    case Pattern::small_integers:
      return "small_integers";
  }
  return "?";
}

inline constexpr Pattern kAllPatterns[] = {Pattern::extremum_high, Pattern::extremum_low, Pattern::huge_among_small,
                                           Pattern::small_integers};

// Whether a pattern's values are all integers (sums exact in f32 and f64).
inline bool integer_pattern(Pattern p) { return p == Pattern::huge_among_small || p == Pattern::small_integers; }

// A tensor seen as [outer, length, inner] around one axis (the reduced one); element (o, a, i) is
// at (o * length + a) * inner + i in row-major order.
struct SliceLayout {
  std::int64_t outer = 1, length = 1, inner = 1;
  std::int64_t index(std::int64_t o, std::int64_t a, std::int64_t i) const { return (o * length + a) * inner + i; }
  std::int64_t size() const { return outer * length * inner; }
};

inline SliceLayout slice_layout(const Shape& shape, std::size_t axis) {
  SliceLayout l;
  for (std::size_t d = 0; d < shape.size(); ++d) {
    if (d < axis) l.outer *= shape[d];
    if (d == axis) l.length = shape[d];
    if (d > axis) l.inner *= shape[d];
  }
  return l;
}

// Positions in [0, length) where splits of the given sizes put a block edge: 0 and length - 1, and
// for each split s < length: the first and last term of the first two and last two whole blocks,
// and the first and last term of the tail after the last whole block (when there is one).
inline std::vector<std::int64_t> split_positions(std::int64_t length, std::span<const std::int64_t> splits) {
  std::set<std::int64_t> at{0, length - 1};
  for (const std::int64_t s : splits) {
    if (s <= 1 || s >= length) continue;
    const std::int64_t whole = length / s;
    for (const std::int64_t b : {std::int64_t{0}, std::int64_t{1}, whole - 2, whole - 1}) {
      if (b < 0 || b >= whole) continue;
      at.insert(b * s);
      at.insert(b * s + s - 1);
    }
    if (whole * s < length) at.insert(whole * s);  // the tail's first term; its last is length - 1
  }
  return {at.begin(), at.end()};
}

// Lengths that cross each split: s - 1, s, s + 1 and 2s + 1 (two whole blocks and a one-term tail).
inline std::vector<std::int64_t> lengths_around(std::span<const std::int64_t> splits) {
  std::set<std::int64_t> at;
  for (const std::int64_t s : splits) {
    for (const std::int64_t n : {s - 1, s, s + 1, 2 * s + 1})
      if (n >= 1) at.insert(n);
  }
  return {at.begin(), at.end()};
}

// A deterministic stream (SplitMix64): the patterns must not depend on any other generator's state.
class PatternRng {
 public:
  explicit PatternRng(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next() {
    std::uint64_t z = (state_ += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }
  // Uniform in [-1, 1), on a 2^-20 grid (so f32 holds it exactly).
  float unit() { return static_cast<float>(static_cast<std::int64_t>(next() >> 43) - (1 << 20)) / (1 << 20); }
  std::int64_t below(std::int64_t n) { return static_cast<std::int64_t>(next() % static_cast<std::uint64_t>(n)); }

 private:
  std::uint64_t state_;
};

// A pattern's background: integers in [-4, 4], or values in [-1, 1) on a 2^-20 grid.
inline std::vector<float> background_values(std::int64_t n, bool integers, std::uint64_t seed) {
  PatternRng rng(seed);
  std::vector<float> v(static_cast<std::size_t>(n));
  for (float& x : v) x = integers ? static_cast<float>(rng.below(9) - 4) : rng.unit();
  return v;
}

// Values for a tensor of layout `l`: the pattern's background, and (except small_integers) its
// decisive value at `position` along the axis of every slice.
inline std::vector<float> adversarial_values(const SliceLayout& l, Pattern pattern, std::int64_t position,
                                             std::uint64_t seed = 1) {
  std::vector<float> v = background_values(l.size(), integer_pattern(pattern),
                                           seed * 0x2545F4914F6CDD1DULL + static_cast<std::uint64_t>(position));
  if (pattern == Pattern::small_integers) return v;
  const float decisive = pattern == Pattern::extremum_high  ? kExtremumValue
                         : pattern == Pattern::extremum_low ? -kExtremumValue
                                                            : kHugeValue;
  for (std::int64_t o = 0; o < l.outer; ++o)
    for (std::int64_t i = 0; i < l.inner; ++i) v[static_cast<std::size_t>(l.index(o, position, i))] = decisive;
  return v;
}

// One split position in [0, length): with even odds the largest split below the length (the one a
// kernel's long rows most likely use) or any of them, then one of that split's edges: the first
// term, the first block's last, the second block's first, the last whole block's last, the tail's
// first, the last term.
inline std::int64_t pick_split_position(std::int64_t length, std::span<const std::int64_t> splits, PatternRng& rng) {
  std::vector<std::int64_t> below;
  for (const std::int64_t s : splits)
    if (s > 1 && s < length) below.push_back(s);
  if (below.empty()) return rng.below(2) == 0 ? 0 : length - 1;
  const std::int64_t s = rng.below(2) == 0
                             ? *std::max_element(below.begin(), below.end())
                             : below[static_cast<std::size_t>(rng.below(static_cast<std::int64_t>(below.size())))];
  const std::int64_t whole = length / s;
  const std::int64_t edges[] = {0, s - 1, s, whole * s - 1, std::min(whole * s, length - 1), length - 1};
  return edges[rng.below(6)];
}

// The random-graph generator's hook (tests/property/graph_gen.cpp): for a share of fresh float
// inputs, moves each slice's largest value to a split position along one axis and its smallest to
// another, by swaps within the slice, so the values stay the domain's draw (no ties made, no bound
// crossed). The axis, the positions and whether to place at all come from a hash of the values, so
// no other random stream moves. Split sizes: every declared size threshold (`splits`).
inline void place_extremes_at_splits(std::vector<double>& values, const Shape& shape,
                                     std::span<const std::int64_t> splits, int share_of_four = 1) {
  if (values.size() < 2 || shape.empty()) return;
  std::uint64_t hash = values.size();
  for (std::size_t k = 0; k < std::min<std::size_t>(values.size(), 4); ++k)
    hash = hash * 31 + static_cast<std::uint64_t>(static_cast<std::int64_t>(values[k] * 1048576.0));
  PatternRng rng(hash);
  if (rng.below(4) >= share_of_four) return;
  const auto axis = static_cast<std::size_t>(rng.below(static_cast<std::int64_t>(shape.size())));
  const SliceLayout l = slice_layout(shape, axis);
  if (l.length < 2) return;
  const std::int64_t high_at = pick_split_position(l.length, splits, rng);
  std::int64_t low_at = pick_split_position(l.length, splits, rng);
  if (low_at == high_at) low_at = high_at == 0 ? l.length - 1 : 0;
  for (std::int64_t o = 0; o < l.outer; ++o) {
    for (std::int64_t i = 0; i < l.inner; ++i) {
      const auto at_index = [&](std::int64_t a) { return static_cast<std::size_t>(l.index(o, a, i)); };
      std::int64_t hi = 0;
      for (std::int64_t a = 1; a < l.length; ++a)
        if (values[at_index(a)] > values[at_index(hi)]) hi = a;
      std::swap(values[at_index(hi)], values[at_index(high_at)]);
      std::int64_t lo = 0;
      for (std::int64_t a = 1; a < l.length; ++a)
        if (values[at_index(a)] < values[at_index(lo)]) lo = a;
      if (lo != high_at) std::swap(values[at_index(lo)], values[at_index(low_at)]);
    }
  }
}

}  // namespace tg::testing
