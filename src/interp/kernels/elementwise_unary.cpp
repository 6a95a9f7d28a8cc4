// Kernels of the elementwise unary family. Math runs in T, so the f64 oracle computes every function
// in double; each element is written by one loop iteration, independent of the thread count.
#include "tensorgrad/ir/ops/ids/elementwise_unary.h"

#include <cmath>

#include "../parallel.h"
#include "families.h"
#include "tensorgrad/ir/launch_paths.h"

namespace tg::interp {

namespace {

constexpr std::int64_t kGrain = 4096;
const SizeThreshold kGrainThreshold("interp", "elementwise_unary", "grain", kGrain);

// One loop per op, no size- or layout-dependent branch: one path each.
const LaunchPath kNeg("interp", "neg", "kernel");
const LaunchPath kAbs("interp", "abs", "kernel");
const LaunchPath kSquare("interp", "square", "kernel");
const LaunchPath kSqrt("interp", "sqrt", "kernel");
const LaunchPath kRsqrt("interp", "rsqrt", "kernel");
const LaunchPath kExp("interp", "exp", "kernel");
const LaunchPath kLog("interp", "log", "kernel");
const LaunchPath kSin("interp", "sin", "kernel");
const LaunchPath kCos("interp", "cos", "kernel");
const LaunchPath kTanh("interp", "tanh", "kernel");
const LaunchPath kSigmoid("interp", "sigmoid", "kernel");
const LaunchPath kRelu("interp", "relu", "kernel");
const LaunchPath kGelu("interp", "gelu", "kernel");
const LaunchPath kSilu("interp", "silu", "kernel");
const LaunchPath kClamp("interp", "clamp", "kernel");
const LaunchPath kStopGradient("interp", "stop_gradient", "kernel");

template <class T, class F>
void map_values(std::span<const T> x, std::span<T> y, F f) {
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
// tanh approximation: x/2 (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3), computed as the equal
// x sigmoid(2u): 1 + tanh(u) cancels for u below about -1 (at x = -5 f32 keeps no correct digit,
// and from x = -8 even f64 returns 0 for a result near -1e-21), sigmoid of a negative argument
// does not.
struct GeluOp {
  template <class T>
  T operator()(T x) const {
    const T scale = static_cast<T>(0.7978845608028654);
    const T cubic = static_cast<T>(0.044715);
    const T u = scale * (x + cubic * x * x * x);
    return x * stable_sigmoid(T(2) * u);
  }
};
struct SiluOp {
  template <class T>
  T operator()(T x) const {
    return x * stable_sigmoid(x);
  }
};

template <class T, class Op, const LaunchPath& kPath>
void unary_kernel(const KernelCall<T>& call) {
  kPath.hit();
  map_values(call.real(0), call.output.real, Op{});
}

template <class T>
void clamp_kernel(const KernelCall<T>& call) {
  kClamp.hit();
  const T lo = static_cast<T>(call.attrs().real("lo"));
  const T hi = static_cast<T>(call.attrs().real("hi"));
  map_values(call.real(0), call.output.real, [lo, hi](T x) { return x < lo ? lo : (x > hi ? hi : x); });
}

// The identity on any dtype: f32 values live in .real, i32 and bool in .ints.
template <class T>
void stop_gradient_kernel(const KernelCall<T>& call) {
  kStopGradient.hit();
  call.output = *call.inputs[0];  // shares the input's elements: values are never written twice
}

constexpr std::size_t slot(OpId id) { return static_cast<std::size_t>(id); }

}  // namespace

template <class T>
void register_elementwise_unary_kernels(KernelTable<T>& table) {
  table[slot(op::Neg)] = unary_kernel<T, NegOp, kNeg>;
  table[slot(op::Abs)] = unary_kernel<T, AbsOp, kAbs>;
  table[slot(op::Square)] = unary_kernel<T, SquareOp, kSquare>;
  table[slot(op::Sqrt)] = unary_kernel<T, SqrtOp, kSqrt>;
  table[slot(op::Rsqrt)] = unary_kernel<T, RsqrtOp, kRsqrt>;
  table[slot(op::Exp)] = unary_kernel<T, ExpOp, kExp>;
  table[slot(op::Log)] = unary_kernel<T, LogOp, kLog>;
  table[slot(op::Sin)] = unary_kernel<T, SinOp, kSin>;
  table[slot(op::Cos)] = unary_kernel<T, CosOp, kCos>;
  table[slot(op::Tanh)] = unary_kernel<T, TanhOp, kTanh>;
  table[slot(op::Sigmoid)] = unary_kernel<T, SigmoidOp, kSigmoid>;
  table[slot(op::Relu)] = unary_kernel<T, ReluOp, kRelu>;
  table[slot(op::Gelu)] = unary_kernel<T, GeluOp, kGelu>;
  table[slot(op::Silu)] = unary_kernel<T, SiluOp, kSilu>;
  table[slot(op::Clamp)] = clamp_kernel<T>;
  table[slot(op::StopGradient)] = stop_gradient_kernel<T>;
}

template void register_elementwise_unary_kernels<float>(KernelTable<float>&);
template void register_elementwise_unary_kernels<double>(KernelTable<double>&);

}  // namespace tg::interp
