// Indexing kernels: one_hot, embedding, take_along_axis, scatter_add, softmax_causal, where_causal.
// Index values are checked in one sequential pass before any work, so the error names the first bad
// element whatever the thread count. scatter_add sums each output element's updates in index order.
#include "tensorgrad/ir/ops/ids/indexing.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <string_view>

#include "../parallel.h"
#include "families.h"
#include "tensorgrad/ir/error.h"
#include "tensorgrad/ir/launch_paths.h"

namespace tg::interp {

namespace {

constexpr std::int64_t kGrain = 4096;
// scatter_add works on tiles of this many neighbouring inner positions, so every pass reads rows.
constexpr std::int64_t kInnerTile = 256;
const SizeThreshold kGrainThreshold("interp", "indexing", "grain", kGrain);
const SizeThreshold kInnerTileThreshold("interp", "scatter_add", "inner tile", kInnerTile);

const LaunchPath kOneHot("interp", "one_hot", "kernel");
const LaunchPath kEmbedding("interp", "embedding", "kernel");
const LaunchPath kTakeAlongAxis("interp", "take_along_axis", "kernel");
// scatter_add: one tile of inner positions per outer position (inner <= kInnerTile) or several.
const LaunchPath kScatterAddOneTile("interp", "scatter_add", "one_tile");
const LaunchPath kScatterAddSeveralTiles("interp", "scatter_add", "several_tiles");
const LaunchPath kSoftmaxCausal("interp", "softmax_causal", "kernel");
const LaunchPath kWhereCausal("interp", "where_causal", "kernel");

void require_in_range(std::string_view op, std::string_view what, std::span<const std::int32_t> indices,
                      std::int64_t extent) {
  for (std::size_t i = 0; i < indices.size(); ++i) {
    if (indices[i] < 0 || indices[i] >= extent) {
      throw RuntimeError(std::string(op) + ": " + std::string(what) + " " + std::to_string(indices[i]) +
                         " is out of range [0, " + std::to_string(extent) + ") at element " + std::to_string(i));
    }
  }
}

template <class T>
void one_hot_kernel(const KernelCall<T>& call) {
  kOneHot.hit();
  const std::int64_t depth = call.attrs().integer("depth");
  const auto& indices = call.ints(0);
  require_in_range("one_hot", "index", indices, depth);
  T* out = call.output.real.data();
  parallel_chunks(static_cast<std::int64_t>(indices.size()), std::max<std::int64_t>(1, kGrain / depth),
                  [&](std::int64_t begin, std::int64_t end) {
                    for (std::int64_t i = begin; i < end; ++i) {
                      T* row = out + i * depth;
                      std::fill(row, row + depth, T(0));
                      row[indices[static_cast<std::size_t>(i)]] = T(1);
                    }
                  });
}

template <class T>
void embedding_kernel(const KernelCall<T>& call) {
  kEmbedding.hit();
  const Shape& table_shape = call.in_type(0).shape;
  const std::int64_t width = table_shape[1];
  const auto& indices = call.ints(1);
  require_in_range("embedding", "index", indices, table_shape[0]);
  const T* table = call.real(0).data();
  T* out = call.output.real.data();
  parallel_chunks(static_cast<std::int64_t>(indices.size()),
                  std::max<std::int64_t>(1, kGrain / std::max<std::int64_t>(width, 1)),
                  [&](std::int64_t begin, std::int64_t end) {
                    for (std::int64_t i = begin; i < end; ++i) {
                      const T* row = table + indices[static_cast<std::size_t>(i)] * width;
                      std::copy(row, row + width, out + i * width);
                    }
                  });
}

// out[o, k, i] = x[o, indices[o, k, i], i] for any element type (real values or ints).
template <class Elem>
void gather_along_axis(std::span<const Elem> x, std::span<const std::int32_t> indices, std::span<Elem> out,
                       AxisSplit split, std::int64_t x_extent, std::int64_t index_extent) {
  const std::int64_t slab = index_extent * split.inner;  // output elements per outer position
  parallel_chunks(static_cast<std::int64_t>(out.size()), kGrain, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t f = begin; f < end; ++f) {
      const std::int64_t o = f / slab;
      const std::int64_t i = f % split.inner;
      const std::int64_t k = indices[static_cast<std::size_t>(f)];
      out[static_cast<std::size_t>(f)] = x[static_cast<std::size_t>((o * x_extent + k) * split.inner + i)];
    }
  });
}

template <class T>
void take_along_axis_kernel(const KernelCall<T>& call) {
  kTakeAlongAxis.hit();
  const auto axis = static_cast<std::size_t>(call.attrs().integer("axis"));
  const std::int64_t x_extent = call.in_type(0).shape[axis];
  const Shape& index_shape = call.in_type(1).shape;
  const auto& indices = call.ints(1);
  require_in_range("take_along_axis", "index", indices, x_extent);
  const AxisSplit split = split_at_axis(index_shape, static_cast<std::int64_t>(axis));
  if (is_float(call.in_type(0).dtype)) {
    gather_along_axis(call.real(0), indices, call.output.real, split, x_extent, index_shape[axis]);
  } else {
    gather_along_axis(call.ints(0), indices, call.output.ints, split, x_extent, index_shape[axis]);
  }
}

