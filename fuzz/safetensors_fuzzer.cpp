// libFuzzer target: the body is tg::fuzz::fuzz_safetensors (fuzz_entry.h), which
// tests/unit/fuzz_regressions_test.cpp also replays in the g++ build.
#include <cstddef>
#include <cstdint>

#include "fuzz_entry.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return tg::fuzz::fuzz_safetensors(data, size);
}
