// Which kernel runs attention's forward (src/vk/kernels/attention_units.h), planned for a made-up
// device with matrix units (planning needs no device): 16-bit q, k, v with head_dim and Dv
// multiples of 16 up to 64 take shaders/attention_coopmat.comp of their type; f32 operands, other
// widths, mixed dtypes and devices without units keep the portable flash kernel. Also: the shader's
// module rewrites to SPV_KHR_cooperative_matrix for f16 and bf16.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "matrix_units_test_support.h"
#include "support/library.h"
#include "tensorgrad/ir/ops/attention.h"
#include "tensorgrad/vk/shaders.h"
#include "vk/kernels/attention_units.h"
#include "vk/low_precision_lowering.h"
#include "vk/program_plan.h"
#include "vk/spirv_coopmat.h"

namespace tg::vk {
namespace {

// The shader of each attention / attention_lse launch of `traced` on the made-up device.
std::vector<std::string> attention_shaders(const Graph& traced, bool units) {
  const DeviceInfo info = testing::device_with_units(units, units);
  const Graph lowered = prepare_low_precision(traced, info);
  const ProgramPlan plan = plan_program(lowered, info, {});
  std::vector<std::string> shaders;
  for (std::size_t n = 0; n < plan.launches.size(); ++n) {
    if (op_family(lowered.nodes()[n].op) == "attention") shaders.push_back(plan.launches[n].shader);
  }
  return shaders;
}

Graph one_attention(DType q_dtype, DType kv_dtype, std::int64_t d, std::int64_t dv, bool lse = false) {
  GraphBuilder b("attention");
  TracingScope scope(b);
  const Tensor q = b.input("q", {q_dtype, {2, 3, 70, d}});
  const Tensor k = b.input("k", {kv_dtype, {2, 3, 70, d}});
  const Tensor v = b.input("v", {kv_dtype, {2, 3, 70, dv}});
  b.output("y", lse ? attention_lse(q, k, {.causal = true}) : attention(q, k, v, {.causal = true}));
  return b.take();
}

TEST(AttentionUnitsSelect, SixteenBitOperandsOfFittingWidthsTakeTheUnits) {
  EXPECT_EQ(attention_shaders(one_attention(DType::bf16, DType::bf16, 64, 64), true),
            std::vector<std::string>{"attention_coopmat_bf16"});
  EXPECT_EQ(attention_shaders(one_attention(DType::f16, DType::f16, 16, 48), true),
            std::vector<std::string>{"attention_coopmat_f16"});
  EXPECT_EQ(attention_shaders(one_attention(DType::bf16, DType::bf16, 32, 80, true), true),
            std::vector<std::string>{"attention_coopmat_bf16"})
      << "attention_lse reads no v";
}

// The backward's three ops (lse, dq, [dk | dv]) read the same 16-bit values (o and g included: the
// output and its cotangent are bf16 too), so the whole gradient runs on the units.
TEST(AttentionUnitsSelect, TheBackwardTakesTheUnitsToo) {
  GraphBuilder b("grad");
  TracingScope scope(b);
  const Tensor q = b.input("q", {DType::bf16, {2, 70, 64}});
  const Tensor k = b.input("k", {DType::bf16, {2, 70, 64}});
  const Tensor v = b.input("v", {DType::bf16, {2, 70, 32}});
  const Tensor w = b.input("w", {DType::f32, {2, 70, 32}});
  b.output("loss", sum(cast(attention(q, k, v, {.causal = true}), DType::f32) * w));
  const Graph g = differentiate(b.take(), {.loss = "loss", .wrt = {"q", "k", "v"}});
  std::vector<std::string> shaders = attention_shaders(g, true);
  std::sort(shaders.begin(), shaders.end());
  EXPECT_EQ(shaders, (std::vector<std::string>{"attention_coopmat_bf16", "attention_coopmat_bf16",
                                               "attention_coopmat_grad_kv_bf16", "attention_coopmat_grad_q_bf16"}));
  for (const std::string& shader : attention_shaders(g, false)) {
    EXPECT_EQ(shader.find("coopmat"), std::string::npos) << shader;
  }
}

TEST(AttentionUnitsSelect, EverythingElseKeepsThePortableKernel) {
  const auto portable = [](const Graph& g, bool units = true) {
    for (const std::string& shader : attention_shaders(g, units)) {
      EXPECT_EQ(shader.find("coopmat"), std::string::npos) << shader;
    }
  };
  portable(one_attention(DType::f32, DType::f32, 64, 64));           // f32 stays f32 (ieee)
  portable(one_attention(DType::bf16, DType::bf16, 64, 64), false);  // no units
  portable(one_attention(DType::bf16, DType::bf16, 80, 64));         // head_dim past 64
  portable(one_attention(DType::bf16, DType::bf16, 24, 64));         // head_dim not a multiple of 16
  portable(one_attention(DType::bf16, DType::bf16, 64, 72));         // Dv past 64
  // q in f32 next to bf16 k, v: the f32 values are not exactly 16-bit.
  GraphBuilder b("mixed");
  TracingScope scope(b);
  const Tensor q = b.input("q", {DType::f32, {2, 8, 16}});
  const Tensor k = b.input("k", {DType::bf16, {2, 8, 16}});
  b.output("y", attention(q * 2.0, cast(k, DType::f32), cast(k, DType::f32)));
  portable(b.take());
  EXPECT_FALSE(attention_shaders(one_attention(DType::f32, DType::f32, 64, 64), true).empty());
}

TEST(AttentionUnitsSpirv, TheKernelRewritesToKhrForF16AndBf16) {
  const std::vector<std::uint32_t> nv(shader_spirv("attention_coopmat").begin(),
                                      shader_spirv("attention_coopmat").end());
  for (const char* name :
       {"attention_coopmat_f16", "attention_coopmat_bf16", "attention_coopmat_grad_q_f16",
        "attention_coopmat_grad_q_bf16", "attention_coopmat_grad_kv_f16", "attention_coopmat_grad_kv_bf16"}) {
    const auto khr = derived_shader_spirv(name);
    ASSERT_TRUE(khr.has_value()) << name;
    EXPECT_GT(khr->size(), nv.size() / 2) << name;
  }
  EXPECT_EQ(*derived_shader_spirv("attention_coopmat_bf16"), nv_coopmat_to_khr(nv, CoopmatElement::bf16));
  EXPECT_FALSE(derived_shader_spirv("attention_coopmat_f32").has_value());
}

}  // namespace
}  // namespace tg::vk
