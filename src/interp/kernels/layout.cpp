// Layout kernels. Data movement copies whichever storage the dtype uses (.real for f32, .ints for
// i32 and bool); sum_to_shape sums each output's preimage in one fixed order, so its bits do not
// depend on the thread count.
#include "tensorgrad/ir/ops/ids/layout.h"

#include <numeric>

#include "../parallel.h"
#include "broadcast_indexer.h"
#include "families.h"
#include "tensorgrad/ir/launch_paths.h"

namespace tg::interp {

namespace {

constexpr std::int64_t kGrain = 4096;
// sum_to_shape's summation blocks. The Vulkan kernel (shaders/sum_to_shape.comp) sums the same
// blocks in parallel and their partials in order, so both give the same bits; short blocks keep
// its sequential chains short (a bias gradient over 4096 rows took ~430 us on an H200 as one
// 4096-term chain, the largest cost of a W2 training step).
constexpr std::int64_t kSumToShapeBlock = 256;

const SizeThreshold kGrainThreshold("interp", "layout", "grain", kGrain);
const SizeThreshold kSumToShapeBlockThreshold("interp", "sum_to_shape", "block", kSumToShapeBlock);

// Gathers with no size- or layout-dependent branch: one path per op.
const LaunchPath kReshape("interp", "reshape", "kernel");
const LaunchPath kPermute("interp", "permute", "kernel");
const LaunchPath kSwapAxes("interp", "swap_axes", "kernel");
const LaunchPath kBroadcastTo("interp", "broadcast_to", "kernel");
// sum_to_shape: preimages of at most one block summed inline, longer ones in blocks.
const LaunchPath kSumToShapeInline("interp", "sum_to_shape", "one_block");
const LaunchPath kSumToShapeBlocked("interp", "sum_to_shape", "blocks");

// out[i] = in[source_index(i)] for every output element, on the storage the dtype lives in.
template <class T, class SourceIndex>
void gather(const KernelCall<T>& call, SourceIndex&& source_index) {
  const auto n = call.output_type.size();
  auto copy = [&](auto& out, const auto& in) {
    parallel_chunks(n, kGrain, [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t i = begin; i < end; ++i) {
        out[static_cast<std::size_t>(i)] = in[static_cast<std::size_t>(source_index(i))];
      }
    });
  };
  if (is_float(call.output_type.dtype)) {
    copy(call.output.real, call.real(0));
  } else {
    copy(call.output.ints, call.ints(0));
  }
}

// Maps output flat indices to input flat indices when output axis i is input axis perm[i].
class PermutedIndexer {
 public:
  PermutedIndexer(const Shape& in_shape, const std::vector<std::int64_t>& perm) {
    const auto in_strides = row_major_strides(in_shape);
    for (auto axis : perm) {
      out_dims_.push_back(in_shape[static_cast<std::size_t>(axis)]);
      in_strides_.push_back(in_strides[static_cast<std::size_t>(axis)]);
    }
  }
  std::int64_t operator()(std::int64_t out_flat) const {
    std::int64_t in_flat = 0;
    for (std::size_t axis = out_dims_.size(); axis-- > 0;) {
      in_flat += (out_flat % out_dims_[axis]) * in_strides_[axis];
      out_flat /= out_dims_[axis];
    }
    return in_flat;
  }

