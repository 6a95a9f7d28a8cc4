// libFuzzer target: the body is tg::fuzz::fuzz_build_graph (fuzz_entry.h), which
// tests/unit/fuzz_regressions_test.cpp also replays in the g++ build.
#include <tbb/global_control.h>

#include <cstddef>
#include <cstdint>

#include "fuzz_entry.h"

// One interpreter thread: an execution is a few small kernels, where TBB's hand-offs would cost more
// than they save, and one thread keeps a run (and a crash) reproducible.
extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  static tbb::global_control one_thread(tbb::global_control::max_allowed_parallelism, 1);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return tg::fuzz::fuzz_build_graph(data, size);
}
