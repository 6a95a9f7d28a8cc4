#pragma once
// Internal: how a backend fills its table of kernels indexed by OpId value, one registration
// function per family of ops.def (the interpreter's src/interp/kernels/table.cpp and the Vulkan
// executor's src/vk/kernels/table.cpp).
#include <cstddef>
#include <string>
#include <string_view>

#include "tensorgrad/ir/error.h"
#include "tensorgrad/ir/ops/op_id.h"

namespace tg {

// Runs `register_kernels`, family `family`'s registration, on `table` and refuses one that set the
// slot of another family's op: the table is indexed by OpId, so such a slot would silently replace
// (or be replaced by) the owner's kernel, depending on the order of the families. `backend` and
// `folder` name the backend and its kernel files in the message ("Vulkan kernels",
// "src/vk/kernels").
template <class Table>
void register_family_kernels(Table& table, std::string_view family, void (*register_kernels)(Table&),
                             std::string_view backend, std::string_view folder) {
  const Table before = table;
  register_kernels(table);
  for (std::size_t slot = 0; slot < table.size(); ++slot) {
    if (table[slot] == before[slot]) continue;
    const auto op = static_cast<OpId>(slot);
    if (op_family(op) != family) {
      throw Error(std::string(backend) + ": register_" + std::string(family) + "_kernels (" + std::string(folder) +
                  "/" + std::string(family) + ".cpp) registers a kernel for op '" + std::string(op_name(op)) +
                  "' of family '" + std::string(op_family(op)) + "'");
    }
  }
}

}  // namespace tg
