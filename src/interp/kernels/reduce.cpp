// Reduction kernels: sum, mean, max, min over a set of axes, argmax and argmin over one axis.
// Every output element reduces its slice sequentially in index order (or, for a few huge
// contiguous slices, in fixed blocks combined in order), so results never depend on thread count.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "../parallel.h"
#include "families.h"

namespace tg::interp {

namespace {

// Output elements are computed in tiles of this many contiguous (innermost kept axis) elements,
// so a reduction over leading axes walks memory row by row rather than with a large stride.
constexpr std::int64_t kInnerTile = 256;
// Input elements per parallel task, roughly.
constexpr std::int64_t kWorkGrain = 16384;
// A contiguous slice at least this long, in a reduction with few outputs, is itself split in
// fixed blocks (deterministic_sum) so one huge reduction still uses every thread.
constexpr std::int64_t kSplitSliceLength = 32768;
constexpr std::int64_t kFewOutputs = 8;

// The input shape with size-1 axes dropped and adjacent axes of the same kind (reduced or kept)
// merged; a trailing kept run becomes `inner` (stride 1, the fastest output axis).
struct ReducePlan {
  std::vector<std::int64_t> outer_dims, outer_strides;  // kept axes before `inner`
  std::vector<std::int64_t> reduced_dims, reduced_strides;
  std::int64_t inner = 1;
  std::int64_t outer_count = 1;
  std::int64_t reduce_count = 1;
};

ReducePlan make_plan(const Shape& shape, const std::vector<bool>& reduced) {
  struct Group {
    std::int64_t dim, stride;
    bool reduced;
  };
  std::vector<Group> groups;
  const auto strides = row_major_strides(shape);
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 1) continue;
    if (!groups.empty() && groups.back().reduced == reduced[i]) {
      // Row-major: the merged group keeps the innermost stride and multiplies the extents.
      groups.back().dim *= shape[i];
      groups.back().stride = strides[i];
    } else {
      groups.push_back({shape[i], strides[i], reduced[i]});
    }
  }
  ReducePlan plan;
  if (!groups.empty() && !groups.back().reduced) {
    plan.inner = groups.back().dim;
    groups.pop_back();
  }
  for (const Group& g : groups) {
    auto& dims = g.reduced ? plan.reduced_dims : plan.outer_dims;
    auto& strides_out = g.reduced ? plan.reduced_strides : plan.outer_strides;
    dims.push_back(g.dim);
    strides_out.push_back(g.stride);
    (g.reduced ? plan.reduce_count : plan.outer_count) *= g.dim;
  }
  return plan;
}

std::int64_t outer_offset(const ReducePlan& plan, std::int64_t outer) {
  std::int64_t offset = 0;
  for (std::size_t axis = plan.outer_dims.size(); axis-- > 0;) {
    offset += (outer % plan.outer_dims[axis]) * plan.outer_strides[axis];
    outer /= plan.outer_dims[axis];
  }
  return offset;
}

// Calls visit(offset) for every reduced position in row-major order, offsets relative to a slice.
template <class Visit>
void for_each_reduced(const ReducePlan& plan, Visit&& visit) {
  const std::size_t depth = plan.reduced_dims.size();
  if (depth == 0) {
    visit(std::int64_t{0});
    return;
  }
  const std::int64_t last_dim = plan.reduced_dims[depth - 1];
  const std::int64_t last_stride = plan.reduced_strides[depth - 1];
  std::vector<std::int64_t> counter(depth - 1, 0);
  std::int64_t base = 0;
  for (;;) {
    for (std::int64_t k = 0; k < last_dim; ++k) visit(base + k * last_stride);
    // Advance the odometer over the outer reduced axes; done when it wraps around completely.
    std::size_t axis = depth - 1;
    for (;;) {
      if (axis == 0) return;
      --axis;
      base += plan.reduced_strides[axis];
      if (++counter[axis] < plan.reduced_dims[axis]) break;
      base -= plan.reduced_dims[axis] * plan.reduced_strides[axis];
      counter[axis] = 0;
    }
  }
}

