// The type-mismatch message of a param value (shape_mismatch.h).
#include "shape_mismatch.h"

#include <utility>

namespace tg::detail {

bool looks_transposed(const Shape& expected, const Shape& got) {
  if (expected.size() < 2 || got.size() != expected.size() || got == expected) return false;
  Shape swapped = got;
  std::swap(swapped[swapped.size() - 1], swapped[swapped.size() - 2]);
  return swapped == expected;
}

std::string type_mismatch(const TensorType& expected, const TensorType& got) {
  std::string out = "expected " + expected.to_string() + ", got " + got.to_string();
  if (looks_transposed(expected.shape, got.shape)) {
    out += std::string(": it looks transposed (") +
           (expected.shape.size() == 2 ? "the expected shape reversed" : "the last two dims swapped") +
           "): PyTorch's nn.Linear stores its weight as [out, in], tensorgrad's Linear W is [in, out]; "
           "upload the transpose (weight.T)";
  }
  return out;
}

}  // namespace tg::detail