// Each task owns a tile of inner positions of one outer position, i.e. whole output columns, and adds
// the updates of that tile in index order k = 0, 1, ...: no two tasks touch one output element.
template <class T>
void scatter_add_kernel(const KernelCall<T>& call) {
  const auto axis = static_cast<std::size_t>(call.attrs().integer("axis"));
  const std::int64_t size = call.attrs().integer("size");
  const Shape& index_shape = call.in_type(1).shape;
  const auto& indices = call.ints(1);
  require_in_range("scatter_add", "index", indices, size);
  const AxisSplit split = split_at_axis(index_shape, static_cast<std::int64_t>(axis));
  const std::int64_t updates_per_column = index_shape[axis];
  const T* updates = call.real(0).data();
  T* out = call.output.real.data();
  if (split.inner > 0) (split.inner > kInnerTile ? kScatterAddSeveralTiles : kScatterAddOneTile).hit();

  const std::int64_t tiles_per_outer = (split.inner + kInnerTile - 1) / kInnerTile;
  const std::int64_t tile_work = std::min(split.inner, kInnerTile) * (updates_per_column + size);
  const std::int64_t grain = std::max<std::int64_t>(1, kGrain / std::max<std::int64_t>(tile_work, 1));
  parallel_chunks(split.outer * tiles_per_outer, grain, [&](std::int64_t t0, std::int64_t t1) {
    for (std::int64_t t = t0; t < t1; ++t) {
      const std::int64_t o = t / tiles_per_outer;
      const std::int64_t j0 = (t % tiles_per_outer) * kInnerTile;
      const std::int64_t width = std::min(kInnerTile, split.inner - j0);
      T* dst = out + o * size * split.inner + j0;
      for (std::int64_t s = 0; s < size; ++s) std::fill(dst + s * split.inner, dst + s * split.inner + width, T(0));
      for (std::int64_t k = 0; k < updates_per_column; ++k) {
        const std::int64_t src = (o * updates_per_column + k) * split.inner + j0;
        for (std::int64_t j = 0; j < width; ++j) {
          dst[indices[static_cast<std::size_t>(src + j)] * split.inner + j] += updates[src + j];
        }
      }
    }
  });
}

// Row i of each [T, T] matrix is a softmax over columns 0..i; columns past i are 0.
template <class T>
void softmax_causal_kernel(const KernelCall<T>& call) {
  kSoftmaxCausal.hit();
  const std::int64_t length = call.in_type(0).shape.back();
  if (length == 0) return;
  const std::int64_t rows = call.in_type(0).size() / length;
  const T* x = call.real(0).data();
  T* y = call.output.real.data();
  parallel_chunks(rows, std::max<std::int64_t>(1, kGrain / length), [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t r = begin; r < end; ++r) {
      const T* row = x + r * length;
      T* out = y + r * length;
      const std::int64_t visible = r % length + 1;
      T row_max = -std::numeric_limits<T>::infinity();
      for (std::int64_t j = 0; j < visible; ++j) row_max = std::max(row_max, row[j]);
      T total = 0;
      for (std::int64_t j = 0; j < visible; ++j) {
        out[j] = std::exp(row[j] - row_max);
        total += out[j];
      }
      for (std::int64_t j = 0; j < visible; ++j) out[j] /= total;
      std::fill(out + visible, out + length, T(0));
    }
  });
}

template <class T>
void where_causal_kernel(const KernelCall<T>& call) {
  kWhereCausal.hit();
  const std::int64_t length = call.in_type(0).shape.back();
  const T value = static_cast<T>(call.attrs().real("value"));
  const T* x = call.real(0).data();
  T* y = call.output.real.data();
  parallel_chunks(call.in_type(0).size(), kGrain, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t f = begin; f < end; ++f) {
      const std::int64_t col = f % length;
      const std::int64_t row = (f / length) % length;
      y[f] = col > row ? value : x[f];
    }
  });
}

}  // namespace

template <class T>
void register_indexing_kernels(KernelTable<T>& table) {
  table[static_cast<std::size_t>(op::OneHot)] = one_hot_kernel<T>;
  table[static_cast<std::size_t>(op::Embedding)] = embedding_kernel<T>;
  table[static_cast<std::size_t>(op::TakeAlongAxis)] = take_along_axis_kernel<T>;
  table[static_cast<std::size_t>(op::ScatterAdd)] = scatter_add_kernel<T>;
  table[static_cast<std::size_t>(op::SoftmaxCausal)] = softmax_causal_kernel<T>;
  table[static_cast<std::size_t>(op::WhereCausal)] = where_causal_kernel<T>;
}

template void register_indexing_kernels<float>(KernelTable<float>&);
template void register_indexing_kernels<double>(KernelTable<double>&);

}  // namespace tg::interp
