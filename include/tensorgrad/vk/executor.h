#pragma once
// tg::vk::Program: a graph compiled for one Vulkan device. Compiling plans every value's place in
// one device buffer (dead values' memory reused), creates the pipelines and descriptor sets, and
// records ONE command buffer: upload of the inputs from a host-visible staging buffer, every
// dispatch in node order with barriers only where a dispatch touches what an earlier one wrote
// (or overwrites what it read) since the last barrier, and readback of the outputs. run() replays
// it: write staging, submit, wait, read.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tensorgrad/interp/host_tensor.h"
#include "tensorgrad/ir/graph.h"
#include "tensorgrad/vk/context.h"

namespace tg::vk {

struct ProgramOptions {
  // Bytes of sentinel after every value (rounded up to 4); check_guards() reports any overwritten.
  // 0: none. Guards turn memory reuse off (a debug mode): every guard then holds its sentinel
  // until the check.
  std::uint64_t guard_bytes = 0;
};

struct ProgramStats {
  std::size_t dispatches = 0;
  std::size_t barriers = 0;          // compute->compute barriers between dispatches
  std::uint64_t device_bytes = 0;    // the planned device buffer
  std::uint64_t unshared_bytes = 0;  // what it would be without memory reuse
};

class Program {
 public:
  // Throws tg::Error naming the op when a node has no Vulkan kernel, and when the plan exceeds the
  // device's buffer limits; DeviceError when a Vulkan call fails.
  Program(std::shared_ptr<Context> context, const Graph& graph, ProgramOptions options = {});
  Program(Program&&) noexcept;
  Program& operator=(Program&&) noexcept;
  ~Program();

  // Runs the graph. Throws RuntimeError naming the input when one is missing, unknown, or of the
  // wrong type (the same checks as tg::interpret), DeviceError when the device fails.
  TensorMap run(const TensorMap& inputs);

  // After a run: one line per value whose guard region no longer holds the sentinel, naming the
  // value and the node that produced it. Empty when every guard is intact (or there are none).
  std::vector<std::string> check_guards() const;

  const ProgramStats& stats() const;
  const Graph& graph() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Whether the Vulkan executor has a kernel for `op`.
bool has_kernel(OpId op);

}  // namespace tg::vk
