#pragma once
// Shared by the kernel boundary tests (vk_boundary_rows_test.cpp, vk_boundary_test.cpp): one
// Program per graph, with guard regions and timestamps, that must match the oracle, repeat its bits
// on a replay, leave its guards intact, and show from its dispatch labels which launch paths ran,
// so a test on both sides of a threshold knows it crossed it. One build per graph: a Program build
// costs 0.5-4 s on lavapipe, so each test puts all its shapes into one graph.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "support/library.h"
#include "tensorgrad/vk/executor.h"
#include "vk_oracle_check.h"

namespace tg::vk::testing {

// Tests past about 100 MB of values or a few seconds on lavapipe run only with TG_VK_LARGE=1.
inline bool large_tests_enabled() {
  const char* env = std::getenv("TG_VK_LARGE");
  return env && std::string(env) == "1";
}

struct BoundaryCheck {
  // Outputs compared exactly (indices; sums the interpreter's order makes exact); the rest within
  // f32_tolerance of the f64 oracle, or bit for bit against the f32 interpreter when `f32_bits`.
  std::vector<std::string> exact;
  bool f32_bits = false;
};

// Runs g as described above and returns how many dispatches carry each label.
inline std::map<std::string, std::size_t> check_boundaries(const std::shared_ptr<Context>& ctx, const Graph& g,
                                                           const TensorMap& in, const BoundaryCheck& options = {}) {
  const InterpResult want =
      interpret(g, in, {.compute = options.f32_bits ? ComputeType::f32 : ComputeType::f64, .keep_all_values = true});
  const double tol = options.f32_bits ? 0.0 : f32_tolerance(g, want);
  Program program(ctx, g, {.guard_bytes = 64, .timestamps = true});
  const TensorMap got = program.run(in);
  for (const auto& [name, w] : want.outputs) {
    const HostTensor& out = got.at(name);
    EXPECT_EQ(out.type, w.type) << name;
    const bool exact = options.f32_bits || std::count(options.exact.begin(), options.exact.end(), name) > 0;
    std::size_t bad = 0;
    for (std::size_t i = 0; i < w.size(); ++i) {
      const double a = out.at(i), b = w.at(i);
      const bool ok = (std::isnan(a) && std::isnan(b)) || a == b || (!exact && std::fabs(a - b) <= tol);
      if (!ok && ++bad <= 3) ADD_FAILURE() << name << "[" << i << "]: Vulkan " << a << ", oracle " << b;
    }
    EXPECT_EQ(bad, 0u) << name << ": elements off (allowed " << (exact ? 0.0 : tol) << ")";
  }
  std::map<std::string, std::size_t> labels;
  for (const DispatchTiming& t : program.timings()) ++labels[t.op];
  const TensorMap again = program.run(in);
  for (const auto& [name, t] : got) {
    EXPECT_TRUE(same_bits(t.to_f64(), again.at(name).to_f64())) << name << " not bitwise replayable";
  }
  EXPECT_TRUE(program.check_guards().empty()) << join_lines(program.check_guards());
  return labels;
}

}  // namespace tg::vk::testing
