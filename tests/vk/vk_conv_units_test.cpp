// Convolutions on the matrix units (shaders/conv2d_coopmat.comp, src/vk/kernels/conv_units.h).
// CI (lavapipe, no cooperative matrices): the NV -> KHR rewrite of the module for f16 and bf16 (the
// bf16 one refuses any bf16 arithmetic), which shader each conv of a graph planned for a made-up
// device with units gets (both sides of the size limits, 16-bit casts, f32 under ieee, split and
// fast, thin products, devices without bf16 units), the split-K ranges, and that a device without
// units runs every precision setting on the portable fp32 kernel within the fp32 class.
// GPU only (ConvUnitsTest.*, skipped without units): conv2d, conv2d_input_grad and
// conv2d_weight_grad on the units against the f64 oracle on both sides of the tile edges (M and NC
// around 128), K around the 32-deep slices, stride 2, padding, dilation, groups, split-K on and
// off, f16 and bf16 operands (the fp32 class, as the matmul unit tests), split (the fp32 class) and
// fast (256 times it). Run them on the GPU without
// the validation layer (it predates the extensions): docs/vulkan.md, "Convolutions on matrix units".
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "matrix_units_test_support.h"
#include "support/library.h"
#include "tensorgrad/vk/executor.h"
#include "tensorgrad/vk/shaders.h"
#include "vk/kernels/conv_gemm.h"
#include "vk/kernels/conv_units.h"
#include "vk/kernels/matmul_units.h"
#include "vk/low_precision_lowering.h"
#include "vk/program_plan.h"
#include "vk/spirv_coopmat.h"
#include "vk_oracle_check.h"
#include "vk_test_support.h"

