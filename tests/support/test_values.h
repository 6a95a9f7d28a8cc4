#pragma once
// Deterministic test inputs shared by the family unit tests: n values in [-2, 2] from a 64-bit LCG,
// distinct with overwhelming probability (so pooling and argmax see no ties). `salt` keeps the
// streams of files that used different constants as they were.
#include <cstddef>
#include <cstdint>
#include <vector>

namespace tg::testing {

inline std::vector<float> test_values(std::int64_t n, std::uint64_t seed = 1, std::uint64_t salt = 12345) {
  std::vector<float> v(static_cast<std::size_t>(n));
  std::uint64_t s = seed * 0x9E3779B97F4A7C15ull + salt;
  for (auto& x : v) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    x = static_cast<float>(static_cast<double>(s >> 11) / 9007199254740992.0 * 4.0 - 2.0);
  }
  return v;
}

}  // namespace tg::testing
