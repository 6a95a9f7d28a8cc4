#pragma once
// Internal: the op codes and own-dispatch launch paths of one elementwise family, for its Vulkan
// kernel file (elementwise_unary.cpp, elementwise_binary.cpp). Built from the generated op codes
// (vk/ew_codes.h), so a TG_EW op of ops.def is registered without an edit there.
#include <array>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "vk/ew_codes.h"
#include "vk/kernels/kernels.h"

namespace tg::vk {

// An op's code in its family's shader and its own dispatch's path, vulkan/<op>/own_kernel
// (fusion.cpp names the fused steps vulkan/<op>/fused).
struct EwOwnKernel {
  std::uint32_t code = 0;
  const LaunchPath* path = nullptr;
};

// Every TG_EW op of `family`, declared when the library loads. add() declares another op the family
// kernel serves under a code of its own (stop_gradient's word copy).
class EwOwnKernels {
 public:
  explicit EwOwnKernels(EwFamily family) {
    for (const EwOp& ew : kEwOps) {
      if (ew.family == family) add(ew.op, ew.code, "own_kernel");
    }
  }
  void add(OpId op, std::uint32_t code, std::string_view path) {
    paths_.push_back(std::make_unique<LaunchPath>("vulkan", op_name(op), path));
    by_op_[static_cast<std::size_t>(op)] = {code, paths_.back().get()};
    ops_.push_back(op);
  }
  const EwOwnKernel& operator[](OpId op) const { return by_op_[static_cast<std::size_t>(op)]; }
  // The ops declared, in order.
  const std::vector<OpId>& ops() const { return ops_; }

 private:
  std::vector<std::unique_ptr<LaunchPath>> paths_;
  std::array<EwOwnKernel, kOpIdSpace> by_op_{};
  std::vector<OpId> ops_;
};

}  // namespace tg::vk
