// The image family (NCHW): conv2d and its adjoints, max_pool2d and its gradient, and the composite
// nearest_upsample2d. Forward values in both compute types against plain loops written here (the
// adjoints as scatters, where the kernels gather), gradients through tg::differentiate, tie
// handling, thread-count independence; and, for every op the registry lists in the family, the
// OpDef parts, samples that fit a given input, f32 against the oracle and the grad rules against
// finite differences. Shape errors are in image_errors_test.cpp.
#include "tensorgrad/ir/ops/ids/image.h"

#include <gtest/gtest.h>
#include <tbb/global_control.h>

#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "support/library.h"
#include "support/op_family.h"
#include "support/test_values.h"

namespace {

using tg::ComputeType;
using tg::DType;
using tg::HostTensor;
using tg::OpId;
namespace op = tg::op;
using tg::Shape;
using tg::Tensor;

constexpr ComputeType kBothComputeTypes[] = {ComputeType::f64, ComputeType::f32};

using tg::testing::test_values;

struct Named {
  std::string name;
  HostTensor value;
};

// Traces build(inputs) into a graph with output "y" and runs it.
HostTensor run(const std::vector<Named>& inputs, const std::function<Tensor(const std::vector<Tensor>&)>& build,
               ComputeType compute) {
  tg::GraphBuilder b("g");
  tg::TracingScope scope(b);
  std::vector<Tensor> xs;
  tg::TensorMap feed;
  for (const auto& in : inputs) {
    xs.push_back(b.input(in.name, in.value.type));
    feed.emplace(in.name, in.value);
  }
  b.output("y", build(xs));
  return tg::interpret(b.take(), feed, {.compute = compute, .check_coverage = true}).outputs.at("y");
}

// Gradients of sum(build(inputs) * proj) with respect to every input, in the f64 oracle.
tg::TensorMap gradients(const std::vector<Named>& inputs,
                        const std::function<Tensor(const std::vector<Tensor>&)>& build, const HostTensor& proj) {
  tg::GraphBuilder b("g");
  tg::TracingScope scope(b);
  std::vector<Tensor> xs;
  tg::TensorMap feed{{"proj", proj}};
  std::vector<std::string> wrt;
  for (const auto& in : inputs) {
    xs.push_back(b.input(in.name, in.value.type));
    feed.emplace(in.name, in.value);
    wrt.push_back(in.name);
  }
  b.output("loss", tg::sum(build(xs) * b.input("proj", proj.type)));
  const tg::Graph g = tg::differentiate(b.take(), {.loss = "loss", .wrt = wrt});
  return tg::interpret(g, feed, {.compute = ComputeType::f64}).outputs;
}

// Index into a row-major 4-D array.
struct Dims {
  std::int64_t n, c, h, w;
  std::size_t at(std::int64_t a, std::int64_t b, std::int64_t y, std::int64_t x) const {
    return static_cast<std::size_t>(((a * c + b) * h + y) * w + x);
  }
  std::int64_t size() const { return n * c * h * w; }
  Shape shape() const { return {n, c, h, w}; }
};

struct ConvCase {
  Dims x;  // input [N, C, H, W]
  std::int64_t o, kh, kw, stride, padding;
  Dims w() const { return {o, x.c, kh, kw}; }
  Dims y() const { return {x.n, o, (x.h + 2 * padding - kh) / stride + 1, (x.w + 2 * padding - kw) / stride + 1}; }
  tg::Conv2dOptions options() const { return {.stride = stride, .padding = padding}; }
};

const ConvCase kConvCases[] = {
    {{2, 3, 5, 7}, 4, 3, 2, 1, 0},  // non-square kernel and image
    {{1, 2, 6, 5}, 3, 3, 3, 2, 1},  // stride 2 with padding, uneven fit
    {{2, 1, 4, 4}, 2, 2, 3, 1, 2},  // padding wider than half the kernel
    {{1, 3, 8, 6}, 2, 1, 1, 2, 0},  // 1x1 kernel, stride 2
    {{3, 2, 7, 5}, 2, 3, 3, 2, 1},
};

// Reference conv2d and its two adjoints, all as one loop over (n, o, i, j, c, a, b): the forward
// gathers, the adjoints scatter each product to where it belongs. `mag` sums |terms| for tolerances.
struct ConvReference {
  std::vector<double> y, y_mag, dx, dx_mag, dw, dw_mag;
};

ConvReference reference_conv(const ConvCase& cc, const std::vector<float>& x, const std::vector<float>& w,
                             const std::vector<float>& g) {
  const Dims wd = cc.w();
  const Dims yd = cc.y();
  ConvReference r{std::vector<double>(yd.size()),   std::vector<double>(yd.size()), std::vector<double>(cc.x.size()),
                  std::vector<double>(cc.x.size()), std::vector<double>(wd.size()), std::vector<double>(wd.size())};
  for (std::int64_t n = 0; n < yd.n; ++n)
    for (std::int64_t o = 0; o < yd.c; ++o)
      for (std::int64_t i = 0; i < yd.h; ++i)
        for (std::int64_t j = 0; j < yd.w; ++j)
          for (std::int64_t c = 0; c < cc.x.c; ++c)
            for (std::int64_t a = 0; a < cc.kh; ++a)
              for (std::int64_t b = 0; b < cc.kw; ++b) {
                const std::int64_t ih = i * cc.stride + a - cc.padding;
                const std::int64_t iw = j * cc.stride + b - cc.padding;
                if (ih < 0 || ih >= cc.x.h || iw < 0 || iw >= cc.x.w) continue;  // zero padding
                const auto xi = cc.x.at(n, c, ih, iw);
                const auto wi = wd.at(o, c, a, b);
                const auto yi = yd.at(n, o, i, j);
                r.y[yi] += double{x[xi]} * w[wi];
                r.y_mag[yi] += std::fabs(double{x[xi]} * w[wi]);
                r.dx[xi] += double{g[yi]} * w[wi];
                r.dx_mag[xi] += std::fabs(double{g[yi]} * w[wi]);
                r.dw[wi] += double{g[yi]} * x[xi];
                r.dw_mag[wi] += std::fabs(double{g[yi]} * x[xi]);
              }
  return r;
}

void expect_close(const HostTensor& got, const Shape& shape, const std::vector<double>& want,
                  const std::vector<double>& magnitude, ComputeType compute) {
  ASSERT_EQ(got.type, (tg::TensorType{DType::f32, shape}));
  ASSERT_EQ(got.size(), want.size());
  const double rel = compute == ComputeType::f64 ? 1e-13 : 1e-5;
  for (std::size_t i = 0; i < want.size(); ++i) {
    EXPECT_NEAR(got.at(i), want[i], rel * (magnitude[i] + 1e-30)) << "element " << i;
  }
}

struct ConvData {
  std::vector<float> x, w, g;
};
ConvData conv_data(const ConvCase& cc, std::uint64_t seed) {
  return {test_values(cc.x.size(), seed), test_values(cc.w().size(), seed + 1), test_values(cc.y().size(), seed + 2)};
}

TEST(Conv2d, ForwardMatchesLoops) {
  std::uint64_t seed = 1;
  for (const ConvCase& cc : kConvCases) {
    const ConvData d = conv_data(cc, seed += 3);
    const ConvReference ref = reference_conv(cc, d.x, d.w, d.g);
    for (ComputeType compute : kBothComputeTypes) {
      const auto y = run(
          {{"x", HostTensor::f32(cc.x.shape(), d.x)}, {"w", HostTensor::f32(cc.w().shape(), d.w)}},
          [&](const auto& in) { return tg::conv2d(in[0], in[1], cc.options()); }, compute);
      expect_close(y, cc.y().shape(), ref.y, ref.y_mag, compute);
    }
  }
}

TEST(Conv2d, DefaultsToStrideOneWithoutPadding) {
  const ConvCase cc{{1, 2, 4, 5}, 2, 2, 3, 1, 0};
  const ConvData d = conv_data(cc, 40);
  const ConvReference ref = reference_conv(cc, d.x, d.w, d.g);
  const auto y = run(
      {{"x", HostTensor::f32(cc.x.shape(), d.x)}, {"w", HostTensor::f32(cc.w().shape(), d.w)}},
      [&](const auto& in) { return tg::conv2d(in[0], in[1]); }, ComputeType::f64);
  expect_close(y, {1, 2, 3, 3}, ref.y, ref.y_mag, ComputeType::f64);
}

TEST(Conv2dInputGrad, MatchesScatterLoops) {
  std::uint64_t seed = 100;
  for (const ConvCase& cc : kConvCases) {
    const ConvData d = conv_data(cc, seed += 3);
    const ConvReference ref = reference_conv(cc, d.x, d.w, d.g);
    for (ComputeType compute : kBothComputeTypes) {
      const auto dx = run(
          {{"g", HostTensor::f32(cc.y().shape(), d.g)}, {"w", HostTensor::f32(cc.w().shape(), d.w)}},
          [&](const auto& in) { return tg::conv2d_input_grad(in[0], in[1], cc.x.h, cc.x.w, cc.options()); }, compute);
      expect_close(dx, cc.x.shape(), ref.dx, ref.dx_mag, compute);
    }
  }
}

TEST(Conv2dWeightGrad, MatchesScatterLoops) {
  std::uint64_t seed = 200;
  for (const ConvCase& cc : kConvCases) {
    const ConvData d = conv_data(cc, seed += 3);
    const ConvReference ref = reference_conv(cc, d.x, d.w, d.g);
    for (ComputeType compute : kBothComputeTypes) {
      const auto dw = run(
          {{"x", HostTensor::f32(cc.x.shape(), d.x)}, {"g", HostTensor::f32(cc.y().shape(), d.g)}},
          [&](const auto& in) { return tg::conv2d_weight_grad(in[0], in[1], cc.kh, cc.kw, cc.options()); }, compute);
      expect_close(dw, cc.w().shape(), ref.dw, ref.dw_mag, compute);
    }
  }
}

TEST(Conv2d, GradientsAreTheScatterAdjoints) {
  std::uint64_t seed = 300;
  for (const ConvCase& cc : kConvCases) {
    const ConvData d = conv_data(cc, seed += 3);
    const ConvReference ref = reference_conv(cc, d.x, d.w, d.g);
    const auto grads = gradients(
        {{"x", HostTensor::f32(cc.x.shape(), d.x)}, {"w", HostTensor::f32(cc.w().shape(), d.w)}},
        [&](const auto& in) { return tg::conv2d(in[0], in[1], cc.options()); }, HostTensor::f32(cc.y().shape(), d.g));
    expect_close(grads.at("grad.x"), cc.x.shape(), ref.dx, ref.dx_mag, ComputeType::f64);
    expect_close(grads.at("grad.w"), cc.w().shape(), ref.dw, ref.dw_mag, ComputeType::f64);
  }
}

// Second order: the adjoint ops are bilinear, so their gradients are the other two ops; check them
// against central differences of the forward op (exact up to rounding for a bilinear function).
TEST(Conv2dInputGrad, GradientMatchesFiniteDifferences) {
  const ConvCase cc{{1, 2, 5, 4}, 2, 3, 2, 2, 1};
  const ConvData d = conv_data(cc, 77);
  const auto proj = test_values(cc.x.size(), 78);
  const auto build = [&](const std::vector<Tensor>& in) {
    return tg::conv2d_input_grad(in[0], in[1], cc.x.h, cc.x.w, cc.options());
  };
  std::vector<Named> inputs{{"g", HostTensor::f32(cc.y().shape(), d.g)}, {"w", HostTensor::f32(cc.w().shape(), d.w)}};
  const auto grads = gradients(inputs, build, HostTensor::f32(cc.x.shape(), proj));
  for (auto& input : inputs) {
    for (std::size_t e = 0; e < input.value.size(); e += 3) {
      double loss[2];
      for (int side = 0; side < 2; ++side) {
        std::vector<Named> moved = inputs;
        for (auto& m : moved)
          if (m.name == input.name) m.value.mutable_wide()[e] += side ? -0.5 : 0.5;
        const auto y = run(moved, build, ComputeType::f64);
        loss[side] = 0;
        for (std::size_t i = 0; i < proj.size(); ++i) loss[side] += y.at(i) * proj[i];
      }
      EXPECT_NEAR(grads.at("grad." + input.name).at(e), loss[0] - loss[1], 1e-9) << input.name << "[" << e << "]";
    }
  }
}

TEST(Conv2d, SameBitsWithOneThread) {
  const ConvCase cc{{2, 3, 40, 36}, 5, 3, 3, 1, 1};
  const ConvData d = conv_data(cc, 9);
  for (ComputeType compute : kBothComputeTypes) {
    const std::vector<Named> in{{"x", HostTensor::f32(cc.x.shape(), d.x)},
                                {"w", HostTensor::f32(cc.w().shape(), d.w)},
                                {"g", HostTensor::f32(cc.y().shape(), d.g)}};
    const auto all_three = [&](const std::vector<Tensor>& t) {
      const Tensor dx = tg::conv2d_input_grad(t[2], t[1], cc.x.h, cc.x.w, cc.options());
      const Tensor dw = tg::conv2d_weight_grad(t[0], t[2], cc.kh, cc.kw, cc.options());
      return tg::sum(tg::conv2d(t[0], t[1], cc.options())) + tg::sum(dx * t[0]) + tg::sum(dw * t[1]) +
             tg::sum(tg::max_pool2d(t[0], 3, {.stride = 2, .padding = 1}));
    };
    const auto many = run(in, all_three, compute);
    tbb::global_control single(tbb::global_control::max_allowed_parallelism, 1);
    EXPECT_EQ(run(in, all_three, compute).to_f64(), many.to_f64());
  }
}

// ---- max pooling ----

struct PoolCase {
  Dims x;
  std::int64_t kernel, stride, padding;
  Dims y() const {
    return {x.n, x.c, (x.h + 2 * padding - kernel) / stride + 1, (x.w + 2 * padding - kernel) / stride + 1};
  }
};

const PoolCase kPoolCases[] = {
    {{2, 3, 6, 6}, 2, 2, 0}, {{1, 2, 7, 5}, 3, 2, 1}, {{2, 1, 5, 8}, 3, 1, 1},
    {{1, 2, 4, 6}, 2, 1, 1}, {{1, 1, 3, 3}, 1, 1, 0},
};

// Window maxima with padded taps at -inf, and each window's g sent to its first maximum.
struct PoolReference {
  std::vector<double> y, dx;
};
PoolReference reference_pool(const PoolCase& pc, const std::vector<float>& x, const std::vector<float>& g) {
  const Dims yd = pc.y();
  PoolReference r{std::vector<double>(yd.size()), std::vector<double>(pc.x.size(), 0.0)};
  for (std::int64_t n = 0; n < yd.n; ++n)
    for (std::int64_t c = 0; c < yd.c; ++c)
      for (std::int64_t i = 0; i < yd.h; ++i)
        for (std::int64_t j = 0; j < yd.w; ++j) {
          double best = -std::numeric_limits<double>::infinity();
          std::size_t where = 0;
          for (std::int64_t a = 0; a < pc.kernel; ++a)
            for (std::int64_t b = 0; b < pc.kernel; ++b) {
              const std::int64_t ih = i * pc.stride + a - pc.padding;
              const std::int64_t iw = j * pc.stride + b - pc.padding;
              if (ih < 0 || ih >= pc.x.h || iw < 0 || iw >= pc.x.w) continue;
              if (x[pc.x.at(n, c, ih, iw)] > best) {
                best = x[pc.x.at(n, c, ih, iw)];
                where = pc.x.at(n, c, ih, iw);
              }
            }
          r.y[yd.at(n, c, i, j)] = best;
          r.dx[where] += g[yd.at(n, c, i, j)];
        }
  return r;
}

TEST(MaxPool2d, ForwardMatchesLoops) {
  std::uint64_t seed = 500;
  for (const PoolCase& pc : kPoolCases) {
    const auto x = test_values(pc.x.size(), seed += 2);
    const PoolReference ref = reference_pool(pc, x, test_values(pc.y().size(), seed + 1));
    for (ComputeType compute : kBothComputeTypes) {
      const auto y = run(
          {{"x", HostTensor::f32(pc.x.shape(), x)}},
          [&](const auto& in) {
            return tg::max_pool2d(in[0], pc.kernel, {.stride = pc.stride, .padding = pc.padding});
          },
          compute);
      ASSERT_EQ(y.type.shape, pc.y().shape());
      EXPECT_EQ(y.to_f64(), ref.y);  // one of the inputs, exactly
    }
  }
}

TEST(MaxPool2d, StrideDefaultsToTheKernel) {
  const std::vector<float> x = {1, 5, 2, 0, 3, 4, 8, 7, 6, 9, 1, 2};  // [1, 1, 2, 6]
  const auto y = run(
      {{"x", HostTensor::f32({1, 1, 2, 6}, x)}}, [](const auto& in) { return tg::max_pool2d(in[0], 2); },
      ComputeType::f64);
  EXPECT_EQ(y.type.shape, (Shape{1, 1, 1, 3}));
  EXPECT_EQ(y.to_f64(), (std::vector<double>{8, 9, 4}));
}

TEST(MaxPool2dGrad, MatchesScatterLoopsAndTheGradientOfMaxPool) {
  std::uint64_t seed = 600;
  for (const PoolCase& pc : kPoolCases) {
    const auto x = test_values(pc.x.size(), seed += 2);
    const auto g = test_values(pc.y().size(), seed + 1);
    const PoolReference ref = reference_pool(pc, x, g);
    std::vector<double> magnitude(ref.dx.size(), 4.0);
    for (ComputeType compute : kBothComputeTypes) {
      const auto dx = run(
          {{"x", HostTensor::f32(pc.x.shape(), x)}, {"g", HostTensor::f32(pc.y().shape(), g)}},
          [&](const auto& in) { return tg::max_pool2d_grad(in[0], in[1], pc.kernel, pc.stride, pc.padding); }, compute);
      expect_close(dx, pc.x.shape(), ref.dx, magnitude, compute);
    }
    const auto grads = gradients(
        {{"x", HostTensor::f32(pc.x.shape(), x)}},
        [&](const auto& in) { return tg::max_pool2d(in[0], pc.kernel, {.stride = pc.stride, .padding = pc.padding}); },
        HostTensor::f32(pc.y().shape(), g));
    expect_close(grads.at("grad.x"), pc.x.shape(), ref.dx, magnitude, ComputeType::f64);
  }
}

TEST(MaxPool2dGrad, TiesGoToTheFirstElementAndOverlapsAdd) {
  // All equal: every window picks its top-left element; with stride 1 and kernel 2 over a 3x3
  // plane, windows (0,0), (0,1), (1,0), (1,1) pick elements 0, 1, 3 and 4.
  const std::vector<float> x(9, 1.0f);
  const std::vector<float> g = {1, 10, 100, 1000};
  for (ComputeType compute : kBothComputeTypes) {
    const auto dx = run(
        {{"x", HostTensor::f32({1, 1, 3, 3}, x)}, {"g", HostTensor::f32({1, 1, 2, 2}, g)}},
        [](const auto& in) { return tg::max_pool2d_grad(in[0], in[1], 2, 1, 0); }, compute);
    EXPECT_EQ(dx.to_f64(), (std::vector<double>{1, 10, 0, 100, 1000, 0, 0, 0, 0}));
  }
  // One large element shared by four overlapping windows collects all four gradients.
  const std::vector<float> peak = {0, 0, 0, 0, 5, 0, 0, 0, 0};
  const auto dx = run(
      {{"x", HostTensor::f32({1, 1, 3, 3}, peak)}, {"g", HostTensor::f32({1, 1, 2, 2}, g)}},
      [](const auto& in) { return tg::max_pool2d_grad(in[0], in[1], 2, 1, 0); }, ComputeType::f32);
  EXPECT_EQ(dx.to_f64(), (std::vector<double>{0, 0, 0, 0, 1111, 0, 0, 0, 0}));
}

TEST(MaxPool2d, PaddingIsNeverChosen) {
  // All negative: a zero-padded pool would return 0 at the borders; -inf padding returns the inputs.
  const std::vector<float> x = {-1, -2, -3, -4};
  const auto y = run(
      {{"x", HostTensor::f32({1, 1, 2, 2}, x)}},
      [](const auto& in) { return tg::max_pool2d(in[0], 2, {.stride = 1, .padding = 1}); }, ComputeType::f64);
  EXPECT_EQ(y.to_f64(), (std::vector<double>{-1, -1, -2, -1, -1, -2, -3, -3, -4}));
}

TEST(MaxPool2d, AKernelFarWiderThanTheImageCostsOnlyItsOverlap) {
  // Legal (padding at most half the kernel) and found by the build_graph fuzzer: a loop over every
  // tap of a 2^33-wide window would not finish; each window here covers the whole 2x3 image.
  constexpr std::int64_t kKernel = (std::int64_t{1} << 33) + 1;
  constexpr std::int64_t kPadding = std::int64_t{1} << 32;
  const std::vector<float> x = {1, 7, 3, 7, -2, 0};
  for (ComputeType compute : kBothComputeTypes) {
    const auto y = run(
        {{"x", HostTensor::f32({1, 1, 2, 3}, x)}},
        [](const auto& in) { return tg::max_pool2d(in[0], kKernel, {.stride = 1, .padding = kPadding}); }, compute);
    EXPECT_EQ(y.to_f64(), (std::vector<double>(6, 7.0)));
    const auto dx = run(
        {{"x", HostTensor::f32({1, 1, 2, 3}, x)}, {"g", HostTensor::f32({1, 1, 2, 3}, {1, 2, 3, 4, 5, 6})}},
        [](const auto& in) { return tg::max_pool2d_grad(in[0], in[1], kKernel, 1, kPadding); }, compute);
    EXPECT_EQ(dx.to_f64(), (std::vector<double>{0, 21, 0, 0, 0, 0})) << "every window picks the first 7";
  }
}

// ---- nearest_upsample2d (composite) ----

TEST(NearestUpsample2d, RepeatsEachPixelAndSumsGradientsOverBlocks) {
  const Dims xd{2, 2, 2, 3};
  const std::int64_t f = 3;
  const auto x = test_values(xd.size(), 700);
  const Dims yd{2, 2, 6, 9};
  const auto proj = test_values(yd.size(), 701);
  std::vector<double> want(yd.size()), want_grad(xd.size(), 0.0), magnitude(xd.size(), 0.0);
  for (std::int64_t n = 0; n < 2; ++n)
    for (std::int64_t c = 0; c < 2; ++c)
      for (std::int64_t i = 0; i < yd.h; ++i)
        for (std::int64_t j = 0; j < yd.w; ++j) {
          want[yd.at(n, c, i, j)] = x[xd.at(n, c, i / f, j / f)];
          want_grad[xd.at(n, c, i / f, j / f)] += proj[yd.at(n, c, i, j)];
          magnitude[xd.at(n, c, i / f, j / f)] += std::fabs(proj[yd.at(n, c, i, j)]);
        }
  for (ComputeType compute : kBothComputeTypes) {
    const auto y = run(
        {{"x", HostTensor::f32(xd.shape(), x)}}, [&](const auto& in) { return tg::nearest_upsample2d(in[0], f); },
        compute);
    ASSERT_EQ(y.type.shape, yd.shape());
    EXPECT_EQ(y.to_f64(), want);
  }
  const auto grads = gradients(
      {{"x", HostTensor::f32(xd.shape(), x)}}, [&](const auto& in) { return tg::nearest_upsample2d(in[0], f); },
      HostTensor::f32(yd.shape(), proj));
  expect_close(grads.at("grad.x"), xd.shape(), want_grad, magnitude, ComputeType::f64);
}

TEST(NearestUpsample2d, FactorOneIsTheIdentity) {
  tg::GraphBuilder b("g");
  tg::TracingScope scope(b);
  const Tensor x = b.input("x", {DType::f32, {1, 2, 3, 4}});
  EXPECT_EQ(tg::nearest_upsample2d(x, 1).id(), x.id());
}

// ---- registry entries ----

constexpr std::string_view kFamily = "image";

tg::TensorType f32(Shape s) { return {DType::f32, std::move(s)}; }

// Facts pinned per op (optional: a new op is checked by the generic tests without joining).
struct Pinned {
  int arity;
  bool differentiable;
};
const std::map<OpId, Pinned> kPinned = {{op::Conv2d, {2, true}},
                                        {op::Conv2dInputGrad, {2, true}},
                                        {op::Conv2dWeightGrad, {2, true}},
                                        {op::MaxPool2d, {1, true}},
                                        {op::MaxPool2dGrad, {2, false}}};

// Every op of the family (from the registry) has every part of the op contract.
TEST(ImageOps, EveryOpDefHasItsParts) {
  tg::test::expect_ops_in_family(kPinned, kFamily);
  for (OpId id : tg::test::family_ops(kFamily)) {
    const tg::OpDef& def = tg::op_def(id);
    SCOPED_TRACE(std::string(def.name));
    tg::test::expect_def_parts(id);
    if (const auto it = kPinned.find(id); it != kPinned.end()) {
      EXPECT_EQ(def.differentiable, it->second.differentiable);
      EXPECT_EQ(def.arity, it->second.arity);
    }
    // Every sample passes its own shape rule, and stays small.
    for (std::uint64_t s = 0; s < 50; ++s) {
      tg::SampleRng rng(s);
      const auto sample = def.samples(rng, std::nullopt);
      ASSERT_TRUE(sample.has_value());
      EXPECT_NO_THROW(tg::infer_type(id, sample->attrs, sample->inputs));
      for (const auto& t : sample->inputs) EXPECT_LE(t.size(), 512);
    }
  }
  EXPECT_EQ(tg::op_def(op::MaxPool2d).tolerance, tg::ToleranceClass::exact);
  const tg::TensorType conv_inputs[] = {f32({2, 3, 8, 8}), f32({4, 3, 3, 2})};
  using Pair = std::vector<std::int64_t>;
  const tg::Attrs conv_attrs{
      {"dilation", Pair{1, 1}}, {"groups", std::int64_t{1}}, {"padding", Pair{1, 1}}, {"stride", Pair{1, 1}}};
  EXPECT_EQ(tg::op_def(op::Conv2d).tolerance, tg::ToleranceClass::matmul);
  EXPECT_EQ(tg::op_def(op::Conv2d).reduction_length(conv_attrs, std::span<const tg::TensorType>(conv_inputs)),
            3 * 3 * 2);
}

TEST(ImageOps, SamplesFitAGivenFirstInput) {
  // conv2d_input_grad's first input is grad_output: the sample must pick an image size that gives it.
  for (std::uint64_t s = 0; s < 50; ++s) {
    for (OpId id : tg::test::family_ops(kFamily)) {
      tg::SampleRng rng(s);
      const tg::TensorType first = f32({2, 3, 4 + static_cast<std::int64_t>(s % 3), 5});
      const auto sample = tg::op_def(id).samples(rng, first);
      if (!sample) continue;
      EXPECT_EQ(sample->inputs[0], first);
      EXPECT_NO_THROW(tg::infer_type(id, sample->attrs, sample->inputs)) << tg::op_name(id);
    }
  }
  tg::SampleRng rng(1);
  EXPECT_FALSE(tg::op_def(op::Conv2d).samples(rng, f32({2, 3, 4})).has_value());
}

TEST(ImageOps, F32RunsMatchTheOracleWithinTheToleranceClass) {
  tg::test::expect_family_runs_match_oracle(kFamily, 7, 10);
}

TEST(ImageGrads, GradRulesMatchFiniteDifferences) {
  tg::test::expect_family_grads_match_finite_differences(kFamily, 13, 3, std::nullopt, {.probes = 8});
}

}  // namespace
