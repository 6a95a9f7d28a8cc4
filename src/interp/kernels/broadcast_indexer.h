#pragma once
// Index arithmetic shared by kernels: mapping a flat output index to the flat index of a
// broadcast input, and walking shapes with strides.
#include <cstdint>
#include <optional>
#include <vector>

#include "tensorgrad/ir/shape.h"

namespace tg::interp {

// Maps flat indices of `out_shape` to flat indices of an input of `in_shape` that broadcasts to it
// (NumPy rules: right-aligned, size-1 axes repeat). Precomputes per-axis strides once per kernel.
class BroadcastIndexer {
 public:
  BroadcastIndexer(const Shape& in_shape, const Shape& out_shape);
  // True when the input has the output's shape: the index maps to itself.
  bool identity() const { return identity_; }
  // The output's trailing block over which the input index moves in step with the output (step 1:
  // the input's trailing dims equal the output's) or stays (step 0: they are all 1). Every
  // run_length() consecutive outputs from a multiple of it read index(start) + step * offset.
  std::int64_t run_length() const { return run_length_; }
  std::int64_t run_step() const { return run_step_; }
  std::int64_t operator()(std::int64_t out_flat) const {
    if (identity_) return out_flat;
    std::int64_t in_flat = 0;
    for (std::size_t axis = out_dims_.size(); axis-- > 0;) {
      const std::int64_t coord = out_flat % out_dims_[axis];
      out_flat /= out_dims_[axis];
      in_flat += coord * in_strides_[axis];
    }
    return in_flat;
  }

 private:
  bool identity_ = false;
  std::vector<std::int64_t> out_dims_;
  std::vector<std::int64_t> in_strides_;  // 0 on broadcast axes, aligned with out_dims_
  std::int64_t run_length_ = 1;
  std::int64_t run_step_ = 0;
};

inline BroadcastIndexer::BroadcastIndexer(const Shape& in_shape, const Shape& out_shape)
    : identity_(in_shape == out_shape), out_dims_(out_shape), in_strides_(out_shape.size(), 0) {
  const auto in_strides = row_major_strides(in_shape);
  const std::size_t offset = out_shape.size() - in_shape.size();
  for (std::size_t i = 0; i < in_shape.size(); ++i) {
    in_strides_[offset + i] = in_shape[i] == 1 ? 0 : in_strides[i];
  }
  // From the last axis: size-1 output axes fit either step; the first other axis picks the step
  // (stride 0: broadcast, else 1), and the run grows while the axes keep it. A kept step 1 means
  // every axis so far has the output's dim, so the input's stride is the run length so far.
  std::optional<std::int64_t> step;
  for (std::size_t axis = out_dims_.size(); axis-- > 0;) {
    if (out_dims_[axis] == 1) continue;
    const std::int64_t axis_step = in_strides_[axis] == 0 ? 0 : 1;
    if (!step) step = axis_step;
    if (axis_step != *step) break;
    run_length_ *= out_dims_[axis];
  }
  run_step_ = step.value_or(0);
}

}  // namespace tg::interp
