// tg dot GRAPH (Graphviz DOT of a graph file) and tg devices (the Vulkan devices and their limits).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>

#include "commands.h"
#include "common.h"
#include "tensorgrad/ir/text.h"
#include "tensorgrad/vk/device.h"
#include "tensorgrad/vk/error.h"

namespace tg::cli {

namespace {

void print_device(const vk::DeviceInfo& d) {
  std::printf("%s\n", d.summary().c_str());
  std::printf("  type                        %s\n", std::string(vk::to_string(d.type)).c_str());
  std::printf("  vendor / device id          0x%04x / 0x%04x\n", d.vendor_id, d.device_id);
  std::printf("  device memory heap          %s\n", bytes_string(d.device_heap_bytes).c_str());
  std::printf("  max storage buffer range    %s\n", bytes_string(d.max_storage_buffer_range).c_str());
  std::printf("  max memory allocation       %s\n", bytes_string(d.max_memory_allocation_size).c_str());
  std::printf("  storage buffers / dispatch  %u\n", d.max_per_stage_storage_buffers);
  std::printf("  shared memory / workgroup   %u bytes\n", d.max_compute_shared_memory_size);
  std::printf("  workgroup invocations       %u (size %u x %u x %u)\n", d.max_compute_work_group_invocations,
              d.max_compute_work_group_size[0], d.max_compute_work_group_size[1], d.max_compute_work_group_size[2]);
  std::printf("  workgroup count             %u x %u x %u\n", d.max_compute_work_group_count[0],
              d.max_compute_work_group_count[1], d.max_compute_work_group_count[2]);
  std::printf("  subgroup size               %u\n", d.subgroup_size);
  std::printf("  push constants              %u bytes\n", d.max_push_constants_size);
  std::printf("  keeps NaN/Inf/-0, denormals %s, %s\n", d.can_preserve_nan_inf_signed_zero ? "yes" : "no",
              d.can_preserve_denormals ? "yes" : "no");
  std::printf("  timestamps                  %s\n", d.timestamps_supported ? "yes" : "no");
  std::printf("  usable by tensorgrad        %s\n", d.usable ? "yes" : ("no: " + d.unusable_reason).c_str());
}

int devices() {
  std::vector<vk::DeviceInfo> found;
  try {
    found = vk::list_devices();
  } catch (const Error& e) {
    std::printf("no Vulkan devices: the Vulkan loader failed: %s\n", e.what());
    return kBackendUnavailable;
  }
  if (found.empty()) {
    std::printf(
        "no Vulkan devices: the Vulkan loader found no driver (install one, e.g. Mesa's lavapipe: "
        "mesa-vulkan-drivers); the interp_f32 and interp_f64 backends still work\n");
    return kBackendUnavailable;
  }
  bool any_usable = false;
  for (const vk::DeviceInfo& d : found) {
    print_device(d);
    any_usable = any_usable || d.usable;
  }
  if (!any_usable) std::printf("no usable Vulkan device: none has what tensorgrad needs (see above)\n");
  return any_usable ? kOk : kBackendUnavailable;
}

}  // namespace

Command add_dot_command(CLI::App& tool) {
  auto graph = std::make_shared<std::string>();
  CLI::App* app = tool.add_subcommand("dot", "Print a graph file as Graphviz DOT (tg dot g.graph | dot -Tsvg > g.svg)");
  app->add_option("GRAPH", *graph, "graph text file")->required();
  return {app, [graph] {
            std::cout << to_dot(load_graph(*graph));
            return static_cast<int>(kOk);
          }};
}

Command add_devices_command(CLI::App& tool) {
  CLI::App* app = tool.add_subcommand(
      "devices", "List the Vulkan devices with the limits that matter (exit 4 when none is usable)");
  return {app, [] { return devices(); }};
}

}  // namespace tg::cli
