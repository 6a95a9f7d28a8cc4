#pragma once
// The interpreter's kernel interface. A kernel is templated on the compute type T (float or
// double): f32 values live in Buffer::real as T, i32 and bool values in Buffer::ints.
#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "tensorgrad/ir/graph.h"
#include "tensorgrad/ir/ops/op_def.h"

namespace tg::interp {

// A value's elements: f32 values as T in `real`, i32 and bool values in `ints`. `owner` keeps them
// alive; it is null while they are a caller's view (an input HostTensor made with view()), which
// the interpreter reads without copying.
template <class T>
struct Buffer {
  std::shared_ptr<const void> owner;
  std::span<T> real;
  std::span<std::int32_t> ints;
};

template <class T>
struct KernelCall {
  const Node& node;
  std::span<const Buffer<T>* const> inputs;
  std::span<const TensorType* const> input_types;
  const TensorType& output_type;
  Buffer<T>& output;  // already sized: real for f32 outputs, ints for i32 and bool outputs

  const Attrs& attrs() const { return node.attrs; }
  const TensorType& in_type(std::size_t i) const { return *input_types[i]; }
  std::span<const T> real(std::size_t i) const { return inputs[i]->real; }
  std::span<const std::int32_t> ints(std::size_t i) const { return inputs[i]->ints; }
};

template <class T>
using KernelFn = void (*)(const KernelCall<T>& call);
template <class T>
using KernelTable = std::array<KernelFn<T>, kOpIdSpace>;  // indexed by OpId value

template <class T>
const KernelTable<T>& kernel_table();

}  // namespace tg::interp
