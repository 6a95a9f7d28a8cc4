// Reduction kernels: sum, mean, max, min over a set of axes, argmax and argmin over one axis.
// Sums add each output's slice in the fixed tree of ../tree_sum.h (error growing like log n; the
// same bits for a contiguous, strided or block-split slice); max and min fold the slice in index
// order. Neither depends on the thread count.
#include "tensorgrad/ir/ops/ids/reduce.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "../parallel.h"
#include "../tree_sum.h"
#include "families.h"
#include "tensorgrad/ir/launch_paths.h"

namespace tg::interp {

namespace {

// Output elements are computed in tiles of this many contiguous (innermost kept axis) elements,
// so a reduction over leading axes walks memory row by row rather than with a large stride.
constexpr std::int64_t kInnerTile = 256;
// Input elements per parallel task, roughly.
constexpr std::int64_t kWorkGrain = 16384;
// A contiguous slice at least this long, in a reduction with few outputs, is itself split in
// fixed blocks so one huge reduction still uses every thread.
constexpr std::int64_t kSplitSliceLength = 32768;
constexpr std::int64_t kFewOutputs = 8;
// A split slice's blocks: 2^kBlockLevel leaves of the sum tree, so a block's tree_sum is exactly
// the partial the streaming tree holds at that level and splitting changes no bit.
constexpr int kBlockLevel = 9;
constexpr std::int64_t kBlockTerms = kTreeLeaf << kBlockLevel;  // 4096

const SizeThreshold kInnerTileThreshold("interp", "reduce", "inner tile", kInnerTile);
const SizeThreshold kWorkGrainThreshold("interp", "reduce", "work grain", kWorkGrain);
const SizeThreshold kSplitSliceThreshold("interp", "reduce", "split slice length", kSplitSliceLength);
const SizeThreshold kFewOutputsThreshold("interp", "reduce", "split slice outputs", kFewOutputs);
const SizeThreshold kBlockThreshold("interp", "reduce", "split block terms", kBlockTerms);
const SizeThreshold kLeafThreshold("interp", "reduce", "sum tree leaf", kTreeLeaf);

// The paths of sum, mean, max and min: few long contiguous slices split into parallel blocks;
// other contiguous slices, one output each; else tiles of outputs along the inner kept axis, one
// tile per outer position (inner <= kInnerTile) or several.
struct ReducePaths {
  LaunchPath blocked_slices, contiguous_rows, one_tile, several_tiles;
};
const ReducePaths kSumPaths{{"interp", "sum", "blocked_slices"},
                            {"interp", "sum", "contiguous_rows"},
                            {"interp", "sum", "one_tile"},
                            {"interp", "sum", "several_tiles"}};
const ReducePaths kMeanPaths{{"interp", "mean", "blocked_slices"},
                             {"interp", "mean", "contiguous_rows"},
                             {"interp", "mean", "one_tile"},
                             {"interp", "mean", "several_tiles"}};
const ReducePaths kMaxPaths{{"interp", "max", "blocked_slices"},
                            {"interp", "max", "contiguous_rows"},
                            {"interp", "max", "one_tile"},
                            {"interp", "max", "several_tiles"}};
const ReducePaths kMinPaths{{"interp", "min", "blocked_slices"},
                            {"interp", "min", "contiguous_rows"},
                            {"interp", "min", "one_tile"},
                            {"interp", "min", "several_tiles"}};
// argmax and argmin: always tiles.
const LaunchPath kArgmaxOneTile("interp", "argmax", "one_tile");
const LaunchPath kArgmaxSeveralTiles("interp", "argmax", "several_tiles");
const LaunchPath kArgminOneTile("interp", "argmin", "one_tile");
const LaunchPath kArgminSeveralTiles("interp", "argmin", "several_tiles");

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

// One long contiguous slice split into fixed blocks computed in parallel. Sums: each block's
// tree_sum enters the slice's tree at kBlockLevel, then the tail's leaves: the bits of tree_sum
// over the whole slice. Max and min: block results combined in block order.
template <class T, class Op>
T reduce_contiguous_blocked(const T* x, std::int64_t n) {
  const std::int64_t blocks = n / kBlockTerms;
  std::vector<T> partial(static_cast<std::size_t>(blocks), Op::init());
  parallel_chunks(blocks, 1, [&](std::int64_t b0, std::int64_t b1) {
    for (std::int64_t b = b0; b < b1; ++b) {
      const T* block = x + b * kBlockTerms;
      T acc = Op::init();
      if constexpr (std::is_same_v<Op, SumOp<T>>) {
        acc = tree_sum(block, kBlockTerms);
      } else {
        for (std::int64_t i = 0; i < kBlockTerms; ++i) acc = Op::combine(acc, block[i]);
      }
      partial[static_cast<std::size_t>(b)] = acc;
    }
  });
  if constexpr (std::is_same_v<Op, SumOp<T>>) {
    TreeSum<T> tree;
    for (const T& p : partial) tree.push(p, kBlockLevel);
    tree.push_terms(x + blocks * kBlockTerms, n - blocks * kBlockTerms);
    return tree.total();
  } else {
    T total = Op::init();
    for (const T& p : partial) total = Op::combine(total, p);
    for (std::int64_t i = blocks * kBlockTerms; i < n; ++i) total = Op::combine(total, x[i]);
    return total;
  }
}

// One contiguous slice of a reduction with many outputs, on the calling thread.
template <class T, class Op>
T reduce_contiguous(const T* x, std::int64_t n) {
  if constexpr (std::is_same_v<Op, SumOp<T>>) {
    return tree_sum(x, n);
  } else {
    T acc = Op::init();
    for (std::int64_t i = 0; i < n; ++i) acc = Op::combine(acc, x[i]);
    return acc;
  }
}

// A tile of up to kInnerTile outputs whose slices are walked side by side, row by row: sums in
// the tree (TreeSumLanes), max and min folded in index order.
template <class T, class Op>
class TileAccumulator {
 public:
  explicit TileAccumulator(std::int64_t length) : tree_(kSum ? kInnerTile : 0, length) {}
  void start(std::int64_t width) {
    width_ = width;
    if constexpr (kSum) {
      tree_.start(width);
    } else {
      std::fill(acc_, acc_ + width, Op::init());
    }
  }
  void add_row(const T* row) {
    if constexpr (kSum) {
      tree_.add_row(row);
    } else {
      for (std::int64_t j = 0; j < width_; ++j) acc_[j] = Op::combine(acc_[j], row[j]);
    }
  }
  template <class Finish>
  void finish(T* out, Finish&& finish) {
    if constexpr (kSum) {
      tree_.finish(out, finish);
    } else {
      for (std::int64_t j = 0; j < width_; ++j) out[j] = finish(acc_[j]);
    }
  }

