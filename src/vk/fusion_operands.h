#pragma once
// Internal: how a fused elementwise run (fusion.cpp, shaders/fused_elementwise.comp) reads a value
// from outside the run, by the value's type against the run's output type S. docs/vulkan-fusion.md
// ("What fuses") gives the rules.
#include <cstdint>

#include "tensorgrad/ir/shape.h"

namespace tg::vk {

// Every readable broadcast is one rule: the operand's shape, right-aligned against S with its
// leading 1s ignored, is 1s, then a block of S's axes, then 1s, and output element i reads operand
// element (i / run) % size (run: the product of S's axes after the block; size: the operand's
// element count). The shader has a load per special case, the cheapest that reads those words:
enum class OperandForm : std::uint8_t {
  none,      // not readable in a run: another dtype or broadcast, or its words cut across a vec4
  same,      // S's elements in S's order (S itself, or S with other leading 1s): element i
  scalar,    // one element, read once per invocation
  periodic,  // run 1 (the block is S's trailing axes, a bias [C] under [N, C]): element i % size,
             // a vec4 per vec4 when size is a multiple of 4
  spread,    // the block is S's leading axes (a row statistic [N, 1] under [N, C]): element
             // i / run, one word per vec4 when run is a multiple of 4
  channel,   // both (a conv bias [1, C, 1, 1] under [N, C, H, W]): element (i / run) % size,
             // one word per vec4 when run is a multiple of 4
};

struct OperandRead {
  OperandForm form = OperandForm::none;
  std::uint32_t run = 0;   // spread and channel: output elements per operand element
  std::uint32_t size = 0;  // periodic and channel: the operand's element count
};

// How a run whose values have type `out` (at most 2^32 - 1 elements, checked by the caller) reads
// `in`, an operand that broadcasts to it.
OperandRead operand_read(const TensorType& in, const TensorType& out);

}  // namespace tg::vk
