// Keeps LeakSanitizer (make asan) quiet about leaks inside the Khronos validation layer itself, so
// the vk tests can run under ASan with validation on and still catch leaks of our own.
//
// The layer (1.3.239 on Debian 12) leaks a few KB per queue submission. The loader unloads it when
// the instance is destroyed, after which LSan cannot name the module the leak came from and no
// suppression can match it; loading it once more with RTLD_NODELETE keeps it mapped and named.
#include <dlfcn.h>

#include <cstdlib>
#include <cstring>

namespace {

const bool k_layer_pinned = [] {
  const char* validation = std::getenv("TG_VK_VALIDATION");
  if (validation && std::strcmp(validation, "1") == 0) {
    // RTLD_LOCAL: the layer's exported vk* symbols must not shadow the loader's.
    (void)dlopen("libVkLayer_khronos_validation.so", RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  }
  return true;
}();

}  // namespace

// LSan reads this hook at exit: the default suppressions of this executable.
extern "C" const char* __lsan_default_suppressions() { return "leak:libVkLayer_khronos_validation.so\n"; }
