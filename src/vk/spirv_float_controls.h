#pragma once
// Internal: float controls (SPV_KHR_float_controls, core in Vulkan 1.2) added to a compute shader's
// SPIR-V when its pipeline is created. Without them a driver may assume that no value is NaN, ±Inf
// or -0 and flush denormals: NVIDIA's (H200, driver 580) then drops NaN through minimum, maximum
// and relu, turns relu(-0) into +0 and flushes denormals, although the GLSL tests isnan() and
// compares as the interpreter does. The shaders are compiled once (Vulkan 1.1 SPIR-V, for every
// device we accept), so the execution modes are added per device, where it supports them.
#include <cstdint>
#include <span>
#include <vector>

namespace tg::vk {

struct FloatControls {
  bool preserve_nan_inf_signed_zero = false;  // SignedZeroInfNanPreserve 32
  bool preserve_denormals = false;            // DenormPreserve 32
  bool any() const { return preserve_nan_inf_signed_zero || preserve_denormals; }
};

// The module with, for 32-bit floats, the capabilities, the SPV_KHR_float_controls extension and
// an execution mode per entry point for each control asked for (already present ones are not
// repeated). Throws tg::Error for words that are not a SPIR-V module.
std::vector<std::uint32_t> with_float_controls(std::span<const std::uint32_t> spirv, FloatControls controls);

}  // namespace tg::vk