template <class T>
struct SumOp {
  static T init() { return T(0); }
  static T combine(T acc, T v) { return acc + v; }
};
// NaN propagates, as in NumPy: once acc is NaN no comparison replaces it.
template <class T>
struct MaxOp {
  static T init() { return -std::numeric_limits<T>::infinity(); }
  static T combine(T acc, T v) { return (v > acc || std::isnan(v)) ? v : acc; }
};
template <class T>
struct MinOp {
  static T init() { return std::numeric_limits<T>::infinity(); }
  static T combine(T acc, T v) { return (v < acc || std::isnan(v)) ? v : acc; }
};

// A long contiguous slice split into fixed blocks whose partials combine in block order.
template <class T, class Op>
T reduce_contiguous_blocked(const T* x, std::int64_t n) {
  if constexpr (std::is_same_v<Op, SumOp<T>>) {
    return deterministic_sum<T>(n, [x](std::int64_t i) { return x[i]; });
  } else {
    constexpr std::int64_t kBlock = 4096;
    const std::int64_t blocks = (n + kBlock - 1) / kBlock;
    std::vector<T> partial(static_cast<std::size_t>(blocks), Op::init());
    parallel_chunks(blocks, 1, [&](std::int64_t b0, std::int64_t b1) {
      for (std::int64_t b = b0; b < b1; ++b) {
        T acc = Op::init();
        for (std::int64_t i = b * kBlock; i < std::min(n, (b + 1) * kBlock); ++i) acc = Op::combine(acc, x[i]);
        partial[static_cast<std::size_t>(b)] = acc;
      }
    });
    T total = Op::init();
    for (const T& p : partial) total = Op::combine(total, p);
    return total;
  }
}

template <class T, class Op>
void reduce_axes(const KernelCall<T>& call, bool divide_by_count) {
  const Shape& shape = call.in_type(0).shape;
  std::vector<bool> reduced(shape.size(), false);
  for (auto a : call.attrs().ints("axes")) reduced[static_cast<std::size_t>(a)] = true;
  const ReducePlan plan = make_plan(shape, reduced);
  const T* x = call.real(0).data();
  T* out = call.output.real.data();
  const T count = T(static_cast<double>(plan.reduce_count));
  const auto finish = [&](T acc) { return divide_by_count ? acc / count : acc; };
  if (plan.reduce_count == 0) {  // sum of nothing is 0, mean of nothing NaN (max/min refuse it)
    std::fill(call.output.real.begin(), call.output.real.end(), finish(Op::init()));
    return;
  }

  const bool contiguous_slices = plan.inner == 1 && plan.reduced_dims.size() == 1 && plan.reduced_strides[0] == 1;
  if (contiguous_slices && plan.reduce_count >= kSplitSliceLength && plan.outer_count <= kFewOutputs) {
    for (std::int64_t o = 0; o < plan.outer_count; ++o) {
      out[o] = finish(reduce_contiguous_blocked<T, Op>(x + o * plan.reduce_count, plan.reduce_count));
    }
    return;
  }

  const std::int64_t tiles_per_outer = (plan.inner + kInnerTile - 1) / kInnerTile;
  const std::int64_t tile_work = std::min(plan.inner, kInnerTile) * std::max<std::int64_t>(plan.reduce_count, 1);
  const std::int64_t grain = std::max<std::int64_t>(1, kWorkGrain / std::max<std::int64_t>(tile_work, 1));
  parallel_chunks(plan.outer_count * tiles_per_outer, grain, [&](std::int64_t t0, std::int64_t t1) {
    T acc[kInnerTile];
    for (std::int64_t t = t0; t < t1; ++t) {
      const std::int64_t outer = t / tiles_per_outer;
      const std::int64_t j0 = (t % tiles_per_outer) * kInnerTile;
      const std::int64_t width = std::min(kInnerTile, plan.inner - j0);
      const T* slice = x + outer_offset(plan, outer) + j0;
      std::fill(acc, acc + width, Op::init());
      for_each_reduced(plan, [&](std::int64_t offset) {
        const T* row = slice + offset;
        for (std::int64_t j = 0; j < width; ++j) acc[j] = Op::combine(acc[j], row[j]);
      });
      T* dst = out + outer * plan.inner + j0;
      for (std::int64_t j = 0; j < width; ++j) dst[j] = finish(acc[j]);
    }
  });
}

