// See leak_check_support.h. Only AddressSanitizer builds (GCC: __SANITIZE_ADDRESS__, Clang:
// __has_feature(address_sanitizer)) on glibc do anything here.
#include "vk/leak_check_support.h"

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TG_ASAN_BUILD 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define TG_ASAN_BUILD 1
#endif

#if defined(TG_ASAN_BUILD) && defined(__linux__)
#include <dlfcn.h>
#include <link.h>

#include <cstring>
#include <mutex>
#include <string>
#include <vector>
#endif

namespace tg::vk::detail {

#if defined(TG_ASAN_BUILD) && defined(__linux__)

namespace {

// The loader's ICDs are named libvulkan_<driver>.so, layers libVkLayer_<name>.so; the loader
// itself (libvulkan.so.1) is linked, never unloaded.
bool is_driver_or_layer(const char* path) {
  const char* slash = std::strrchr(path, '/');
  const char* base = slash ? slash + 1 : path;
  return std::strncmp(base, "libvulkan_", 10) == 0 || std::strncmp(base, "libVkLayer_", 11) == 0;
}

int collect(dl_phdr_info* info, std::size_t, void* out) {
  if (info->dlpi_name && is_driver_or_layer(info->dlpi_name))
    static_cast<std::vector<std::string>*>(out)->emplace_back(info->dlpi_name);
  return 0;
}

}  // namespace

void keep_vulkan_modules_loaded_for_leak_checks() {
  static std::mutex mutex;
  const std::lock_guard lock(mutex);
  std::vector<std::string> modules;
  dl_iterate_phdr(&collect, &modules);
  // RTLD_NOLOAD: loads nothing, only adds RTLD_NODELETE to a module already loaded. The handle is
  // deliberately never closed.
  for (const std::string& path : modules) (void)dlopen(path.c_str(), RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
}

#else

void keep_vulkan_modules_loaded_for_leak_checks() {}

#endif

}  // namespace tg::vk::detail
