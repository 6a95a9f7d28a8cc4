#pragma once
// Philox4x32-10 (Salmon, Moraes, Dror, Shaw: "Parallel random numbers: as easy as 1, 2, 3", SC 2011),
// the counter-based generator behind randn and dropout. Each element's draw is a pure function of
// (key, counter), so any thread (or a GPU invocation) computes element i without a shared state, and
// the gradient of dropout recomputes the forward mask exactly.
//
// The stream: key = {uint32(seed), uint32(salt)}, counter = {uint32(i), uint32(i >> 32), 0, 0} for
// element index i. Uniforms take the top 24 bits of a word, so they are exact in float and double
// alike: the f32 and f64 interpreters see the same numbers, and a GLSL shader (umulExtended for the
// 32x32->64 products) can reproduce every bit. Header-only and free of library calls for that reason.
#include <array>
#include <cmath>
#include <cstdint>

namespace tg::philox {

// Round multipliers from the paper: odd constants chosen for good avalanche of the 32x32->64 products.
inline constexpr std::uint32_t kMultiplier0 = 0xD2511F53u;
inline constexpr std::uint32_t kMultiplier1 = 0xCD9E8D57u;
// Weyl-sequence key increments added between rounds: the fractional parts of the golden ratio and
// of sqrt(3) - 1, in 32 bits.
inline constexpr std::uint32_t kWeyl0 = 0x9E3779B9u;
inline constexpr std::uint32_t kWeyl1 = 0xBB67AE85u;
// Ten rounds: the paper's recommended count (7 already passes BigCrush; 10 leaves a safety margin).
inline constexpr int kRounds = 10;

using Counter = std::array<std::uint32_t, 4>;
using Key = std::array<std::uint32_t, 2>;

// One Philox round: two multiplications, their high halves mixed with the other counter words and
// the key, the words permuted.
constexpr Counter round(const Counter& c, const Key& k) {
  const std::uint64_t product0 = std::uint64_t{kMultiplier0} * c[0];
  const std::uint64_t product1 = std::uint64_t{kMultiplier1} * c[2];
  const auto high0 = static_cast<std::uint32_t>(product0 >> 32);
  const auto low0 = static_cast<std::uint32_t>(product0);
  const auto high1 = static_cast<std::uint32_t>(product1 >> 32);
  const auto low1 = static_cast<std::uint32_t>(product1);
  return {high1 ^ c[1] ^ k[0], low1, high0 ^ c[3] ^ k[1], low0};
}

// Ten rounds; the key is bumped by the Weyl increments before every round but the first.
constexpr Counter philox4x32_10(Counter counter, Key key) {
  for (int r = 0; r < kRounds; ++r) {
    if (r > 0) {
      key[0] += kWeyl0;
      key[1] += kWeyl1;
    }
    counter = round(counter, key);
  }
  return counter;
}

// The key of one stochastic call: the step seed (an i32 reinterpreted as its two's-complement bits)
// and the call's salt (in [0, 2^32), checked by the shape rules).
constexpr Key stream_key(std::int32_t seed, std::int64_t salt) {
  return {static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(salt)};
}

// The four words drawn for element `index` of a call keyed by `key`.
constexpr Counter draw(const Key& key, std::uint64_t index) {
  return philox4x32_10({static_cast<std::uint32_t>(index), static_cast<std::uint32_t>(index >> 32), 0u, 0u}, key);
}

inline constexpr double kTwoToMinus24 = 1.0 / 16777216.0;

// A uniform in [0, 1) from the top 24 bits of a word: a multiple of 2^-24, exact in float.
template <class T>
constexpr T uniform_closed_open(std::uint32_t word) {
  return static_cast<T>(word >> 8) * static_cast<T>(kTwoToMinus24);
}

// A uniform in (0, 1]: the same 24 bits shifted up by one step, so log() never sees 0.
template <class T>
constexpr T uniform_open_closed(std::uint32_t word) {
  return static_cast<T>((word >> 8) + 1u) * static_cast<T>(kTwoToMinus24);
}

// One standard normal from two words by Box-Muller (cosine branch), computed in T.
template <class T>
T box_muller(std::uint32_t word0, std::uint32_t word1) {
  constexpr double kTwoPi = 6.283185307179586476925286766559;
  const T u1 = uniform_open_closed<T>(word0);
  const T u2 = uniform_closed_open<T>(word1);
  return std::sqrt(T(-2) * std::log(u1)) * std::cos(static_cast<T>(kTwoPi) * u2);
}

}  // namespace tg::philox
