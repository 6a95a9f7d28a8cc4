#pragma once
// What the matrix-unit tests share (matmul, attention and convolution kernels): a made-up device
// whose capability list has the 16x16x16 f16 and/or bf16 shapes the kernels need (for planning
// tests that need no device), and the fixture of the GPU tests, which skip where the device has
// no units the kernels can use.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>

#include "tensorgrad/vk/device.h"
#include "vk/kernels/matmul_units.h"
#include "vk_oracle_check.h"
#include "vk_test_support.h"

namespace tg::vk::testing {

inline CooperativeMatrixShape unit_shape(MatrixElement ab) {
  return {.m = 16,
          .n = 16,
          .k = 16,
          .a = ab,
          .b = ab,
          .c = MatrixElement::f32,
          .result = MatrixElement::f32,
          .subgroup_scope = true};
}

// A discrete GPU with 32-wide subgroups, 48 KB of shared memory, the Vulkan memory model and
// shaderFloat16, and the units of each 16-bit type asked for.
inline DeviceInfo device_with_units(bool f16, bool bf16) {
  DeviceInfo d;
  d.usable = true;
  d.type = DeviceType::discrete_gpu;
  d.subgroup_size = 32;
  d.max_compute_shared_memory_size = 49152;
  d.max_compute_work_group_invocations = 1024;
  d.storage_buffer_16bit_access = true;
  d.max_per_stage_storage_buffers = 32;
  d.max_storage_buffer_range = std::uint64_t{1} << 32;
  d.max_memory_allocation_size = std::uint64_t{1} << 34;
  d.min_storage_buffer_offset_alignment = 64;
  d.max_compute_work_group_count = {65535, 65535, 65535};
  if (f16) d.matrix_units.shapes.push_back(unit_shape(MatrixElement::f16));
  if (bf16) d.matrix_units.shapes.push_back(unit_shape(MatrixElement::bf16));
  d.matrix_units.bfloat16 = bf16;
  d.matrix_units.shader_float16 = true;
  d.matrix_units.vulkan_memory_model = true;
  return d;
}

// The GPU tests' fixture: a Context, and a skip naming why where its device has no usable units.
class MatrixUnitsFixture : public VkTest {
 protected:
  void SetUp() override {
    VkTest::SetUp();
    if (IsSkipped()) return;
    ctx_ = make_context();
    support_ = matrix_unit_support(ctx_->info());
    if (!support_.f16 && !support_.bf16) {
      GTEST_SKIP() << ctx_->info().name << " has no matrix units the kernels can use (" << support_.why_not
                   << "); run on the GPU machine without the validation layer (docs/testing.md, \"Matrix units\")";
    }
  }
  std::shared_ptr<Context> ctx_;
  MatrixUnitSupport support_;
};

// The largest error of Vulkan's `output` (in `got`, from inputs `in` of graph `g`) against the f64
// oracle, relative to max(1, max |oracle|); a failure for each of the first five outputs off by
// more than bound_factor times g's fp32 class.
inline double largest_error_within_fp32_class(const Graph& g, const TensorMap& in, const TensorMap& got,
                                              const std::string& output, double bound_factor) {
  const InterpResult oracle = interpret(g, in, {.compute = ComputeType::f64, .keep_all_values = true});
  const double bound = f32_tolerance(g, oracle) * bound_factor;
  const HostTensor& ref = oracle.outputs.at(output);
  const HostTensor& out = got.at(output);
  double scale = 1.0;
  for (std::size_t i = 0; i < ref.size(); ++i) scale = std::max(scale, std::fabs(ref.at(i)));
  double worst = 0;
  std::size_t bad = 0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    const double err = std::fabs(out.at(i) - ref.at(i));
    worst = std::max(worst, err / scale);
    if (!(err <= bound) && ++bad <= 5) {
      ADD_FAILURE() << output << "[" << i << "]: Vulkan " << out.at(i) << ", oracle " << ref.at(i) << " (allowed "
                    << bound << ")";
    }
  }
  EXPECT_EQ(bad, 0u);
  return worst;
}

}  // namespace tg::vk::testing
