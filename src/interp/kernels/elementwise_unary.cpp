// Kernels of the elementwise unary family. Math runs in T, so the f64 oracle computes every function
// in double; each element is written by one loop iteration, independent of the thread count.
#include <cmath>

#include "../parallel.h"
#include "families.h"

namespace tg::interp {

namespace {

constexpr std::int64_t kGrain = 4096;

template <class T, class F>
void map_values(const std::vector<T>& x, std::vector<T>& y, F f) {
  const T* px = x.data();
  T* py = y.data();
  parallel_chunks(static_cast<std::int64_t>(y.size()), kGrain, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t i = begin; i < end; ++i) py[i] = f(px[i]);
  });
}

// Split by sign so exp() only sees non-positive arguments: no overflow for large |x|.
template <class T>
T stable_sigmoid(T x) {
  if (x >= T(0)) return T(1) / (T(1) + std::exp(-x));
  const T e = std::exp(x);
  return e / (T(1) + e);
}

struct NegOp {
  template <class T>
  T operator()(T x) const {
    return -x;
  }
};
struct AbsOp {
  template <class T>
  T operator()(T x) const {
    return std::abs(x);
  }
};
struct SquareOp {
  template <class T>
  T operator()(T x) const {
    return x * x;
  }
};
struct SqrtOp {
  template <class T>
  T operator()(T x) const {
    return std::sqrt(x);
  }
};
struct RsqrtOp {
  template <class T>
  T operator()(T x) const {
    return T(1) / std::sqrt(x);
  }
};
struct ExpOp {
  template <class T>
  T operator()(T x) const {
    return std::exp(x);
  }
};
struct LogOp {
  template <class T>
  T operator()(T x) const {
    return std::log(x);
  }
};
struct SinOp {
  template <class T>
  T operator()(T x) const {
    return std::sin(x);
  }
};
struct CosOp {
  template <class T>
  T operator()(T x) const {
    return std::cos(x);
  }
};
struct TanhOp {
  template <class T>
  T operator()(T x) const {
    return std::tanh(x);
  }
};
struct SigmoidOp {
  template <class T>
  T operator()(T x) const {
    return stable_sigmoid(x);
  }
};
// NaN stays NaN (x < 0 is false for it).
struct ReluOp {
  template <class T>
  T operator()(T x) const {
    return x < T(0) ? T(0) : x;
  }
};
// tanh approximation: x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
struct GeluOp {
  template <class T>
  T operator()(T x) const {
    const T scale = static_cast<T>(0.7978845608028654);
    const T cubic = static_cast<T>(0.044715);
    return T(0.5) * x * (T(1) + std::tanh(scale * (x + cubic * x * x * x)));
  }
};
struct SiluOp {
  template <class T>
  T operator()(T x) const {
    return x * stable_sigmoid(x);
  }
};

template <class T, class Op>
void unary_kernel(const KernelCall<T>& call) {
  map_values(call.real(0), call.output.real, Op{});
}

template <class T>
void clamp_kernel(const KernelCall<T>& call) {
  const T lo = static_cast<T>(call.attrs().real("lo"));
  const T hi = static_cast<T>(call.attrs().real("hi"));
  map_values(call.real(0), call.output.real, [lo, hi](T x) { return x < lo ? lo : (x > hi ? hi : x); });
}

// The identity on any dtype: f32 values live in .real, i32 and bool in .ints.
template <class T>
void stop_gradient_kernel(const KernelCall<T>& call) {
  if (is_float(call.output_type.dtype)) {
    call.output.real = call.real(0);
  } else {
    call.output.ints = call.ints(0);
  }
}

constexpr std::size_t slot(OpId id) { return static_cast<std::size_t>(id); }

}  // namespace

template <class T>
void register_elementwise_unary_kernels(KernelTable<T>& table) {
  table[slot(OpId::Neg)] = unary_kernel<T, NegOp>;
  table[slot(OpId::Abs)] = unary_kernel<T, AbsOp>;
  table[slot(OpId::Square)] = unary_kernel<T, SquareOp>;
  table[slot(OpId::Sqrt)] = unary_kernel<T, SqrtOp>;
  table[slot(OpId::Rsqrt)] = unary_kernel<T, RsqrtOp>;
  table[slot(OpId::Exp)] = unary_kernel<T, ExpOp>;
  table[slot(OpId::Log)] = unary_kernel<T, LogOp>;
  table[slot(OpId::Sin)] = unary_kernel<T, SinOp>;
  table[slot(OpId::Cos)] = unary_kernel<T, CosOp>;
  table[slot(OpId::Tanh)] = unary_kernel<T, TanhOp>;
  table[slot(OpId::Sigmoid)] = unary_kernel<T, SigmoidOp>;
  table[slot(OpId::Relu)] = unary_kernel<T, ReluOp>;
  table[slot(OpId::Gelu)] = unary_kernel<T, GeluOp>;
  table[slot(OpId::Silu)] = unary_kernel<T, SiluOp>;
  table[slot(OpId::Clamp)] = clamp_kernel<T>;
  table[slot(OpId::StopGradient)] = stop_gradient_kernel<T>;
}

template void register_elementwise_unary_kernels<float>(KernelTable<float>&);
template void register_elementwise_unary_kernels<double>(KernelTable<double>&);

}  // namespace tg::interp
