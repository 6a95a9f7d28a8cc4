// Kernels of the elementwise binary family: arithmetic, comparisons and where, all with NumPy
// broadcasting. Each output element is computed by exactly one loop iteration, so results do not
// depend on the thread count.
#include "tensorgrad/ir/ops/ids/elementwise_binary.h"

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "../parallel.h"
#include "broadcast_indexer.h"
#include "families.h"
#include "tensorgrad/ir/launch_paths.h"

namespace tg::interp {

namespace {

constexpr std::int64_t kGrain = 4096;
const SizeThreshold kGrainThreshold("interp", "elementwise_binary", "grain", kGrain);

// Arithmetic and comparisons: a plain loop when neither operand broadcasts, else run by run (below),
// else every operand indexed through its broadcast map (a one-element operand read at 0).
const LaunchPath kSameShape("interp", "elementwise_binary", "same_shape");
const LaunchPath kBroadcast("interp", "elementwise_binary", "broadcast");
const LaunchPath kBroadcastRuns("interp", "elementwise_binary", "broadcast_runs");
const LaunchPath kWhere("interp", "where", "kernel");
const LaunchPath kWhereRuns("interp", "where", "runs");
// Broadcast operands whose runs (BroadcastIndexer::run_length) are at least this long are read
// run by run with pointer steps of 0 or 1 (a bias [C, 1, 1] under [N, C, H, W] adds one value to
// each H*W plane), not through the per-element index arithmetic; shorter runs keep it. Only
// interp_f32 reads runs: the f64 oracle keeps the per-element loop it is checked against.
constexpr std::int64_t kMinRun = 8;
template <class T>
constexpr bool kReadsRuns = std::is_same_v<T, float>;
const SizeThreshold kMinRunThreshold("interp", "elementwise_binary", "broadcast_min_run", kMinRun);

// One operand as the output loop sees it: its data and the map from output to input indices.
template <class V>
struct BroadcastInput {
  std::span<const V> data;
  BroadcastIndexer index;
  bool scalar;  // one element: every output reads data[0] (skips the per-axis index arithmetic)

