// Image kernels (NCHW): conv2d and its two adjoints, max_pool2d and its gradient. Every output
// element is owned by one task and sums its terms in one fixed order (conv2d: c, kh, kw;
// conv2d_input_grad: o, kh, kw; conv2d_weight_grad: n, oh, ow; max_pool2d_grad: window order), so
// the bits never depend on the thread count. Zero padding is applied by skipping taps outside the image.
// The convolution loops below are the f64 oracle's; interp_f32 runs the three ops as matrix
// products (conv_gemm.cpp: 10-80x faster on bench/op_cases.h's conv_gemm_cases), in another
// fixed order.
#include "tensorgrad/ir/ops/ids/image.h"

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "../parallel.h"
#include "conv_gemm.h"
#include "families.h"
#include "ir/ops/conv_geometry.h"
#include "tensorgrad/ir/launch_paths.h"

namespace tg::interp {

namespace {

constexpr std::int64_t kTaskWork = 1 << 14;  // multiply-adds (or compares) below which one task does it all

const SizeThreshold kTaskWorkThreshold("interp", "image", "task work", kTaskWork);

// The tap loops skip taps outside the image only with padding, and off-stride taps
// (conv2d_input_grad) or input positions between windows only with a stride above 1; pooling
// windows overlap, and their gradients add up, when the stride is below the window.
struct PathPair {
  LaunchPath off, on;
  void hit(bool on_path) const { (on_path ? on : off).hit(); }
};
const PathPair kConv2dPadding{{"interp", "conv2d", "unpadded"}, {"interp", "conv2d", "padded"}};
const PathPair kConv2dStride{{"interp", "conv2d", "stride_1"}, {"interp", "conv2d", "strided"}};
const PathPair kInputGradPadding{{"interp", "conv2d_input_grad", "unpadded"},
                                 {"interp", "conv2d_input_grad", "padded"}};
const PathPair kInputGradStride{{"interp", "conv2d_input_grad", "stride_1"},
                                {"interp", "conv2d_input_grad", "strided"}};
const PathPair kWeightGradPadding{{"interp", "conv2d_weight_grad", "unpadded"},
                                  {"interp", "conv2d_weight_grad", "padded"}};
const PathPair kWeightGradStride{{"interp", "conv2d_weight_grad", "stride_1"},
                                 {"interp", "conv2d_weight_grad", "strided"}};
const PathPair kPoolPadding{{"interp", "max_pool2d", "unpadded"}, {"interp", "max_pool2d", "padded"}};
const PathPair kPoolOverlap{{"interp", "max_pool2d", "disjoint_windows"},
                            {"interp", "max_pool2d", "overlapping_windows"}};
const PathPair kPoolGradPadding{{"interp", "max_pool2d_grad", "unpadded"}, {"interp", "max_pool2d_grad", "padded"}};
const PathPair kPoolGradOverlap{{"interp", "max_pool2d_grad", "disjoint_windows"},
                                {"interp", "max_pool2d_grad", "overlapping_windows"}};

std::int64_t grain_for(std::int64_t work_per_item) {
  return std::max<std::int64_t>(1, kTaskWork / std::max<std::int64_t>(work_per_item, 1));
}

// Dilated taps and grouped channels, in any of the three convolution ops.
const PathPair kConvDilation{{"interp", "conv2d", "undilated"}, {"interp", "conv2d", "dilated"}};
const PathPair kConvGroups{{"interp", "conv2d", "dense_channels"}, {"interp", "conv2d", "grouped"}};

// A 4-D shape's extents, by name.
struct Dims4 {
  std::int64_t n, c, h, w;
  explicit Dims4(const Shape& s) : n(s[0]), c(s[1]), h(s[2]), w(s[3]) {}
};

template <class T>
ConvGeometry geometry_of(const KernelCall<T>& call, ConvRole role) {
  return conv_geometry(role, call.attrs(), call.in_type(0).shape, call.in_type(1).shape, call.output_type.shape);
}

void hit_conv_paths(const ConvGeometry& geo, const PathPair& padding, const PathPair& stride) {
  padding.hit(geo.padded());
  stride.hit(geo.strided());
  kConvDilation.hit(geo.dilated());
  kConvGroups.hit(geo.grouped());
}

// y[n,o,i,j] = sum_{c',a,b} x[n, g*Cg+c', i*sh+a*dh-ph, j*sw+b*dw-pw] * w[o,c',a,b], g the group of o.
// One task per output row (n, o, i); the sum runs over c', a, b in order.
template <class T>
void conv2d_kernel(const KernelCall<T>& call) {
  const ConvGeometry geo = geometry_of(call, ConvRole::forward);
  hit_conv_paths(geo, kConv2dPadding, kConv2dStride);
  if constexpr (std::is_same_v<T, float>) {
    return conv2d_f32(geo, call.real(0).data(), call.real(1).data(), call.output.real.data());
  }
  const std::int64_t cg = geo.c_per_group();
  const std::int64_t og = geo.o_per_group();
  const T* in = call.real(0).data();
  const T* weight = call.real(1).data();
  T* out = call.output.real.data();
  const std::int64_t rows = geo.n * geo.o * geo.oh;
  parallel_chunks(rows, grain_for(geo.ow * geo.taps()), [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t r = r0; r < r1; ++r) {
      const std::int64_t i = r % geo.oh;
      const std::int64_t o = (r / geo.oh) % geo.o;
      const std::int64_t n = r / (geo.oh * geo.o);
      const std::int64_t c0 = (o / og) * cg;
      T* acc = out + r * geo.ow;
      std::fill(acc, acc + geo.ow, T(0));
      for (std::int64_t cc = 0; cc < cg; ++cc) {
        for (std::int64_t a = 0; a < geo.kh; ++a) {
          const std::int64_t ih = i * geo.stride_h + a * geo.dil_h - geo.pad_h;
          if (ih < 0 || ih >= geo.h) continue;
          const T* x_row = in + ((n * geo.c + c0 + cc) * geo.h + ih) * geo.w;
          for (std::int64_t b = 0; b < geo.kw; ++b) {
            const T tap = weight[((o * cg + cc) * geo.kh + a) * geo.kw + b];
            for (std::int64_t j = 0; j < geo.ow; ++j) {
              const std::int64_t iw = j * geo.stride_w + b * geo.dil_w - geo.pad_w;
              if (iw >= 0 && iw < geo.w) acc[j] += x_row[iw] * tap;
            }
          }
        }
      }
    }
  });
}

// The transposed convolution, gathered per input element so no two tasks write one place:
// dx[n,c,h,w] = sum_{o in c's group, a, b} g[n,o,(h+ph-a*dh)/sh,(w+pw-b*dw)/sw] * w[o,c',a,b] over
// taps landing on whole, in-range output positions. One task per row (n, c, h).
template <class T>
void conv2d_input_grad_kernel(const KernelCall<T>& call) {
  const ConvGeometry geo = geometry_of(call, ConvRole::input_grad);
  hit_conv_paths(geo, kInputGradPadding, kInputGradStride);
  if constexpr (std::is_same_v<T, float>) {
    return conv2d_input_grad_f32(geo, call.real(0).data(), call.real(1).data(), call.output.real.data());
  }
  const std::int64_t cg = geo.c_per_group();
  const std::int64_t og = geo.o_per_group();
  const T* grad = call.real(0).data();
  const T* weight = call.real(1).data();
  T* out = call.output.real.data();
  const std::int64_t rows = geo.n * geo.c * geo.h;
  parallel_chunks(rows, grain_for(geo.w * og * geo.kh * geo.kw), [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t r = r0; r < r1; ++r) {
      const std::int64_t h = r % geo.h;
      const std::int64_t c = (r / geo.h) % geo.c;
      const std::int64_t n = r / (geo.h * geo.c);
      const std::int64_t o0 = (c / cg) * og;
      const std::int64_t cc = c % cg;
      T* acc = out + r * geo.w;
      std::fill(acc, acc + geo.w, T(0));
      for (std::int64_t o = o0; o < o0 + og; ++o) {
        for (std::int64_t a = 0; a < geo.kh; ++a) {
          const std::int64_t t = h + geo.pad_h - a * geo.dil_h;
          if (t < 0 || t % geo.stride_h != 0 || t / geo.stride_h >= geo.oh) continue;
          const T* g_row = grad + ((n * geo.o + o) * geo.oh + t / geo.stride_h) * geo.ow;
          for (std::int64_t b = 0; b < geo.kw; ++b) {
            const T tap = weight[((o * cg + cc) * geo.kh + a) * geo.kw + b];
            for (std::int64_t col = 0; col < geo.w; ++col) {
              const std::int64_t u = col + geo.pad_w - b * geo.dil_w;
              if (u >= 0 && u % geo.stride_w == 0 && u / geo.stride_w < geo.ow)
                acc[col] += g_row[u / geo.stride_w] * tap;
            }
          }
        }
      }
    }
  });
}