 private:
  static constexpr bool kSum = std::is_same_v<Op, SumOp<T>>;
  TreeSumLanes<T> tree_;  // empty for max and min
  T acc_[kSum ? 1 : kInnerTile];
  std::int64_t width_ = 0;
};

template <class T, class Op>
void reduce_axes(const KernelCall<T>& call, bool divide_by_count, const ReducePaths& paths) {
  const Shape& shape = call.in_type(0).shape;
  std::vector<bool> reduced(shape.size(), false);
  for (auto a : call.attrs().ints("axes")) reduced[static_cast<std::size_t>(a)] = true;
  const ReducePlan plan = make_plan(shape, reduced);
  const T* x = call.real(0).data();
  T* out = call.output.real.data();
  const T count = T(static_cast<double>(plan.reduce_count));
  const auto finish = [&](T acc) { return divide_by_count ? acc / count : acc; };
  // Sum of nothing is 0, mean of nothing NaN (max/min refuse it); nothing to reduce on no outputs.
  // Graphs with a zero dim take no named path.
  if (plan.reduce_count == 0 || plan.outer_count * plan.inner == 0) {
    std::fill(call.output.real.begin(), call.output.real.end(), finish(Op::init()));
    return;
  }

  const bool contiguous_slices = plan.inner == 1 && plan.reduced_dims.size() == 1 && plan.reduced_strides[0] == 1;
  if (contiguous_slices && plan.reduce_count >= kSplitSliceLength && plan.outer_count <= kFewOutputs) {
    paths.blocked_slices.hit();
    for (std::int64_t o = 0; o < plan.outer_count; ++o) {
      out[o] = finish(reduce_contiguous_blocked<T, Op>(x + o * plan.reduce_count, plan.reduce_count));
    }
    return;
  }
  if (contiguous_slices) {
    paths.contiguous_rows.hit();
    const std::int64_t n = plan.reduce_count;
    parallel_chunks(plan.outer_count, std::max<std::int64_t>(1, kWorkGrain / n), [&](std::int64_t o0, std::int64_t o1) {
      for (std::int64_t o = o0; o < o1; ++o) out[o] = finish(reduce_contiguous<T, Op>(x + o * n, n));
    });
    return;
  }

  (plan.inner > kInnerTile ? paths.several_tiles : paths.one_tile).hit();
  const std::int64_t tiles_per_outer = (plan.inner + kInnerTile - 1) / kInnerTile;
  const std::int64_t tile_work = std::min(plan.inner, kInnerTile) * plan.reduce_count;
  const std::int64_t grain = std::max<std::int64_t>(1, kWorkGrain / std::max<std::int64_t>(tile_work, 1));
  parallel_chunks(plan.outer_count * tiles_per_outer, grain, [&](std::int64_t t0, std::int64_t t1) {
    TileAccumulator<T, Op> acc(plan.reduce_count);
    for (std::int64_t t = t0; t < t1; ++t) {
      const std::int64_t outer = t / tiles_per_outer;
      const std::int64_t j0 = (t % tiles_per_outer) * kInnerTile;
      const T* slice = x + outer_offset(plan, outer) + j0;
      acc.start(std::min(kInnerTile, plan.inner - j0));
      for_each_reduced(plan, [&](std::int64_t offset) { acc.add_row(slice + offset); });
      acc.finish(out + outer * plan.inner + j0, finish);
    }
  });
}

template <class T>
void sum_kernel(const KernelCall<T>& call) {
  reduce_axes<T, SumOp<T>>(call, false, kSumPaths);
}
template <class T>
void mean_kernel(const KernelCall<T>& call) {
  reduce_axes<T, SumOp<T>>(call, true, kMeanPaths);
}
template <class T>
void max_kernel(const KernelCall<T>& call) {
  reduce_axes<T, MaxOp<T>>(call, false, kMaxPaths);
}
template <class T>
void min_kernel(const KernelCall<T>& call) {
  reduce_axes<T, MinOp<T>>(call, false, kMinPaths);
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
  if (outer * inner == 0) return;  // no outputs (a zero dim: no named path)
  if constexpr (kMax) {
    (inner > kInnerTile ? kArgmaxSeveralTiles : kArgmaxOneTile).hit();
  } else {
    (inner > kInnerTile ? kArgminSeveralTiles : kArgminOneTile).hit();
  }

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
  table[static_cast<std::size_t>(op::Sum)] = sum_kernel<T>;
  table[static_cast<std::size_t>(op::Mean)] = mean_kernel<T>;
  table[static_cast<std::size_t>(op::Max)] = max_kernel<T>;
  table[static_cast<std::size_t>(op::Min)] = min_kernel<T>;
  table[static_cast<std::size_t>(op::Argmax)] = arg_kernel<T, true>;
  table[static_cast<std::size_t>(op::Argmin)] = arg_kernel<T, false>;
}

template void register_reduce_kernels<float>(KernelTable<float>&);
template void register_reduce_kernels<double>(KernelTable<double>&);

}  // namespace tg::interp