  BroadcastInput(std::span<const V> values, const Shape& shape, const Shape& out_shape)
      : data(values), index(shape, out_shape), scalar(num_elements(shape) == 1) {}
  V at(std::int64_t out_flat) const { return data[static_cast<std::size_t>(scalar ? 0 : index(out_flat))]; }
  std::int64_t run_length(std::int64_t n) const { return scalar ? n : index.run_length(); }
  std::int64_t run_step() const { return scalar ? 0 : index.run_step(); }
  const V* run_start(std::int64_t out_flat) const { return data.data() + (scalar ? 0 : index(out_flat)); }
};

// Calls body(begin, end, offsets...) over [begin, end) cut at multiples of `run`, with each
// operand's pointer at begin; within a piece operand k advances by its run_step().
template <class Body, class... Inputs>
void for_each_run(std::int64_t begin, std::int64_t end, std::int64_t run, Body&& body, const Inputs&... inputs) {
  for (std::int64_t i = begin; i < end;) {
    const std::int64_t stop = std::min(end, (i / run + 1) * run);
    body(i, stop, inputs.run_start(i)...);
    i = stop;
  }
}

// out[i] = op(a[i], b[i]) over the broadcast output; a plain loop when neither input broadcasts.
template <class In, class Out, class Op>
void broadcast_apply(const BroadcastInput<In>& a, const BroadcastInput<In>& b, std::span<Out> out, Op op,
                     bool read_runs) {
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
  const std::int64_t run = std::min(a.run_length(n), b.run_length(n));
  if (read_runs && run >= kMinRun) {
    kBroadcastRuns.hit();
    const std::int64_t sa = a.run_step(), sb = b.run_step();
    Out* po = out.data();
    parallel_chunks(n, kGrain, [&](std::int64_t begin, std::int64_t end) {
      for_each_run(
          begin, end, run,
          [&](std::int64_t from, std::int64_t to, const In* pa, const In* pb) {
            // Constant steps, so the compiler vectorises the common cases (a bias: one side held).
            Out* o = po + from;
            const std::int64_t count = to - from;
            if (sa == 1 && sb == 1) {
              for (std::int64_t i = 0; i < count; ++i) o[i] = static_cast<Out>(op(pa[i], pb[i]));
            } else if (sa == 1) {
              const In held = *pb;
              for (std::int64_t i = 0; i < count; ++i) o[i] = static_cast<Out>(op(pa[i], held));
            } else if (sb == 1) {
              const In held = *pa;
              for (std::int64_t i = 0; i < count; ++i) o[i] = static_cast<Out>(op(held, pb[i]));
            } else {  // both held: an output broadcast past both operands, which NumPy's rules do not make
              for (std::int64_t i = 0; i < count; ++i) o[i] = static_cast<Out>(op(*pa, *pb));
            }
          },
          a, b);
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
                  BroadcastInput<T>(call.real(1), call.in_type(1).shape, out_shape), call.output.real, Op{},
                  kReadsRuns<T>);
}

template <class T, class Op>
void comparison_kernel(const KernelCall<T>& call) {
  const Shape& out_shape = call.output_type.shape;
  broadcast_apply(BroadcastInput<T>(call.real(0), call.in_type(0).shape, out_shape),
                  BroadcastInput<T>(call.real(1), call.in_type(1).shape, out_shape), call.output.ints, Op{},
                  kReadsRuns<T>);
}

// where() selects between values of any dtype: f32 values live in .real, i32 and bool in .ints.
template <class V>
void select(const BroadcastInput<std::int32_t>& condition, const BroadcastInput<V>& if_true,
            const BroadcastInput<V>& if_false, std::span<V> out, bool read_runs) {
  const auto n = static_cast<std::int64_t>(out.size());
  const std::int64_t run = std::min({condition.run_length(n), if_true.run_length(n), if_false.run_length(n)});
  if (read_runs && run >= kMinRun) {
    kWhereRuns.hit();
    const std::int64_t sc = condition.run_step(), st = if_true.run_step(), sf = if_false.run_step();
    V* po = out.data();
    parallel_chunks(n, kGrain, [&](std::int64_t begin, std::int64_t end) {
      for_each_run(
          begin, end, run,
          [&](std::int64_t from, std::int64_t to, const std::int32_t* pc, const V* pt, const V* pf) {
            V* o = po + from;
            const std::int64_t count = to - from;
            if (sc == 1 && st == 1 && sf == 0) {  // where(mask, x, 0): relu's and max-pool's gradients
              const V held = *pf;
              for (std::int64_t i = 0; i < count; ++i) o[i] = pc[i] != 0 ? pt[i] : held;
            } else {
              for (std::int64_t i = 0; i < count; ++i, pc += sc, pt += st, pf += sf) o[i] = *pc != 0 ? *pt : *pf;
            }
          },
          condition, if_true, if_false);
    });
    return;
  }
  kWhere.hit();
  parallel_chunks(n, kGrain, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t i = begin; i < end; ++i) {
      out[static_cast<std::size_t>(i)] = condition.at(i) != 0 ? if_true.at(i) : if_false.at(i);
    }
  });
}

template <class T>
void where_kernel(const KernelCall<T>& call) {
  const Shape& out_shape = call.output_type.shape;
  const BroadcastInput<std::int32_t> condition(call.ints(0), call.in_type(0).shape, out_shape);
  if (is_float(call.output_type.dtype)) {
    select(condition, BroadcastInput<T>(call.real(1), call.in_type(1).shape, out_shape),
           BroadcastInput<T>(call.real(2), call.in_type(2).shape, out_shape), call.output.real, kReadsRuns<T>);
  } else {
    select(condition, BroadcastInput<std::int32_t>(call.ints(1), call.in_type(1).shape, out_shape),
           BroadcastInput<std::int32_t>(call.ints(2), call.in_type(2).shape, out_shape), call.output.ints,
           kReadsRuns<T>);
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
