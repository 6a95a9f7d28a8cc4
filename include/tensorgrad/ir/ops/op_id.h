#pragma once
// OpId alone, for headers that name ops without needing the whole contract.
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace tg {

enum class OpId : std::uint16_t {
#define TG_OP(id, name) id,
#include "tensorgrad/ir/ops/ops.def"
#undef TG_OP
};

inline constexpr std::size_t kNumOps = 0
#define TG_OP(id, name) +1
#include "tensorgrad/ir/ops/ops.def"
#undef TG_OP
    ;

std::string_view op_name(OpId id);

}  // namespace tg
