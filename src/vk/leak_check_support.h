#pragma once
// LeakSanitizer support for the Vulkan drivers (docs/testing.md, "Sanitizers").

namespace tg::vk::detail {

// In AddressSanitizer builds: marks every Vulkan driver and layer the loader has loaded
// (libvulkan_*.so, libVkLayer_*.so) as never to be unloaded. Elsewhere: nothing.
//
// Why: Mesa's lavapipe keeps some allocations only in its own globals. When the last instance is
// destroyed the loader unloads the driver, those globals are unmapped, and LeakSanitizer then
// reports the allocations as leaks from "<unknown module>", which no suppression can name. Kept
// loaded, the globals still point at them and nothing is reported; an object we forget to destroy
// is still unreachable, so our own leaks are still reported. Call it after vkCreateInstance.
void keep_vulkan_modules_loaded_for_leak_checks();

}  // namespace tg::vk::detail