namespace tg::vk {
namespace {

using testing::device_with_units;
using testing::MatrixUnitsFixture;
using testing::random_f32;
using testing::VkTest;

// ---- the geometry of one case ----

struct ConvCase {
  std::string name;
  ConvRole role = ConvRole::forward;
  std::int64_t n = 1, c = 1, h = 1, w = 1, o = 1, kh = 1, kw = 1;
  std::int64_t stride = 1, padding = 0, dilation = 1, groups = 1;
  float scale = 1.f;  // the operands' magnitude
};

std::int64_t out_extent(std::int64_t in, std::int64_t k, const ConvCase& c) {
  return (in + 2 * c.padding - c.dilation * (k - 1) - 1) / c.stride + 1;
}

Conv2dOptions options_of(const ConvCase& c) {
  Conv2dOptions o;
  o.stride = c.stride;
  o.padding = Conv2dPadding(c.padding);
  o.dilation = c.dilation;
  o.groups = c.groups;
  return o;
}

// The two operands' shapes (b's then a's, in the op's argument order).
std::pair<Shape, Shape> operand_shapes(const ConvCase& c) {
  const Shape x{c.n, c.c, c.h, c.w};
  const Shape w{c.o, c.c / c.groups, c.kh, c.kw};
  const Shape g{c.n, c.o, out_extent(c.h, c.kh, c), out_extent(c.w, c.kw, c)};
  switch (c.role) {
    case ConvRole::forward:
      return {x, w};
    case ConvRole::input_grad:
      return {g, w};
    case ConvRole::weight_grad:
      return {x, g};
  }
  return {};
}

const char* op_of(ConvRole role) {
  return role == ConvRole::forward      ? "conv2d"
         : role == ConvRole::input_grad ? "conv2d_input_grad"
                                        : "conv2d_weight_grad";
}

// out = the op over inputs p, q of `dtype` (16-bit ones cast up to f32 first).
Graph conv_graph(const ConvCase& c, DType dtype) {
  GraphBuilder builder("conv_units");
  TracingScope scope(builder);
  const auto [ps, qs] = operand_shapes(c);
  Tensor p = builder.input("p", {dtype, ps});
  Tensor q = builder.input("q", {dtype, qs});
  if (dtype != DType::f32) {
    p = cast(p, DType::f32);
    q = cast(q, DType::f32);
  }
  const Conv2dOptions opt = options_of(c);
  Tensor out = c.role == ConvRole::forward      ? conv2d(p, q, opt)
               : c.role == ConvRole::input_grad ? conv2d_input_grad(p, q, c.h, c.w, opt)
                                                : conv2d_weight_grad(p, q, c.kh, c.kw, opt);
  builder.output("out", out);
  return builder.take();
}

// ---- planning for a made-up device ----

struct PlannedConv {
  std::string shader;
  std::vector<std::uint32_t> specialization;
  ConvGemmPush push;
  std::size_t then = 0;  // the split-K sum
};

PlannedConv planned(const ConvCase& c, DType dtype, MatmulPrecision precision, const DeviceInfo& info) {
  const Graph lowered = prepare_low_precision(conv_graph(c, dtype), info);
  const ProgramPlan plan = plan_program(lowered, info, {.matmul_precision = precision});
  PlannedConv out;
  std::size_t found = 0;
  for (const KernelLaunch& l : plan.launches) {
    if (l.shader.rfind("conv2d", 0) != 0) continue;
    ++found;
    out.shader = l.shader;
    out.specialization = l.specialization;
    if (l.push.size() == sizeof out.push) std::memcpy(&out.push, l.push.data(), sizeof out.push);
    out.then = l.then.size();
  }
  EXPECT_EQ(found, 1u) << c.name;
  return out;
}

// A product of M = 64 rows, NC = 512 columns and K = 288 for each role (the geometry chosen per
// role so that M, NC and K are those).
ConvCase medium(ConvRole role) {
  switch (role) {
    case ConvRole::forward:  // M = O, NC = N*OH*OW, K = C*9
      return {"forward", role, 2, 32, 16, 16, 64, 3, 3, 1, 1};
    case ConvRole::input_grad:  // M = C, NC = N*H*W, K = O*9
      return {"input_grad", role, 2, 64, 16, 16, 32, 3, 3, 1, 1};
    case ConvRole::weight_grad:  // M = O, NC = C (1x1), K = N*OH*OW
      return {"weight_grad", role, 2, 512, 12, 12, 64, 1, 1};
  }
  return {};
}

TEST(ConvUnitsSpirv, RewritesTheModuleForF16AndBf16) {
  const auto span = shader_spirv("conv2d_coopmat");
  const std::vector<std::uint32_t> nv(span.begin(), span.end());
  // The bf16 rewrite refuses a module with any bf16 arithmetic: the shader keeps 16-bit floats in
  // shared memory, conversions and fragments.
  EXPECT_NO_THROW(nv_coopmat_to_khr(nv, CoopmatElement::f16));
  EXPECT_NO_THROW(nv_coopmat_to_khr(nv, CoopmatElement::bf16));
  EXPECT_TRUE(derived_shader_spirv("conv2d_coopmat_f16").has_value());
  EXPECT_TRUE(derived_shader_spirv("conv2d_coopmat_bf16").has_value());
}

TEST(ConvUnitsSelect, SixteenBitOperandsTakeTheUnitsOfTheirType) {
  const DeviceInfo both = device_with_units(true, true);
  for (ConvRole role : {ConvRole::forward, ConvRole::input_grad, ConvRole::weight_grad}) {
    const ConvCase c = medium(role);
    SCOPED_TRACE(c.name);
    for (MatmulPrecision p : {MatmulPrecision::ieee, MatmulPrecision::split, MatmulPrecision::fast}) {
      PlannedConv bf = planned(c, DType::bf16, p, both);
      EXPECT_EQ(bf.shader, "conv2d_coopmat_bf16");
      EXPECT_EQ(bf.specialization, (std::vector<std::uint32_t>{static_cast<std::uint32_t>(role), 1}));
      EXPECT_EQ(bf.push.m, 64u);
      EXPECT_EQ(bf.push.nc, 512u);
      EXPECT_EQ(bf.push.k, 288u);
      EXPECT_EQ(bf.push.tiles_m, 1u);
      EXPECT_EQ(bf.push.tiles_n, 4u);
      EXPECT_EQ(bf.push.k_range, 288u) << "one K range";
      EXPECT_EQ(bf.then, 0u);
      const PlannedConv f = planned(c, DType::f16, p, both);
      EXPECT_EQ(f.shader, "conv2d_coopmat_f16");
      EXPECT_EQ(f.specialization, (std::vector<std::uint32_t>{static_cast<std::uint32_t>(role), 1}));
    }
    // A device with f16 units only: bf16 operands stay on the portable kernel.
    EXPECT_EQ(planned(c, DType::bf16, MatmulPrecision::ieee, device_with_units(true, false)).shader, "conv2d_gemm");
    EXPECT_EQ(planned(c, DType::f16, MatmulPrecision::ieee, device_with_units(true, false)).shader,
              "conv2d_coopmat_f16");
    // No units at all.
    EXPECT_EQ(planned(c, DType::bf16, MatmulPrecision::ieee, device_with_units(false, false)).shader, "conv2d_gemm");
  }
}

TEST(ConvUnitsSelect, F32ByPrecisionOnBf16UnitsAndPortableOtherwise) {
  for (ConvRole role : {ConvRole::forward, ConvRole::input_grad, ConvRole::weight_grad}) {
    const ConvCase c = medium(role);
    SCOPED_TRACE(c.name);
    const DeviceInfo both = device_with_units(true, true);
    EXPECT_EQ(planned(c, DType::f32, MatmulPrecision::ieee, both).shader, "conv2d_gemm") << "ieee: fp32";
    const PlannedConv split = planned(c, DType::f32, MatmulPrecision::split, both);
    EXPECT_EQ(split.shader, "conv2d_coopmat_bf16");
    EXPECT_EQ(split.specialization, (std::vector<std::uint32_t>{static_cast<std::uint32_t>(role), 6}));
    const PlannedConv fast = planned(c, DType::f32, MatmulPrecision::fast, both);
    EXPECT_EQ(fast.shader, "conv2d_coopmat_bf16");
    EXPECT_EQ(fast.specialization, (std::vector<std::uint32_t>{static_cast<std::uint32_t>(role), 3}));
    // Without bf16 units split and fast keep the portable fp32 kernel (inside both bounds).
    for (MatmulPrecision p : {MatmulPrecision::split, MatmulPrecision::fast}) {
      EXPECT_EQ(planned(c, DType::f32, p, device_with_units(true, false)).shader, "conv2d_gemm");
      EXPECT_EQ(planned(c, DType::f32, p, device_with_units(false, false)).shader, "conv2d_gemm");
    }
  }
}

TEST(ConvUnitsSelect, MixedOperandsAreF32) {
  // A bf16 image with an f32 weight: not exactly 16-bit products.
  GraphBuilder builder("mixed");
  TracingScope scope(builder);
  Tensor x = builder.input("x", {DType::bf16, {2, 32, 16, 16}});
  Tensor w = builder.input("w", {DType::f32, {64, 32, 3, 3}});
  builder.output("y", conv2d(cast(x, DType::f32), w, {.padding = 1}));
  const DeviceInfo info = device_with_units(true, true);
  const Graph lowered = prepare_low_precision(builder.take(), info);
  for (MatmulPrecision p : {MatmulPrecision::ieee, MatmulPrecision::split}) {
    const ProgramPlan plan = plan_program(lowered, info, {.matmul_precision = p});
    std::string shader;
    for (const KernelLaunch& l : plan.launches)
      if (l.shader.rfind("conv2d", 0) == 0) shader = l.shader;
    EXPECT_EQ(shader, p == MatmulPrecision::ieee ? "conv2d_gemm" : "conv2d_coopmat_bf16");
  }
}

TEST(ConvUnitsSelect, SmallAndThinProductsStayPortable) {
  const DeviceInfo both = device_with_units(true, true);
  const ConvUnitsLimits limits = conv_units_limits();
  ASSERT_EQ(limits.min_rows, 33);
  ASSERT_EQ(limits.min_columns, 16);
  // M (output channels of the forward) at 32 and 33; NC at 15 and 18 (a weight gradient's
  // C*KH*KW); both over a K of 288.
  for (const std::int64_t o : {32, 33}) {
    const ConvCase c{"rows " + std::to_string(o), ConvRole::forward, 2, 32, 16, 16, o, 3, 3, 1, 1};
    EXPECT_EQ(planned(c, DType::bf16, MatmulPrecision::ieee, both).shader,
              o < 33 ? "conv2d_gemm" : "conv2d_coopmat_bf16")
        << c.name;
  }
  for (const std::int64_t cin : {5, 6}) {  // NC = C * 3 = 15, 18 (kernel 3x1)
    const ConvCase c{"columns " + std::to_string(cin * 3), ConvRole::weight_grad, 4, cin, 12, 12, 64, 3, 1};
    EXPECT_EQ(planned(c, DType::bf16, MatmulPrecision::ieee, both).shader,
              cin * 3 < 16 ? "conv2d_gemm" : "conv2d_coopmat_bf16")
        << c.name;
  }
  // A depthwise convolution (M = 1 per group): the portable per-output mode, even under split.
  const ConvCase depthwise{"depthwise", ConvRole::forward, 2, 32, 16, 16, 32, 3, 3, 1, 1, 1, 32};
  const PlannedConv d = planned(depthwise, DType::f32, MatmulPrecision::split, both);
  EXPECT_EQ(d.shader, "conv2d_gemm");
  EXPECT_NE(d.push.flags & 4u, 0u) << "per-output mode";
  // Below the limits the portable kernel; a test scope lowers them.
  {
    const ScopedConvUnitsLimitsForTesting none({1, 1});
    const ConvCase c{"rows 8", ConvRole::forward, 2, 32, 16, 16, 8, 3, 3, 1, 1};
    EXPECT_EQ(planned(c, DType::bf16, MatmulPrecision::ieee, both).shader, "conv2d_coopmat_bf16");
  }
  {
    const ScopedConvUnitsLimitsForTesting all({std::int64_t{1} << 40, 1});
    EXPECT_EQ(planned(medium(ConvRole::forward), DType::bf16, MatmulPrecision::ieee, both).shader, "conv2d_gemm");
  }
}

TEST(ConvUnitsSelect, SplitKRangesAreWholeSlices) {
  // No split: many tiles, or K below 1024.
  EXPECT_EQ(conv_units_k_range(256, 100000), 25024);  // 4 ranges for the loop budget
  EXPECT_EQ(conv_units_k_range(1, 1023), 1023);
  EXPECT_EQ(conv_units_k_range(300, 4096), 4096);
  // Few tiles and a long K: about 256 workgroups, ranges of at least 256, multiples of 32.
  EXPECT_EQ(conv_units_k_range(5, 131072), 2592);  // 51 ranges
  EXPECT_EQ(conv_units_k_range(1, 1024), 256);
  EXPECT_EQ(conv_units_k_range(1, 1025), 288);  // 4 ranges, the last one 161
  for (std::uint64_t tiles : {1u, 3u, 17u, 100u, 255u, 256u, 1000u}) {
    for (std::int64_t k : {1, 31, 32, 33, 1000, 1024, 5000, 40000, 65537, 1000000}) {
      const std::int64_t r = conv_units_k_range(tiles, k);
      EXPECT_LE(r, std::max<std::int64_t>(k, 32) + 31) << tiles << " " << k;
      EXPECT_LE(r, 32768) << tiles << " " << k;
      if (r != k) {
        EXPECT_EQ(r % 32, 0) << tiles << " " << k;
      }
    }
  }
  // A weight gradient of few tiles plans its partials and their ordered sum.
  const ConvCase wg{"weight_grad", ConvRole::weight_grad, 16, 64, 32, 32, 64, 3, 3, 1, 1};
  const PlannedConv p = planned(wg, DType::bf16, MatmulPrecision::ieee, device_with_units(true, true));
  EXPECT_EQ(p.shader, "conv2d_coopmat_bf16");
  EXPECT_EQ(p.push.k, 16384u);
  EXPECT_EQ(p.push.k_range % 32, 0u);
  EXPECT_LT(p.push.k_range, p.push.k);
  EXPECT_EQ(p.then, 1u);
}

// On a device without matrix units (lavapipe) split and fast convolutions run the portable fp32
// kernel: no unit path is hit and the results are within the fp32 class.
TEST_F(VkTest, ConvWithoutMatrixUnitsTakesThePortableKernel) {
  auto ctx = make_context();
  if (matrix_unit_support(ctx->info()).f16 || matrix_unit_support(ctx->info()).bf16) {
    GTEST_SKIP() << "the device has matrix units; ConvUnitsTest.* covers them";
  }
  for (ConvRole role : {ConvRole::forward, ConvRole::input_grad, ConvRole::weight_grad}) {
    ConvCase c = medium(role);
    c.n = 1;
    for (MatmulPrecision p : {MatmulPrecision::ieee, MatmulPrecision::split, MatmulPrecision::fast}) {
      SCOPED_TRACE(c.name + " " + std::string(to_string(p)));
      const Graph g = conv_graph(c, DType::f32);
      const TensorMap in{{"p", random_f32(g.type(*g.find_input("p")).shape, 11)},
                         {"q", random_f32(g.type(*g.find_input("q")).shape, 12)}};
      reset_launch_path_counts();
      Program program(ctx, g, {.matmul_precision = p});
      for (const LaunchPathCount& path : launch_path_counts()) {
        if (path.path.rfind("matrix_units", 0) == 0) {
          EXPECT_EQ(path.hits, 0u) << path.name();
        }
      }
      const TensorMap got = program.run(in);
      const InterpResult oracle = interpret(g, in, {.compute = ComputeType::f64, .keep_all_values = true});
      const double bound = testing::f32_tolerance(g, oracle);
      const HostTensor& ref = oracle.outputs.at("out");
      for (std::size_t i = 0; i < ref.size(); ++i) {
        ASSERT_LE(std::fabs(got.at("out").at(i) - ref.at(i)), bound) << i;
      }
      EXPECT_NO_VALIDATION_MESSAGES(ctx);
    }
  }
}

// ---- on the units (GPU) ----

HostTensor input_of(DType dtype, const Shape& shape, std::uint32_t seed, float scale) {
  const HostTensor t = random_f32(shape, seed);
  std::vector<float> v(t.size());
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(t.at(i)) * scale;
  if (dtype == DType::f32) return HostTensor::f32(shape, std::move(v));
  return HostTensor::low_precision(dtype, shape, v);
}

std::uint64_t hits(ConvRole role, const std::string& prefix) {
  std::uint64_t n = 0;
  for (const LaunchPathCount& p : launch_path_counts()) {
    if (p.kernel == op_of(role) && p.path.rfind(prefix, 0) == 0) n += p.hits;
  }
  return n;
}

// Runs the case on the units and returns its largest error relative to max(1, max |out|); fails
// where an output is off the oracle by more than bound_factor times the fp32 class.
double check(const std::shared_ptr<Context>& ctx, const ConvCase& c, DType dtype, MatmulPrecision precision,
             double bound_factor, std::uint32_t seed, int expect_split = -1) {
  SCOPED_TRACE(c.name + " (" + op_of(c.role) + ") " + std::string(dtype_name(dtype)) + " " +
               std::string(to_string(precision)));
  const Graph g = conv_graph(c, dtype);
  const TensorMap in{{"p", input_of(dtype, g.type(*g.find_input("p")).shape, seed, c.scale)},
                     {"q", input_of(dtype, g.type(*g.find_input("q")).shape, seed + 1, c.scale)}};
  reset_launch_path_counts();
  Program program(ctx, g, {.matmul_precision = precision});
  EXPECT_EQ(hits(c.role, "matrix_units_f16") + hits(c.role, "matrix_units_bf16"), 1u) << "ran on the matrix units";
  if (expect_split >= 0) {
    EXPECT_EQ(hits(c.role, "matrix_units_split_k_sum"), static_cast<std::uint64_t>(expect_split)) << "split-K";
  }
  return testing::largest_error_within_fp32_class(g, in, program.run(in), "out", bound_factor);
}

// Every role across the tile edges (M and NC at 127/128/129, M at the limit 33), K around the slices
// (ragged last slices), stride 2, padding, dilation and groups, vec4 planes and odd planes, split-K
// on and off. The second field: 1 where split-K must run, 0 where it must not, -1 either.
std::vector<std::pair<ConvCase, int>> unit_cases() {
  using R = ConvRole;
  std::vector<std::pair<ConvCase, int>> cases;
  // forward: M = O, NC = N*OH*OW, K = C/g*KH*KW
  for (std::int64_t o : {33, 127, 128, 129}) {
    cases.push_back({{"fwd O" + std::to_string(o), R::forward, 2, 5, 9, 9, o, 3, 3, 1, 1}, 0});  // NC 162, K 45
  }
  cases.push_back({{"fwd NC 128", R::forward, 2, 4, 8, 8, 40, 1, 1}, 0});    // NC 128, K 4
  cases.push_back({{"fwd NC 127", R::forward, 1, 4, 1, 127, 40, 1, 1}, 0});  // NC 127
  cases.push_back({{"fwd NC 129", R::forward, 1, 4, 1, 129, 40, 1, 1}, 0});
  for (std::int64_t cin : {31, 32, 33}) {  // K 31, 32, 33 (1x1)
    cases.push_back({{"fwd K" + std::to_string(cin), R::forward, 2, cin, 16, 16, 40, 1, 1}, 0});
  }
  cases.push_back({{"fwd stride pad dil groups", R::forward, 2, 12, 17, 15, 80, 3, 2, 2, 1, 2, 2}, 0});
  cases.push_back({{"fwd 32x32 planes", R::forward, 2, 16, 32, 32, 64, 3, 3, 1, 1}, 0});   // direct stores
  cases.push_back({{"fwd split-K", R::forward, 1, 256, 8, 8, 40, 3, 3, 1, 1}, 1});         // K 2304, 1 tile
  cases.push_back({{"fwd split-K ragged", R::forward, 1, 150, 9, 9, 40, 3, 3, 1, 1}, 1});  // K 1350
  // input grad: M = C/g, NC = N*H*W, K = O/g*KH*KW
  for (std::int64_t cin : {33, 127, 128, 129}) {
    cases.push_back({{"igrad C" + std::to_string(cin), R::input_grad, 2, cin, 9, 9, 5, 3, 3, 1, 1}, 0});
  }
  cases.push_back({{"igrad stride pad dil groups", R::input_grad, 2, 72, 15, 14, 24, 3, 3, 2, 2, 2, 2}, 0});
  cases.push_back({{"igrad stride 2", R::input_grad, 3, 40, 16, 16, 48, 3, 3, 2, 1}, 0});
  cases.push_back({{"igrad split-K", R::input_grad, 1, 40, 8, 8, 200, 3, 3, 1, 1}, 1});  // K 1800
  // weight grad: M = O/g, NC = C/g*KH*KW, K = N*OH*OW
  for (std::int64_t o : {33, 127, 128, 129}) {
    cases.push_back({{"wgrad O" + std::to_string(o), R::weight_grad, 2, 5, 7, 7, o, 3, 3, 1, 1}, 0});  // K 98
  }
  cases.push_back({{"wgrad NC 135", R::weight_grad, 2, 15, 7, 7, 40, 3, 3, 1, 1}, 0});
  cases.push_back({{"wgrad stride pad dil groups", R::weight_grad, 3, 24, 19, 17, 80, 3, 3, 2, 2, 2, 2}, 0});
  cases.push_back({{"wgrad split-K", R::weight_grad, 16, 64, 32, 32, 64, 3, 3, 1, 1}, 1});        // K 16384
  cases.push_back({{"wgrad split-K ragged", R::weight_grad, 3, 20, 23, 23, 48, 3, 3, 1, 1}, 1});  // K 1587
  cases.push_back({{"wgrad split-K strided", R::weight_grad, 8, 16, 33, 33, 80, 3, 3, 2, 1, 1, 2}, 1});
  return cases;
}

class ConvUnitsTest : public MatrixUnitsFixture {};

TEST_F(ConvUnitsTest, SixteenBitOperandsAtEveryEdge) {
  std::uint32_t seed = 1;
  for (DType dtype : {DType::f16, DType::bf16}) {
    if (dtype == DType::f16 ? !support_.f16 : !support_.bf16) continue;
    double worst = 0;
    for (const auto& [c, split] : unit_cases()) {
      worst = std::max(worst, check(ctx_, c, dtype, MatmulPrecision::ieee, 1.0, seed += 2, split));
    }
    std::cout << dtype_name(dtype) << ": largest error / max(1, max |out|) = " << worst << "\n";
  }
}

TEST_F(ConvUnitsTest, SplitIsWithinTheFp32Class) {
  if (!support_.bf16) GTEST_SKIP() << "split runs on bf16 units: " << support_.why_not;
  std::uint32_t seed = 101;
  double worst = 0;
  for (const auto& [c, split] : unit_cases()) {
    worst = std::max(worst, check(ctx_, c, DType::f32, MatmulPrecision::split, 1.0, seed += 2, split));
  }
  for (const float scale : {1e15f, 1e-15f}) {
    ConvCase c{"magnitude", ConvRole::forward, 2, 12, 9, 9, 40, 3, 3, 1, 1};
    c.scale = scale;
    worst = std::max(worst, check(ctx_, c, DType::f32, MatmulPrecision::split, 1.0, seed += 2));
  }
  std::cout << "split: largest error / max(1, max |out|) = " << worst << "\n";
}

TEST_F(ConvUnitsTest, FastStaysWithinItsDocumentedBound) {
  if (!support_.bf16) GTEST_SKIP() << "fast runs on bf16 units: " << support_.why_not;
  std::uint32_t seed = 301;
  double worst = 0;
  for (const auto& [c, split] : unit_cases()) {
    worst = std::max(worst, check(ctx_, c, DType::f32, MatmulPrecision::fast, 256.0, seed += 2, split));
  }
  std::cout << "fast: largest error / max(1, max |out|) = " << worst << "\n";
}

}  // namespace
}  // namespace tg::vk