 private:
  std::vector<std::int64_t> out_dims_;
  std::vector<std::int64_t> in_strides_;
};

template <class T>
void reshape_kernel(const KernelCall<T>& call) {
  kReshape.hit();
  gather(call, [](std::int64_t i) { return i; });
}

template <class T>
void permute_kernel(const KernelCall<T>& call) {
  kPermute.hit();
  gather(call, PermutedIndexer(call.in_type(0).shape, call.attrs().ints("perm")));
}

template <class T>
void swap_axes_kernel(const KernelCall<T>& call) {
  kSwapAxes.hit();
  std::vector<std::int64_t> perm(call.in_type(0).shape.size());
  std::iota(perm.begin(), perm.end(), 0);
  std::swap(perm[static_cast<std::size_t>(call.attrs().integer("axis0"))],
            perm[static_cast<std::size_t>(call.attrs().integer("axis1"))]);
  gather(call, PermutedIndexer(call.in_type(0).shape, perm));
}

template <class T>
void broadcast_to_kernel(const KernelCall<T>& call) {
  kBroadcastTo.hit();
  gather(call, BroadcastIndexer(call.in_type(0).shape, call.output_type.shape));
}

// The input is split into kept axes (the target's non-1 axes) and summed axes (leading extra axes
// and axes the target has as 1). Each output element adds its preimage in row-major order of the
// summed axes, the same order at every thread count.
template <class T>
void sum_to_shape_kernel(const KernelCall<T>& call) {
  const Shape& in_shape = call.in_type(0).shape;
  const Shape& out_shape = call.output_type.shape;
  const auto in_strides = row_major_strides(in_shape);
  const std::size_t leading = in_shape.size() - out_shape.size();

  // Offsets of the preimage relative to its first element, in summation order.
  std::vector<std::int64_t> preimage{0};
  for (std::size_t axis = 0; axis < in_shape.size(); ++axis) {
    const bool summed = axis < leading || (out_shape[axis - leading] == 1 && in_shape[axis] != 1);
    if (!summed) continue;
    std::vector<std::int64_t> wider;
    wider.reserve(preimage.size() * static_cast<std::size_t>(in_shape[axis]));
    for (auto base : preimage) {
      for (std::int64_t c = 0; c < in_shape[axis]; ++c) wider.push_back(base + c * in_strides[axis]);
    }
    preimage = std::move(wider);
  }

  // Where each output element's preimage starts: its coordinates on the kept axes.
  Shape start_strides(out_shape.size(), 0);
  for (std::size_t j = 0; j < out_shape.size(); ++j) {
    if (out_shape[j] != 1) start_strides[j] = in_strides[leading + j];
  }
  const auto& in = call.real(0);
  auto& out = call.output.real;
  const auto length = static_cast<std::int64_t>(preimage.size());
  if (call.output_type.size() > 0) (length <= kSumToShapeBlock ? kSumToShapeInline : kSumToShapeBlocked).hit();
  const std::int64_t grain = std::max<std::int64_t>(1, kGrain / std::max<std::int64_t>(length, 1));
  parallel_chunks(call.output_type.size(), grain, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t o = begin; o < end; ++o) {
      std::int64_t start = 0;
      std::int64_t rest = o;
      for (std::size_t j = out_shape.size(); j-- > 0;) {
        start += (rest % out_shape[j]) * start_strides[j];
        rest /= out_shape[j];
      }
      auto term = [&](std::int64_t r) {
        return in[static_cast<std::size_t>(start + preimage[static_cast<std::size_t>(r)])];
      };
      // Short preimages are summed inline (the same bits deterministic_sum gives for one block);
      // long ones are split into deterministic_sum's fixed blocks of kSumToShapeBlock terms.
      T acc(0);
      if (length <= kSumToShapeBlock) {
        for (std::int64_t r = 0; r < length; ++r) acc += term(r);
      } else {
        acc = deterministic_sum<T, kSumToShapeBlock>(length, term);
      }
      out[static_cast<std::size_t>(o)] = acc;
    }
  });
}

}  // namespace

template <class T>
void register_layout_kernels(KernelTable<T>& table) {
  table[static_cast<std::size_t>(op::Reshape)] = reshape_kernel<T>;
  table[static_cast<std::size_t>(op::Permute)] = permute_kernel<T>;
  table[static_cast<std::size_t>(op::SwapAxes)] = swap_axes_kernel<T>;
  table[static_cast<std::size_t>(op::BroadcastTo)] = broadcast_to_kernel<T>;
  table[static_cast<std::size_t>(op::SumToShape)] = sum_to_shape_kernel<T>;
}

template void register_layout_kernels<float>(KernelTable<float>&);
template void register_layout_kernels<double>(KernelTable<double>&);

}  // namespace tg::interp
