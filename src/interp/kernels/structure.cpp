// Structure kernels. Each views its tensors as [outer, axis, inner] around the op's axis: a row of
// the output (one outer index) is then a few contiguous runs copied from the inputs (or zero-filled,
// for pad). Rows are independent, so splitting them over threads cannot change any bit.
#include "tensorgrad/ir/ops/ids/structure.h"

#include <algorithm>

#include "../parallel.h"
#include "families.h"
#include "tensorgrad/ir/launch_paths.h"

namespace tg::interp {

namespace {

constexpr std::int64_t kGrain = 4096;
const SizeThreshold kGrainThreshold("interp", "structure", "grain", kGrain);

// Row copies with no size- or layout-dependent branch: one path per op.
const LaunchPath kNarrow("interp", "narrow", "kernel");
const LaunchPath kPad("interp", "pad", "kernel");
const LaunchPath kConcat("interp", "concat", "kernel");

// Calls row(o) for every outer index, in chunks holding about kGrain output elements.
template <class Row>
void for_each_row(std::int64_t outer, std::int64_t row_size, Row&& row) {
  const std::int64_t grain = std::max<std::int64_t>(1, kGrain / std::max<std::int64_t>(row_size, 1));
  parallel_chunks(outer, grain, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t o = begin; o < end; ++o) row(o);
  });
}

// Runs body(out_storage, input_storage_getter) on .real for f32 and .ints for i32 and bool, so each
// kernel is written once for every dtype.
template <class T, class Body>
void on_storage(const KernelCall<T>& call, Body&& body) {
  if (is_float(call.output_type.dtype)) {
    body(call.output.real, [&](std::size_t i) -> std::span<const T> { return call.real(i); });
  } else {
    body(call.output.ints, [&](std::size_t i) -> std::span<const std::int32_t> { return call.ints(i); });
  }
}

template <class T>
void narrow_kernel(const KernelCall<T>& call) {
  kNarrow.hit();
  const auto axis = call.attrs().integer("axis");
  const auto start = call.attrs().integer("start");
  const auto length = call.attrs().integer("length");
  const Shape& in_shape = call.in_type(0).shape;
  const auto dim = in_shape[static_cast<std::size_t>(axis)];
  const AxisSplit v = split_at_axis(in_shape, axis);
  on_storage(call, [&](auto& out, auto input) {
    const auto& in = input(0);
    for_each_row(v.outer, length * v.inner, [&](std::int64_t o) {
      const auto from = in.begin() + (o * dim + start) * v.inner;
      std::copy(from, from + length * v.inner, out.begin() + o * length * v.inner);
    });
  });
}

template <class T>
void pad_kernel(const KernelCall<T>& call) {
  kPad.hit();
  const auto axis = call.attrs().integer("axis");
  const auto before = call.attrs().integer("before");
  const auto after = call.attrs().integer("after");
  const Shape& in_shape = call.in_type(0).shape;
  const auto dim = in_shape[static_cast<std::size_t>(axis)];
  const auto padded = dim + before + after;
  const AxisSplit v = split_at_axis(in_shape, axis);
  on_storage(call, [&](auto& out, auto input) {
    const auto& in = input(0);
    using Value = typename std::decay_t<decltype(out)>::value_type;
    for_each_row(v.outer, padded * v.inner, [&](std::int64_t o) {
      auto to = out.begin() + o * padded * v.inner;
      to = std::fill_n(to, before * v.inner, Value(0));
      const auto from = in.begin() + o * dim * v.inner;
      to = std::copy(from, from + dim * v.inner, to);
      std::fill_n(to, after * v.inner, Value(0));
    });
  });
}

template <class T>
void concat_kernel(const KernelCall<T>& call) {
  kConcat.hit();
  const auto axis = call.attrs().integer("axis");
  const Shape& out_shape = call.output_type.shape;
  const auto total = out_shape[static_cast<std::size_t>(axis)];
  const AxisSplit v = split_at_axis(out_shape, axis);
  std::vector<std::int64_t> dims;
  for (std::size_t k = 0; k < call.inputs.size(); ++k) {
    dims.push_back(call.in_type(k).shape[static_cast<std::size_t>(axis)]);
  }
  on_storage(call, [&](auto& out, auto input) {
    for_each_row(v.outer, total * v.inner, [&](std::int64_t o) {
      auto to = out.begin() + o * total * v.inner;
      for (std::size_t k = 0; k < dims.size(); ++k) {
        const auto run = dims[k] * v.inner;
        const auto from = input(k).begin() + o * run;
        to = std::copy(from, from + run, to);
      }
    });
  });
}

}  // namespace

template <class T>
void register_structure_kernels(KernelTable<T>& table) {
  table[static_cast<std::size_t>(op::Narrow)] = narrow_kernel<T>;
  table[static_cast<std::size_t>(op::Pad)] = pad_kernel<T>;
  table[static_cast<std::size_t>(op::Concat)] = concat_kernel<T>;
}

template void register_structure_kernels<float>(KernelTable<float>&);
template void register_structure_kernels<double>(KernelTable<double>&);

}  // namespace tg::interp