// dw[o,c',a,b] = sum_{n,i,j} g[n,o,i,j] * x[n, g*Cg+c', i*sh+a*dh-ph, j*sw+b*dw-pw]. One task per
// (o, c') kernel slice; each tap sums over (n, i, j) in order.
template <class T>
void conv2d_weight_grad_kernel(const KernelCall<T>& call) {
  const ConvGeometry geo = geometry_of(call, ConvRole::weight_grad);
  hit_conv_paths(geo, kWeightGradPadding, kWeightGradStride);
  if constexpr (std::is_same_v<T, float>) {
    return conv2d_weight_grad_f32(geo, call.real(0).data(), call.real(1).data(), call.output.real.data());
  }
  const std::int64_t cg = geo.c_per_group();
  const std::int64_t og = geo.o_per_group();
  const T* in = call.real(0).data();
  const T* grad = call.real(1).data();
  T* out = call.output.real.data();
  const std::int64_t slices = geo.o * cg;  // dw is [O, C/groups, kh, kw]
  parallel_chunks(slices, grain_for(geo.kh * geo.kw * geo.n * geo.oh * geo.ow), [&](std::int64_t s0, std::int64_t s1) {
    for (std::int64_t s = s0; s < s1; ++s) {
      const std::int64_t o = s / cg;
      const std::int64_t c = (o / og) * cg + s % cg;
      for (std::int64_t a = 0; a < geo.kh; ++a) {
        for (std::int64_t b = 0; b < geo.kw; ++b) {
          T acc(0);
          for (std::int64_t n = 0; n < geo.n; ++n) {
            const T* x_plane = in + (n * geo.c + c) * geo.h * geo.w;
            const T* g_plane = grad + (n * geo.o + o) * geo.oh * geo.ow;
            for (std::int64_t i = 0; i < geo.oh; ++i) {
              const std::int64_t ih = i * geo.stride_h + a * geo.dil_h - geo.pad_h;
              if (ih < 0 || ih >= geo.h) continue;
              for (std::int64_t j = 0; j < geo.ow; ++j) {
                const std::int64_t iw = j * geo.stride_w + b * geo.dil_w - geo.pad_w;
                if (iw >= 0 && iw < geo.w) acc += g_plane[i * geo.ow + j] * x_plane[ih * geo.w + iw];
              }
            }
          }
          out[(s * geo.kh + a) * geo.kw + b] = acc;
        }
      }
    }
  });
}

