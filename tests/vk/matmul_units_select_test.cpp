// The matrix-unit matmul's parts that run without matrix units, so CI (lavapipe) checks them on
// every run: the NV -> KHR SPIR-V rewrite of shaders/matmul_coopmat.comp (src/vk/spirv_coopmat.h),
// which kernel made-up capability lists choose (src/vk/kernels/matmul_units.h), which operands
// count as exactly 16-bit, and that a device without matrix units takes the portable kernel for
// every precision setting (the numerics of split and fast there: matmul_precision_split_test.cpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "support/library.h"
#include "tensorgrad/ir/error.h"
#include "tensorgrad/ir/ops/ids/precision.h"
#include "tensorgrad/vk/executor.h"
#include "tensorgrad/vk/shaders.h"
#include "vk/kernels/matmul_units.h"
#include "vk/low_precision_lowering.h"
#include "vk/program_plan.h"
#include "vk/spirv_coopmat.h"
#include "vk_test_support.h"

namespace tg::vk {
namespace {

using Words = std::vector<std::uint32_t>;

std::vector<Words> instructions(const Words& words) {
  std::vector<Words> out;
  for (std::size_t at = 5; at < words.size(); at += words[at] >> 16) {
    out.emplace_back(words.begin() + static_cast<std::ptrdiff_t>(at),
                     words.begin() + static_cast<std::ptrdiff_t>(at + (words[at] >> 16)));
  }
  return out;
}
std::uint32_t op(const Words& in) { return in[0] & 0xffffu; }
std::size_t count_op(const std::vector<Words>& ins, std::uint32_t opcode) {
  return static_cast<std::size_t>(
      std::count_if(ins.begin(), ins.end(), [&](const Words& i) { return op(i) == opcode; }));
}
bool has_capability(const std::vector<Words>& ins, std::uint32_t capability) {
  return std::any_of(ins.begin(), ins.end(), [&](const Words& i) { return op(i) == 17 && i[1] == capability; });
}
bool has_extension(const std::vector<Words>& ins, const std::string& name) {
  return std::any_of(ins.begin(), ins.end(), [&](const Words& i) {
    if (op(i) != 10) return false;
    const std::string text(reinterpret_cast<const char*>(i.data() + 1), (i.size() - 1) * 4);
    return text.substr(0, text.find('\0')) == name;
  });
}
// The value of a 32-bit integer constant id.
std::uint32_t constant(const std::vector<Words>& ins, std::uint32_t id) {
  for (const Words& i : ins) {
    if (op(i) == 43 && i.size() == 4 && i[2] == id) return i[3];
  }
  ADD_FAILURE() << "no integer constant %" << id;
  return 0;
}

Words embedded() {
  const auto span = shader_spirv("matmul_coopmat");
  return {span.begin(), span.end()};
}

void expect_khr_module(const Words& words, bool bf16) {
  const std::vector<Words> ins = instructions(words);
  for (std::uint32_t nv = 5358; nv <= 5362; ++nv) EXPECT_EQ(count_op(ins, nv), 0u) << "NV opcode " << nv << " left";
  EXPECT_FALSE(has_capability(ins, 5357)) << "CooperativeMatrixNV left";
  EXPECT_TRUE(has_capability(ins, 6022)) << "CooperativeMatrixKHR";
  EXPECT_FALSE(has_extension(ins, "SPV_NV_cooperative_matrix"));
  EXPECT_TRUE(has_extension(ins, "SPV_KHR_cooperative_matrix"));
  // Three types, one per use, all 16x16, 16-bit A and B and an f32 accumulator.
  std::vector<std::uint32_t> uses;
  for (const Words& i : ins) {
    if (op(i) != 4456) continue;
    ASSERT_EQ(i.size(), 7u);
    EXPECT_EQ(constant(ins, i[4]), 16u) << "rows";
    EXPECT_EQ(constant(ins, i[5]), 16u) << "columns";
    uses.push_back(constant(ins, i[6]));  // an id, like the sizes
  }
  std::sort(uses.begin(), uses.end());
  EXPECT_EQ(uses, (std::vector<std::uint32_t>{0, 1, 2}));
  // Loads and stores: the layout (a constant 0, row-major, as the shader asks) before the stride.
  EXPECT_GT(count_op(ins, 4457), 0u);
  EXPECT_GT(count_op(ins, 4458), 0u);
  EXPECT_GT(count_op(ins, 4459), 0u);
  for (const Words& i : ins) {
    if (op(i) == 4457) {
      EXPECT_EQ(constant(ins, i[4]), 0u) << "load layout";
    }
    if (op(i) == 4458) {
      EXPECT_EQ(constant(ins, i[3]), 0u) << "store layout";
    }
  }
  bool bf16_type = false;
  bool f16_type = false;
  for (const Words& i : ins) {
    if (op(i) == 22 && i[2] == 16) (i.size() == 4 && i[3] == 0 ? bf16_type : f16_type) = true;
  }
  EXPECT_EQ(bf16_type, bf16);
  EXPECT_EQ(f16_type, !bf16);
  EXPECT_EQ(has_capability(ins, 5116), bf16) << "BFloat16TypeKHR";
  EXPECT_EQ(has_capability(ins, 5118), bf16) << "BFloat16CooperativeMatrixKHR";
  EXPECT_EQ(has_capability(ins, 9), !bf16) << "Float16";
  EXPECT_EQ(has_extension(ins, "SPV_KHR_bfloat16"), bf16);
  // Every id below the bound.
  for (const Words& i : ins) {
    if (op(i) == 43) {
      EXPECT_LT(i[2], words[3]);
    }
  }
}

TEST(MatmulUnitsSpirv, RewritesTheNvModuleToKhrForF16AndBf16) {
  const Words nv = embedded();
  expect_khr_module(nv_coopmat_to_khr(nv, CoopmatElement::f16), false);
  expect_khr_module(nv_coopmat_to_khr(nv, CoopmatElement::bf16), true);
  EXPECT_EQ(*derived_shader_spirv("matmul_coopmat_bf16"), nv_coopmat_to_khr(nv, CoopmatElement::bf16));
  EXPECT_FALSE(derived_shader_spirv("matmul").has_value());
  EXPECT_FALSE(derived_shader_spirv("matmul_coopmat_f32").has_value());
}

TEST(MatmulUnitsSpirv, RefusesWhatItCannotTranslate) {
  EXPECT_THROW(nv_coopmat_to_khr(Words{1, 2, 3}, CoopmatElement::f16), Error);
  // A cooperative matrix type of another shape: the A type's columns pointed at the rows' id
  // changed to a constant that is neither 8 nor 16 (136).
  Words words = embedded();
  std::vector<Words> ins = instructions(words);
  std::uint32_t other_constant = 0;
  for (const Words& i : ins) {
    if (op(i) == 43 && i.size() == 4 && i[3] == 136) other_constant = i[2];  // LDB = 136 is a constant
  }
  ASSERT_NE(other_constant, 0u);
  for (std::size_t at = 5; at < words.size(); at += words[at] >> 16) {
    if ((words[at] & 0xffffu) == 5358) {
      words[at + 5] = other_constant;
      break;
    }
  }
  try {
    nv_coopmat_to_khr(words, CoopmatElement::f16);
    ADD_FAILURE() << "a 16x136 cooperative matrix type was translated";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("16x136"), std::string::npos) << e.what();
  }
}

CooperativeMatrixShape shape(std::uint32_t m, std::uint32_t n, std::uint32_t k, MatrixElement ab) {
  return {.m = m,
          .n = n,
          .k = k,
          .a = ab,
          .b = ab,
          .c = MatrixElement::f32,
          .result = MatrixElement::f32,
          .subgroup_scope = true};
}

// What an H100/H200 with NVIDIA's 580 driver reports (the list), in a made-up DeviceInfo.
DeviceInfo hopper_like() {
  DeviceInfo d;
  d.subgroup_size = 32;
  d.max_compute_shared_memory_size = 49152;
  d.max_compute_work_group_invocations = 1024;
  d.matrix_units.shapes = {shape(16, 16, 16, MatrixElement::f16), shape(16, 8, 16, MatrixElement::f16),
                           shape(16, 8, 8, MatrixElement::f16), shape(16, 16, 16, MatrixElement::bf16)};
  d.matrix_units.bfloat16 = true;
  d.matrix_units.shader_float16 = true;
  d.matrix_units.vulkan_memory_model = true;
  return d;
}

TEST(MatmulUnitsSelect, ChoosesFromWhatTheDeviceReports) {
  const DeviceInfo full = hopper_like();
  MatrixUnitSupport s = matrix_unit_support(full);
  EXPECT_TRUE(s.f16 && s.bf16) << s.why_not;

  DeviceInfo d = full;
  d.matrix_units.shapes.clear();
  s = matrix_unit_support(d);
  EXPECT_FALSE(s.f16 || s.bf16);
  EXPECT_NE(s.why_not.find("no cooperative matrices"), std::string::npos) << s.why_not;

  d = full;
  d.subgroup_size = 64;
  s = matrix_unit_support(d);
  EXPECT_FALSE(s.f16 || s.bf16);
  EXPECT_NE(s.why_not.find("64"), std::string::npos) << s.why_not;

  d = full;
  d.matrix_units.vulkan_memory_model = false;
  EXPECT_FALSE(matrix_unit_support(d).f16);

  d = full;
  d.max_compute_shared_memory_size = 32768;
  EXPECT_FALSE(matrix_unit_support(d).bf16);

  // Only shapes the kernel does not use (16x8x16 f16; a bf16 shape into bf16; a workgroup scope).
  d = full;
  CooperativeMatrixShape bf16_into_bf16 = shape(16, 16, 16, MatrixElement::bf16);
  bf16_into_bf16.c = bf16_into_bf16.result = MatrixElement::bf16;
  CooperativeMatrixShape workgroup = shape(16, 16, 16, MatrixElement::f16);
  workgroup.subgroup_scope = false;
  d.matrix_units.shapes = {shape(16, 8, 16, MatrixElement::f16), bf16_into_bf16, workgroup};
  s = matrix_unit_support(d);
  EXPECT_FALSE(s.f16 || s.bf16) << "no 16x16x16 subgroup shape into f32";

  // bf16 shapes without VK_KHR_shader_bfloat16; f16 shapes without shaderFloat16.
  d = full;
  d.matrix_units.bfloat16 = false;
  s = matrix_unit_support(d);
  EXPECT_TRUE(s.f16);
  EXPECT_FALSE(s.bf16);
  d = full;
  d.matrix_units.shader_float16 = false;
  s = matrix_unit_support(d);
  EXPECT_FALSE(s.f16);
  EXPECT_TRUE(s.bf16);
}

TEST(MatmulUnitsSelect, RoutesByOperandsPrecisionAndUnits) {
  const MatrixUnitSupport both{true, true, ""};
  const MatrixUnitSupport none{false, false, "none"};
  const MatrixUnitSupport f16_only{true, false, "no bf16"};
  const auto route = [](DType d, MatmulPrecision p, const MatrixUnitSupport& u) {
    const MatmulRoute r = choose_matmul_route(d, p, u);
    return std::to_string(r.matrix_units) + std::string(dtype_name(r.parts)) + std::to_string(r.split_terms);
  };
  for (MatmulPrecision p : {MatmulPrecision::ieee, MatmulPrecision::split, MatmulPrecision::fast}) {
    SCOPED_TRACE(std::string(to_string(p)));
    // 16-bit operands: exact products, one part on units of their type whatever the setting.
    EXPECT_EQ(route(DType::f16, p, both), "1f161");
    EXPECT_EQ(route(DType::bf16, p, both), "1bf161");
    EXPECT_EQ(route(DType::f16, p, none), "0f320");
    EXPECT_EQ(route(DType::bf16, p, f16_only), "0f320");
  }
  EXPECT_EQ(route(DType::f32, MatmulPrecision::ieee, both), "0f320");
  EXPECT_EQ(route(DType::f32, MatmulPrecision::split, both), "1bf166");
  EXPECT_EQ(route(DType::f32, MatmulPrecision::fast, both), "1bf163");
  // Without bf16 units: the same arithmetic on the portable kernel (f16 parts would lose range).
  EXPECT_EQ(route(DType::f32, MatmulPrecision::split, f16_only), "0f326");
  EXPECT_EQ(route(DType::f32, MatmulPrecision::fast, none), "0f323");
}

TEST(MatmulUnitsSelect, ExactOperandsAreCastsUpThroughLayoutOps) {
  GraphBuilder builder("exact");
  TracingScope scope(builder);
  Tensor h = builder.input("h", {DType::bf16, {4, 3}});
  Tensor f = builder.input("f", {DType::f32, {4, 3}});
  Tensor i = builder.input("i", {DType::i32, {4, 3}});
  Tensor up = cast(h, DType::f32);
  Tensor moved = reshape(swap_axes(up, 0, 1), {3, 4});
  builder.output("moved", moved);
  builder.output("scaled", up * 2.0);
  builder.output("int", cast(i, DType::f32));
  builder.output("f", f + 1.0);
  const Graph g = builder.take();
  EXPECT_EQ(exact_operand_dtype(g, *g.find_output("moved")), DType::bf16);
  EXPECT_EQ(exact_operand_dtype(g, *g.find_output("scaled")), DType::f32) << "arithmetic after the cast";
  EXPECT_EQ(exact_operand_dtype(g, *g.find_output("int")), DType::f32) << "a cast from i32";
  EXPECT_EQ(exact_operand_dtype(g, *g.find_input("f")), DType::f32);
}

// The launches a made-up device with matrix units gets (planning needs no device): which shader,
// which specialization constants, which values bound.
struct PlannedMatmul {
  std::string shader;
  std::vector<std::uint32_t> specialization;
  std::vector<ValueId> bindings;
};
std::vector<PlannedMatmul> planned_matmuls(const Graph& traced, MatmulPrecision precision, const Graph** lowered_out,
                                           Graph& lowered_storage) {
  DeviceInfo info = hopper_like();
  info.usable = true;
  info.storage_buffer_16bit_access = true;
  info.max_per_stage_storage_buffers = 32;
  info.max_storage_buffer_range = std::uint64_t{1} << 32;
  info.max_memory_allocation_size = std::uint64_t{1} << 34;
  info.min_storage_buffer_offset_alignment = 64;
  info.max_compute_work_group_count = {65535, 65535, 65535};
  lowered_storage = prepare_low_precision(traced, info);
  *lowered_out = &lowered_storage;
  const ProgramPlan plan = plan_program(lowered_storage, info, {.matmul_precision = precision});
  std::vector<PlannedMatmul> out;
  for (const KernelLaunch& l : plan.launches) {
    if (l.shader.rfind("matmul", 0) == 0 && l.shader != "matmul_split_sum") {
      out.push_back({l.shader, l.specialization, l.bindings});
    }
  }
  return out;
}

TEST(MatmulUnitsSelect, PlansTheMatrixUnitKernelOnADeviceThatHasIt) {
  GraphBuilder builder("routes");
  TracingScope scope(builder);
  Tensor a = builder.input("a", {DType::bf16, {130, 70}});
  Tensor b = builder.input("b", {DType::bf16, {70, 129}});
  Tensor x = builder.input("x", {DType::f32, {130, 70}});
  Tensor y = builder.input("y", {DType::f32, {70, 129}});
  builder.output("c16", matmul(a, b, DType::f32));
  builder.output("c32", matmul(x, y));
  // A bf16 operand made by an elementwise run (its cast down fused into the run).
  builder.output("fused", matmul(cast(x * 2.0, DType::bf16), b, DType::f32));
  const Graph g = builder.take();
  Graph storage;
  const Graph* lowered = nullptr;

  std::vector<PlannedMatmul> ms = planned_matmuls(g, MatmulPrecision::ieee, &lowered, storage);
  ASSERT_EQ(ms.size(), 3u);
  // bf16 operands: one part on the bf16 units (spec 4 = 1), reading the casts' f32 copies.
  EXPECT_EQ(ms[0].shader, "matmul_coopmat_bf16");
  EXPECT_EQ(ms[0].specialization, (std::vector<std::uint32_t>{0, 0, 0, 0, 1}));
  EXPECT_EQ(lowered->nodes()[static_cast<std::size_t>(lowered->value(ms[0].bindings[0]).producer)].op, op::Cast);
  EXPECT_EQ(ms[1].shader, "matmul_small") << "f32 under ieee: the portable kernel (3 large tiles: small ones)";
  EXPECT_EQ(ms[2].shader, "matmul_coopmat_bf16") << "an operand rounded to bf16 in a fused run";

  ms = planned_matmuls(g, MatmulPrecision::split, &lowered, storage);
  ASSERT_EQ(ms.size(), 3u);
  EXPECT_EQ(ms[1].shader, "matmul_coopmat_bf16");
  EXPECT_EQ(ms[1].specialization, (std::vector<std::uint32_t>{0, 0, 0, 0, 6}));
  ms = planned_matmuls(g, MatmulPrecision::fast, &lowered, storage);
  EXPECT_EQ(ms[1].specialization, (std::vector<std::uint32_t>{0, 0, 0, 0, 3}));
}

// On a device without matrix units (lavapipe) every setting and every operand dtype runs the
// portable kernels: no matrix-unit path is hit, and ieee launches keep their pipeline key.
using testing::VkTest;

TEST_F(VkTest, MatmulWithoutMatrixUnitsTakesThePortableKernel) {
  auto ctx = make_context();
  if (matrix_unit_support(ctx->info()).f16 || matrix_unit_support(ctx->info()).bf16) {
    GTEST_SKIP() << "the device has matrix units; tests/vk/matmul_units_gpu_test.cpp covers them";
  }
  GraphBuilder builder("portable");
  TracingScope scope(builder);
  Tensor a = builder.input("a", {DType::bf16, {70, 40}});
  Tensor b = builder.input("b", {DType::bf16, {40, 50}});
  Tensor x = builder.input("x", {DType::f32, {70, 40}});
  builder.output("c16", matmul(a, b, DType::f32));
  builder.output("c32", matmul(x, cast(b, DType::f32)));
  const Graph g = builder.take();
  for (MatmulPrecision p : {MatmulPrecision::ieee, MatmulPrecision::split, MatmulPrecision::fast}) {
    reset_launch_path_counts();
    Program program(ctx, g, {.matmul_precision = p});
    for (const LaunchPathCount& path : launch_path_counts()) {
      if (path.kernel == "matmul" && path.path.rfind("matrix_units", 0) == 0) {
        EXPECT_EQ(path.hits, 0u) << path.name() << " under " << to_string(p);
      }
      if (path.kernel == "matmul" && path.path == "split_terms") {
        EXPECT_EQ(path.hits, p == MatmulPrecision::split ? 1u : 0u) << "only the f32 product emulates split";
      }
      if (path.kernel == "matmul" && path.path == "fast_terms") {
        EXPECT_EQ(path.hits, p == MatmulPrecision::fast ? 1u : 0u);
      }
    }
  }
}

}  // namespace
}  // namespace tg::vk
