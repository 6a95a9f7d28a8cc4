#pragma once
// Reads a fuzz input as a stream of choices (the role FuzzedDataProvider plays in LLVM's fuzzers,
// but our own, so the g++ unit test build can use it too). Past the end every read returns 0, so
// every input, even an empty one, decodes to some program and libFuzzer's mutations of a byte
// change one choice.
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>

namespace tg::fuzz {

class ByteReader {
 public:
  ByteReader(const std::uint8_t* data, std::size_t size) : data_(data), size_(size) {}

  bool empty() const { return pos_ >= size_; }
  std::uint8_t byte() { return empty() ? 0 : data_[pos_++]; }
  // A choice among n (> 0) alternatives.
  std::size_t below(std::size_t n) { return byte() % n; }
  bool coin() { return (byte() & 1) != 0; }
  template <typename T>
  T pick(std::span<const T> table) {
    return table[below(table.size())];
  }

  // An integer as the builder's callers pass them (axes, dims, sizes, counts): mostly small, one
  // time in four from a table of edges (zero, the int32 and int64 limits, powers of two past them,
  // negatives) where shape arithmetic overflows or an index check is off by one.
  std::int64_t integer() {
    const std::uint8_t b = byte();
    if (b < 192) return static_cast<std::int64_t>(b % 12) - 3;  // -3 .. 8
    static constexpr std::int64_t kEdges[] = {0,
                                              9,
                                              16,
                                              33,
                                              64,
                                              1024,
                                              4097,
                                              65536,
                                              std::int64_t{1} << 31,
                                              (std::int64_t{1} << 31) - 1,
                                              std::int64_t{1} << 32,
                                              std::int64_t{1} << 40,
                                              std::int64_t{1} << 62,
                                              std::numeric_limits<std::int64_t>::max(),
                                              std::numeric_limits<std::int64_t>::min(),
                                              -(std::int64_t{1} << 31) - 1,
                                              -(std::int64_t{1} << 62),
                                              -4};
    return pick(std::span<const std::int64_t>(kEdges));
  }
  // A dimension of an input shape: 1 .. 8 mostly, sometimes 0, sometimes an edge from integer().
  std::int64_t dim() {
    const std::uint8_t b = byte();
    if (b < 200) return 1 + b % 8;
    if (b < 216) return 0;
    return integer();
  }
  // A real attribute or value: ordinary, tiny, huge and non-finite.
  double real() {
    constexpr double kInf = std::numeric_limits<double>::infinity();
    static constexpr double kReals[] = {
        0.0,  1.0,    -1.0,  0.5,    0.1,   0.9,   1e-5,
        2.0,  -3.5,   1e30,  -1e300, 1e300, 1e-40, 0.999999,
        -0.0, 1e-320, 100.0, -7.25,  kInf,  -kInf, std::numeric_limits<double>::quiet_NaN()};
    return pick(std::span<const double>(kReals));
  }

 private:
  const std::uint8_t* data_;
  std::size_t size_;
  std::size_t pos_ = 0;
};

}  // namespace tg::fuzz
