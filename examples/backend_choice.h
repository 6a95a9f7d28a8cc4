#pragma once
// The examples' --backend flag: "interp_f32", "interp_f64", "vulkan", or "auto" (Vulkan when the
// loader reports a usable device, else interp_f32 with a note). Asking for vulkan explicitly makes
// a missing device an error (Context::create's NoDeviceError lists the devices).
#include <algorithm>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "tensorgrad/tensorgrad.h"

namespace tg::examples {

struct BackendChoice {
  Backend backend = Backend::interp_f32;
  std::shared_ptr<vk::Context> context;  // Vulkan: the device the example prints and uses
};

// Throws std::invalid_argument for an unknown name, tg::Error when "vulkan" cannot be had.
inline BackendChoice choose_backend(const std::string& requested) {
  if (requested == "interp_f32" || requested == "interp_f64") {
    std::printf("backend: %s (the CPU interpreter, as asked)\n", requested.c_str());
    return {requested == "interp_f32" ? Backend::interp_f32 : Backend::interp_f64, nullptr};
  }
  if (requested != "auto" && requested != "vulkan") throw std::invalid_argument("unknown backend " + requested);
  try {
    const std::vector<vk::DeviceInfo> devices = vk::list_devices();
    if (std::none_of(devices.begin(), devices.end(), [](const auto& d) { return d.usable; })) {
      throw vk::NoDeviceError(
          devices.empty() ? "the Vulkan loader reports no device"
                          : "the Vulkan loader reports " + std::to_string(devices.size()) + " device(s), none usable",
          devices);
    }
    auto context = vk::Context::create();
    std::printf("backend: vulkan on %s\n", context->info().summary().c_str());
    return {Backend::vulkan, std::move(context)};
  } catch (const Error& e) {
    if (requested == "vulkan") throw;
    std::printf(
        "backend: interp_f32 (the CPU interpreter)\n  note: Vulkan is not available (%s); training on the CPU\n",
        e.what());
    return {Backend::interp_f32, nullptr};
  }
}

}  // namespace tg::examples
