#pragma once
// The bodies of the libFuzzer targets, as plain functions: fuzz/*_fuzzer.cpp call them from
// LLVMFuzzerTestOneInput (clang build, fuzz/CMakeLists.txt), and tests/unit/fuzz_regressions_test.cpp
// replays the seed corpora and the recorded crashes through the same code in the g++ build.
//
// Each function feeds the bytes to one part of the library and checks what comes back. Rejecting the
// input with a tg::Error is fine; the library throwing anything else, crashing, or breaking one of
// the target's checks is a bug: the check throws FuzzBug, which is not a tg::Error, so it escapes to
// libFuzzer (an uncaught exception aborts, and libFuzzer saves the input) or to GoogleTest (a failed
// test naming the check).
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

namespace tg::fuzz {

// A broken invariant found by a fuzz target (never thrown by the library itself).
class FuzzBug : public std::logic_error {
 public:
  explicit FuzzBug(const std::string& what) : std::logic_error("fuzz target check failed: " + what) {}
};

// Graph text: parse_graph on the bytes; a graph it accepts must pass verify(), print, and parse back
// equal to itself (and print the same text again); to_dot must not fail on it.
int fuzz_parse_graph(const std::uint8_t* data, std::size_t size);

// Safetensors: decode_safetensors on the bytes; a file it accepts must hold tensors whose value
// counts match their shapes, and must encode and decode back to the same tensors (f32 values
// rounded to float, as the writer does).
int fuzz_safetensors(const std::uint8_t* data, std::size_t size);

// Graph building: the bytes choose graph inputs (dtypes, shapes with edge-case dims), then a sequence
// of ops (any registry op through GraphBuilder::emit with attributes drawn for its schema, or a
// front-end composite) and their operands. A refused step must leave the builder usable; the graph
// built must verify and survive print -> parse. When small (under 4096 elements in all), it is also
// differentiated (when it has a float output and float inputs) and run on the f64 interpreter with
// values from the bytes.
int fuzz_build_graph(const std::uint8_t* data, std::size_t size);

}  // namespace tg::fuzz
