#pragma once
// A per-op number for seeding an op's random cases: a hash of the op's name, so an op's draws stay
// the same when ops are added or moved in ops.def (its OpId value or position would shift them, and
// with them the launch paths the fixed seeds reach).
#include <cstdint>
#include <string_view>

#include "tensorgrad/ir/ops/op_id.h"

namespace tg::testing {

inline std::uint64_t op_seed(OpId op) {
  std::uint64_t hash = 0xcbf29ce484222325ULL;  // FNV-1a, 64-bit
  for (const char c : op_name(op)) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 0x100000001b3ULL;
  }
  return hash;
}

}  // namespace tg::testing
