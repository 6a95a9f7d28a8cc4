// How a fused run reads an outside operand (fusion_operands.h).
#include "vk/fusion_operands.h"

#include <cstddef>

namespace tg::vk {

OperandRead operand_read(const TensorType& in, const TensorType& out) {
  if (in.dtype != DType::f32 || in.shape.size() > out.shape.size() || in.size() <= 0) return {};
  const std::int64_t size = in.size();
  if (in.shape == out.shape) return {OperandForm::same, 1, static_cast<std::uint32_t>(size)};
  if (size == 1) return {OperandForm::scalar, 0, 1};
  // The operand's axes d in [first, last] (its first and last that are not 1) must be S's axes
  // lead + d; every other axis of the operand is 1 (broadcast).
  const std::size_t lead = out.shape.size() - in.shape.size();
  std::size_t first = 0, last = in.shape.size() - 1;
  while (in.shape[first] == 1) ++first;  // size > 1: some axis is not 1
  while (in.shape[last] == 1) --last;
  for (std::size_t d = first; d <= last; ++d) {
    if (in.shape[d] != out.shape[lead + d]) return {};
  }
  std::int64_t outer = 1, run = 1;  // S's elements before and after the block
  for (std::size_t d = 0; d < lead + first; ++d) outer *= out.shape[d];
  for (std::size_t d = lead + last + 1; d < out.shape.size(); ++d) run *= out.shape[d];
  const auto run32 = static_cast<std::uint32_t>(run), size32 = static_cast<std::uint32_t>(size);
  // outer = run = 1: S with other leading 1s ([C] under [1, C]), the same words in the same order.
  if (outer == 1 && run == 1) return {OperandForm::same, 1, size32};
  // A vec4 of the output must read whole words: a whole vec4 of a periodic operand (whose
  // output, a multiple of its size, then has no n % 4 tail), or one word of a spread or channel
  // operand for all four lanes (run a multiple of 4: no tail either).
  if (run == 1) return size % 4 == 0 ? OperandRead{OperandForm::periodic, 1, size32} : OperandRead{};
  if (run % 4 != 0) return {};
  return {outer == 1 ? OperandForm::spread : OperandForm::channel, run32, size32};
}

}  // namespace tg::vk
