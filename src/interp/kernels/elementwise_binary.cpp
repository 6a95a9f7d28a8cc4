// Kernels of the elementwise binary family: arithmetic, comparisons and where, all with NumPy
// broadcasting. Each output element is computed by exactly one loop iteration, so results do not
// depend on the thread count.
#include "tensorgrad/ir/ops/ids/elementwise_binary.h"

#include <cmath>

#include "../parallel.h"
#include "broadcast_indexer.h"
#include "families.h"
#include "tensorgrad/ir/launch_paths.h"

namespace tg::interp {

namespace {

constexpr std::int64_t kGrain = 4096;
const SizeThreshold kGrainThreshold("interp", "elementwise_binary", "grain", kGrain);

// Arithmetic and comparisons: a plain loop when neither operand broadcasts, else every operand
// indexed through its broadcast map (a one-element operand read at 0).
const LaunchPath kSameShape("interp", "elementwise_binary", "same_shape");
const LaunchPath kBroadcast("interp", "elementwise_binary", "broadcast");
const LaunchPath kWhere("interp", "where", "kernel");

// One operand as the output loop sees it: its data and the map from output to input indices.
template <class V>
struct BroadcastInput {
  std::span<const V> data;
  BroadcastIndexer index;
  bool scalar;  // one element: every output reads data[0] (skips the per-axis index arithmetic)

  BroadcastInput(std::span<const V> values, const Shape& shape, const Shape& out_shape)
      : data(values), index(shape, out_shape), scalar(num_elements(shape) == 1) {}
  V at(std::int64_t out_flat) const { return data[static_cast<std::size_t>(scalar ? 0 : index(out_flat))]; }
};

// out[i] = op(a[i], b[i]) over the broadcast output; a plain loop when neither input broadcasts.
template <class In, class Out, class Op>
void broadcast_apply(const BroadcastInput<In>& a, const BroadcastInput<In>& b, std::span<Out> out, Op op) {
  const auto n = static_cast<std::int64_t>(out.size());
  if (a.index.identity() && b.index.identity()) {
    kSameShape.hit();
    const In* pa = a.data.data();
    const In* pb = b.data.data();
    Out* po = out.data();
    parallel_chunks(n, kGrain, [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t i = begin; i < end; ++i) po[i] = static_cast<Out>(op(pa[i], pb[i]));
    });
    return;
  }
  kBroadcast.hit();
  parallel_chunks(n, kGrain, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t i = begin; i < end; ++i)
      out[static_cast<std::size_t>(i)] = static_cast<Out>(op(a.at(i), b.at(i)));
  });
}

struct AddOp {
  template <class T>
  T operator()(T a, T b) const {
    return a + b;
  }
};
struct SubOp {
  template <class T>
  T operator()(T a, T b) const {
    return a - b;
  }
};
struct MulOp {
  template <class T>
  T operator()(T a, T b) const {
    return a * b;
  }
};
struct DivOp {
  template <class T>
  T operator()(T a, T b) const {
    return a / b;
  }
};
// NaN in either input gives NaN (as in NumPy and PyTorch); ties return input 0, which the grad
// rules rely on.
struct MinimumOp {
  template <class T>
  T operator()(T a, T b) const {
    return (b < a || std::isnan(b)) ? b : a;
  }
};
struct MaximumOp {
  template <class T>
  T operator()(T a, T b) const {
    return (b > a || std::isnan(b)) ? b : a;
  }
};
struct LessOp {
  template <class T>
  bool operator()(T a, T b) const {
    return a < b;
  }
};
struct GreaterOp {
  template <class T>
  bool operator()(T a, T b) const {
    return a > b;
  }
};
struct EqualOp {
  template <class T>
  bool operator()(T a, T b) const {
    return a == b;
  }
};

template <class T, class Op>
void arithmetic_kernel(const KernelCall<T>& call) {
  const Shape& out_shape = call.output_type.shape;
  broadcast_apply(BroadcastInput<T>(call.real(0), call.in_type(0).shape, out_shape),
                  BroadcastInput<T>(call.real(1), call.in_type(1).shape, out_shape), call.output.real, Op{});
}

template <class T, class Op>
void comparison_kernel(const KernelCall<T>& call) {
  const Shape& out_shape = call.output_type.shape;
  broadcast_apply(BroadcastInput<T>(call.real(0), call.in_type(0).shape, out_shape),
                  BroadcastInput<T>(call.real(1), call.in_type(1).shape, out_shape), call.output.ints, Op{});
}

// where() selects between values of any dtype: f32 values live in .real, i32 and bool in .ints.
template <class V>
void select(const BroadcastInput<std::int32_t>& condition, const BroadcastInput<V>& if_true,
            const BroadcastInput<V>& if_false, std::span<V> out) {
  const auto n = static_cast<std::int64_t>(out.size());
  parallel_chunks(n, kGrain, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t i = begin; i < end; ++i) {
      out[static_cast<std::size_t>(i)] = condition.at(i) != 0 ? if_true.at(i) : if_false.at(i);
    }
  });
}

template <class T>
void where_kernel(const KernelCall<T>& call) {
  kWhere.hit();
  const Shape& out_shape = call.output_type.shape;
  const BroadcastInput<std::int32_t> condition(call.ints(0), call.in_type(0).shape, out_shape);
  if (is_float(call.output_type.dtype)) {
    select(condition, BroadcastInput<T>(call.real(1), call.in_type(1).shape, out_shape),
           BroadcastInput<T>(call.real(2), call.in_type(2).shape, out_shape), call.output.real);
  } else {
    select(condition, BroadcastInput<std::int32_t>(call.ints(1), call.in_type(1).shape, out_shape),
           BroadcastInput<std::int32_t>(call.ints(2), call.in_type(2).shape, out_shape), call.output.ints);
  }
}

constexpr std::size_t slot(OpId id) { return static_cast<std::size_t>(id); }

}  // namespace

template <class T>
void register_elementwise_binary_kernels(KernelTable<T>& table) {
  table[slot(op::Add)] = arithmetic_kernel<T, AddOp>;
  table[slot(op::Sub)] = arithmetic_kernel<T, SubOp>;
  table[slot(op::Mul)] = arithmetic_kernel<T, MulOp>;
  table[slot(op::Div)] = arithmetic_kernel<T, DivOp>;
  table[slot(op::Minimum)] = arithmetic_kernel<T, MinimumOp>;
  table[slot(op::Maximum)] = arithmetic_kernel<T, MaximumOp>;
  table[slot(op::Less)] = comparison_kernel<T, LessOp>;
  table[slot(op::Greater)] = comparison_kernel<T, GreaterOp>;
  table[slot(op::Equal)] = comparison_kernel<T, EqualOp>;
  table[slot(op::Where)] = where_kernel<T>;
}

template void register_elementwise_binary_kernels<float>(KernelTable<float>&);
template void register_elementwise_binary_kernels<double>(KernelTable<double>&);

}  // namespace tg::interp
