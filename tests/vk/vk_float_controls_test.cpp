// Float controls (src/vk/spirv_float_controls.h): the SPIR-V patch itself (capabilities, the
// extension and one execution mode per entry point, nothing repeated, malformed modules refused),
// what a Context enables, and the results they exist for: NaN through minimum, maximum and relu,
// relu(-0) = -0 and denormals kept, as the interpreter has them, on every device that supports
// the controls (NVIDIA's driver drops them without).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "support/library.h"
#include "tensorgrad/vk/executor.h"
#include "tensorgrad/vk/shaders.h"
#include "vk/spirv_float_controls.h"
#include "vk_test_support.h"

namespace tg::vk {
namespace {

using testing::VkTest;

// The instructions of a module as (opcode, operands).
std::vector<std::vector<std::uint32_t>> instructions(const std::vector<std::uint32_t>& words) {
  std::vector<std::vector<std::uint32_t>> out;
  for (std::size_t at = 5; at < words.size(); at += words[at] >> 16) {
    out.emplace_back(words.begin() + static_cast<std::ptrdiff_t>(at),
                     words.begin() + static_cast<std::ptrdiff_t>(at + (words[at] >> 16)));
  }
  return out;
}

std::size_t count(const std::vector<std::vector<std::uint32_t>>& in, const std::vector<std::uint32_t>& wanted) {
  std::size_t n = 0;
  for (const auto& i : in) n += i == wanted ? 1 : 0;
  return n;
}

TEST(VkFloatControls, PatchAddsCapabilitiesExtensionAndModesOnce) {
  const std::span<const std::uint32_t> original = shader_spirv("elementwise_unary");
  const std::vector<std::uint32_t> plain(original.begin(), original.end());
  EXPECT_EQ(with_float_controls(original, {}), plain) << "no controls: the module unchanged";

  const std::vector<std::uint32_t> patched =
      with_float_controls(original, {.preserve_nan_inf_signed_zero = true, .preserve_denormals = true});
  const auto ins = instructions(patched);
  std::uint32_t entry = 0;
  for (const auto& i : ins) {
    if ((i[0] & 0xffffu) == 15) entry = i[2];  // OpEntryPoint
  }
  ASSERT_NE(entry, 0u);
  EXPECT_EQ(count(ins, {(2u << 16) | 17u, 4466u}), 1u) << "OpCapability SignedZeroInfNanPreserve";
  EXPECT_EQ(count(ins, {(2u << 16) | 17u, 4464u}), 1u) << "OpCapability DenormPreserve";
  EXPECT_EQ(count(ins, {(4u << 16) | 16u, entry, 4461u, 32u}), 1u) << "OpExecutionMode SignedZeroInfNanPreserve 32";
  EXPECT_EQ(count(ins, {(4u << 16) | 16u, entry, 4459u, 32u}), 1u) << "OpExecutionMode DenormPreserve 32";
  std::size_t extensions = 0;
  for (const auto& i : ins) {
    if ((i[0] & 0xffffu) != 10) continue;  // OpExtension
    const char* name = reinterpret_cast<const char*>(i.data() + 1);
    extensions += std::string(name) == "SPV_KHR_float_controls" ? 1 : 0;
  }
  EXPECT_EQ(extensions, 1u);
  // Sections stay in order: every capability before the first extension, the extension before the
  // entry point.
  std::size_t last_capability = 0, first_extension = ins.size(), entry_at = 0;
  for (std::size_t k = 0; k < ins.size(); ++k) {
    const std::uint32_t op = ins[k][0] & 0xffffu;
    if (op == 17) last_capability = k;
    if (op == 10) first_extension = std::min(first_extension, k);
    if (op == 15) entry_at = k;
  }
  EXPECT_LT(last_capability, first_extension);
  EXPECT_LT(first_extension, entry_at);
  // Patching again adds nothing.
  EXPECT_EQ(with_float_controls(patched, {.preserve_nan_inf_signed_zero = true, .preserve_denormals = true}), patched);

  const std::vector<std::uint32_t> junk{1, 2, 3, 4, 5, 6};
  EXPECT_THROW(with_float_controls(junk, {.preserve_nan_inf_signed_zero = true}), Error);
  std::vector<std::uint32_t> truncated = plain;
  truncated.resize(7);
  truncated[5] = (100u << 16) | 17u;  // claims 100 words
  EXPECT_THROW(with_float_controls(truncated, {.preserve_nan_inf_signed_zero = true}), Error);
}

TEST_F(VkTest, ContextEnablesTheFloatControlsTheDeviceHas) {
  auto ctx = make_context();
  const DeviceInfo& info = ctx->info();
  const bool core = info.api_version >= VK_API_VERSION_1_2;
  EXPECT_EQ(ctx->preserves_nan_inf_signed_zero(), core && info.can_preserve_nan_inf_signed_zero);
  EXPECT_EQ(ctx->preserves_denormals(), core && info.can_preserve_denormals);
  auto off = make_context({.float_controls = false});
  EXPECT_FALSE(off->preserves_nan_inf_signed_zero());
  EXPECT_FALSE(off->preserves_denormals());
}

// NaN, ±Inf and -0 through the ops a driver assuming none of them rewrites (minimum, maximum,
// relu, and their fused forms): the interpreter's values, sign of zero included.
TEST_F(VkTest, NanInfAndSignedZeroSurviveMinMaxAndRelu) {
  auto ctx = make_context();
  if (!ctx->preserves_nan_inf_signed_zero()) {
    GTEST_SKIP() << ctx->info().name << " does not support SignedZeroInfNanPreserve for 32-bit floats";
  }
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  const std::vector<double> xs{nan, 1.0, -0.0, 0.0, -inf, inf, -2.0, nan};
  const std::vector<double> ys{1.0, nan, 0.0, -0.0, nan, -1.0, -0.0, 3.0};
  GraphBuilder b("specials");
  TracingScope scope(b);
  const Tensor x = b.input("x", {DType::f32, {8}});
  const Tensor y = b.input("y", {DType::f32, {8}});
  b.output("relu", relu(x));
  b.output("minimum", minimum(x, y));
  b.output("maximum", maximum(x, y));
  b.output("fused", relu(maximum(x, y) * 1.f));
  const Graph g = b.take();
  const TensorMap in{{"x", HostTensor::f32({8}, {xs.begin(), xs.end()})},
                     {"y", HostTensor::f32({8}, {ys.begin(), ys.end()})}};
  const TensorMap want = interpret(g, in, {.compute = ComputeType::f32}).outputs;
  for (const bool fuse : {false, true}) {
    Program program(ctx, g, {.fuse_elementwise = fuse});
    const TensorMap got = program.run(in);
    for (const auto& [name, w] : want) {
      for (std::size_t i = 0; i < w.size(); ++i) {
        const double v = got.at(name).at(i), r = w.at(i);
        if (std::isnan(r)) {
          EXPECT_TRUE(std::isnan(v)) << name << "[" << i << "] = " << v << ", want NaN (fused " << fuse << ")";
        } else {
          EXPECT_TRUE(v == r && std::signbit(v) == std::signbit(r))
              << name << "[" << i << "] = " << v << ", want " << r << " (fused " << fuse << ")";
        }
      }
    }
  }
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

TEST_F(VkTest, DenormalsSurviveWhereTheDeviceKeepsThem) {
  auto ctx = make_context();
  if (!ctx->preserves_denormals()) {
    GTEST_SKIP() << ctx->info().name << " does not support DenormPreserve for 32-bit floats";
  }
  const double tiny = std::ldexp(1.0, -140);  // an f32 denormal
  GraphBuilder b("denormals");
  TracingScope scope(b);
  const Tensor x = b.input("x", {DType::f32, {4}});
  b.output("relu", relu(x));
  b.output("scaled", x * 2.f);
  const Graph g = b.take();
  const TensorMap in{{"x", HostTensor::f32({4}, {static_cast<float>(tiny), static_cast<float>(-tiny), 0.f, 1.f})}};
  Program program(ctx, g);
  const TensorMap got = program.run(in);
  EXPECT_EQ(got.at("relu").at(0), tiny);
  EXPECT_EQ(got.at("scaled").at(0), 2 * tiny);
  EXPECT_EQ(got.at("scaled").at(1), -2 * tiny);
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

}  // namespace
}  // namespace tg::vk