template <class T>
void sum_kernel(const KernelCall<T>& call) {
  reduce_axes<T, SumOp<T>>(call, false);
}
template <class T>
void mean_kernel(const KernelCall<T>& call) {
  reduce_axes<T, SumOp<T>>(call, true);
}
template <class T>
void max_kernel(const KernelCall<T>& call) {
  reduce_axes<T, MaxOp<T>>(call, false);
}
template <class T>
void min_kernel(const KernelCall<T>& call) {
  reduce_axes<T, MinOp<T>>(call, false);
}

// Index of the extremum along one axis; the first index wins on ties, and the first NaN wins
// over everything (as np.argmax does).
template <class T, bool kMax>
void arg_kernel(const KernelCall<T>& call) {
  const Shape& shape = call.in_type(0).shape;
  const auto axis = static_cast<std::size_t>(call.attrs().integer("axis"));
  const auto [outer, length, inner] = split_at_axis(shape, static_cast<std::int64_t>(axis));
  const T* x = call.real(0).data();
  std::int32_t* out = call.output.ints.data();

  const std::int64_t tiles_per_outer = (inner + kInnerTile - 1) / kInnerTile;
  const std::int64_t grain =
      std::max<std::int64_t>(1, kWorkGrain / std::max<std::int64_t>(std::min(inner, kInnerTile) * length, 1));
  parallel_chunks(outer * tiles_per_outer, grain, [&](std::int64_t t0, std::int64_t t1) {
    T best[kInnerTile];
    std::int32_t best_index[kInnerTile];
    for (std::int64_t t = t0; t < t1; ++t) {
      const std::int64_t o = t / tiles_per_outer;
      const std::int64_t j0 = (t % tiles_per_outer) * kInnerTile;
      const std::int64_t width = std::min(kInnerTile, inner - j0);
      const T* slice = x + o * length * inner + j0;
      std::copy(slice, slice + width, best);
      std::fill(best_index, best_index + width, 0);
      for (std::int64_t a = 1; a < length; ++a) {
        const T* row = slice + a * inner;
        for (std::int64_t j = 0; j < width; ++j) {
          const T v = row[j];
          const bool better = kMax ? v > best[j] : v < best[j];
          if (!std::isnan(best[j]) && (better || std::isnan(v))) {
            best[j] = v;
            best_index[j] = static_cast<std::int32_t>(a);
          }
        }
      }
      std::copy(best_index, best_index + width, out + o * inner + j0);
    }
  });
}

}  // namespace

template <class T>
void register_reduce_kernels(KernelTable<T>& table) {
  table[static_cast<std::size_t>(OpId::Sum)] = sum_kernel<T>;
  table[static_cast<std::size_t>(OpId::Mean)] = mean_kernel<T>;
  table[static_cast<std::size_t>(OpId::Max)] = max_kernel<T>;
  table[static_cast<std::size_t>(OpId::Min)] = min_kernel<T>;
  table[static_cast<std::size_t>(OpId::Argmax)] = arg_kernel<T, true>;
  table[static_cast<std::size_t>(OpId::Argmin)] = arg_kernel<T, false>;
}

template void register_reduce_kernels<float>(KernelTable<float>&);
template void register_reduce_kernels<double>(KernelTable<double>&);

}  // namespace tg::interp