struct PoolGeometry {
  std::int64_t kernel, stride, padding;
  explicit PoolGeometry(const Attrs& attrs)
      : kernel(attrs.integer("kernel")), stride(attrs.integer("stride")), padding(attrs.integer("padding")) {}
};

// Flat index (within its H x W plane) of the window's maximum: the first in row-major window order
// on ties, a NaN when there is one (as PyTorch propagates it). Padded taps are never chosen; the
// shape rule keeps a real element in every window.
template <class T>
std::int64_t window_argmax(const T* plane, const Dims4& x, const PoolGeometry& geo, std::int64_t i, std::int64_t j) {
  // Only the taps inside the image, in row-major window order: a kernel far wider than the image
  // (legal with padding up to half of it) costs its overlap with the image, not kernel^2.
  const std::int64_t top = i * geo.stride - geo.padding;
  const std::int64_t left = j * geo.stride - geo.padding;
  const std::int64_t row_end = std::min(x.h, top + geo.kernel);
  const std::int64_t col_end = std::min(x.w, left + geo.kernel);
  std::int64_t best = -1;
  for (std::int64_t ih = std::max<std::int64_t>(top, 0); ih < row_end; ++ih) {
    for (std::int64_t iw = std::max<std::int64_t>(left, 0); iw < col_end; ++iw) {
      const std::int64_t at = ih * x.w + iw;
      if (best < 0) {
        best = at;
        continue;
      }
      const T v = plane[at];
      const T m = plane[best];
      if (v > m || (std::isnan(v) && !std::isnan(m))) best = at;
    }
  }
  return best;
}

template <class T>
void max_pool2d_kernel(const KernelCall<T>& call) {
  const Dims4 x(call.in_type(0).shape);
  const Dims4 y(call.output_type.shape);
  const PoolGeometry geo(call.attrs());
  kPoolPadding.hit(geo.padding > 0);
  kPoolOverlap.hit(geo.stride < geo.kernel);
  const T* in = call.real(0).data();
  T* out = call.output.real.data();
  const std::int64_t rows = y.n * y.c * y.h;
  parallel_chunks(rows, grain_for(y.w * geo.kernel * geo.kernel), [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t r = r0; r < r1; ++r) {
      const std::int64_t i = r % y.h;
      const T* plane = in + (r / y.h) * x.h * x.w;
      for (std::int64_t j = 0; j < y.w; ++j) out[r * y.w + j] = plane[window_argmax(plane, x, geo, i, j)];
    }
  });
}

// Each window's gradient goes to its argmax; overlapping windows add up in window order. One task
// per (n, c) plane, which owns every place its windows write.
template <class T>
void max_pool2d_grad_kernel(const KernelCall<T>& call) {
  const Dims4 x(call.in_type(0).shape);
  const Dims4 g(call.in_type(1).shape);
  const PoolGeometry geo(call.attrs());
  kPoolGradPadding.hit(geo.padding > 0);
  kPoolGradOverlap.hit(geo.stride < geo.kernel);
  const T* in = call.real(0).data();
  const T* grad = call.real(1).data();
  T* out = call.output.real.data();
  const std::int64_t planes = x.n * x.c;
  parallel_chunks(planes, grain_for(g.h * g.w * geo.kernel * geo.kernel), [&](std::int64_t p0, std::int64_t p1) {
    for (std::int64_t p = p0; p < p1; ++p) {
      const T* plane = in + p * x.h * x.w;
      const T* g_plane = grad + p * g.h * g.w;
      T* dx = out + p * x.h * x.w;
      std::fill(dx, dx + x.h * x.w, T(0));
      for (std::int64_t i = 0; i < g.h; ++i) {
        for (std::int64_t j = 0; j < g.w; ++j) dx[window_argmax(plane, x, geo, i, j)] += g_plane[i * g.w + j];
      }
    }
  });
}

constexpr std::size_t slot(OpId id) { return static_cast<std::size_t>(id); }

}  // namespace

template <class T>
void register_image_kernels(KernelTable<T>& table) {
  table[slot(op::Conv2d)] = conv2d_kernel<T>;
  table[slot(op::Conv2dInputGrad)] = conv2d_input_grad_kernel<T>;
  table[slot(op::Conv2dWeightGrad)] = conv2d_weight_grad_kernel<T>;
  table[slot(op::MaxPool2d)] = max_pool2d_kernel<T>;
  table[slot(op::MaxPool2dGrad)] = max_pool2d_grad_kernel<T>;
}

template void register_image_kernels<float>(KernelTable<float>&);
template void register_image_kernels<double>(KernelTable<double>&);

}  // namespace tg::interp
