#pragma once
// Shared by the vk op tests: random inputs, and the check of a graph on the Vulkan executor against
// the f64 interpreter (the oracle): every output within its bound, a replay that must repeat the
// bits, and a run with guard regions that must find no write outside a value.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "support/library.h"
#include "support/tolerance.h"
#include "tensorgrad/vk/executor.h"
#include "vk_test_support.h"

namespace tg::vk::testing {

// Uniform f32 values in [lo, hi), the same sequence for the same seed.
inline HostTensor random_f32(Shape shape, std::uint32_t seed, float lo = -2.f, float hi = 2.f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(static_cast<std::size_t>(num_elements(shape)));
  for (float& x : v) x = dist(rng);
  return HostTensor::f32(std::move(shape), v);
}

// Valid i32 indices in [0, extent).
inline HostTensor random_indices(Shape shape, std::int64_t extent, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<std::int32_t> dist(0, static_cast<std::int32_t>(extent - 1));
  std::vector<std::int32_t> v(static_cast<std::size_t>(num_elements(shape)));
  for (std::int32_t& x : v) x = dist(rng);
  return HostTensor::i32(std::move(shape), v);
}

// Small integers in [-3, 3] as f32: sums of up to 2^20 of them are exact in f32, in any order, so
// results built from such sums compare exactly.
inline HostTensor small_integers_f32(Shape shape, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> dist(-3, 3);
  std::vector<float> v(static_cast<std::size_t>(num_elements(shape)));
  for (float& x : v) x = static_cast<float>(dist(rng));
  return HostTensor::f32(std::move(shape), v);
}

// The bound the property suites allow an f32 run of g: graph_tolerance relative to max(1, the
// largest finite |value| of the f64 run, `oracle` with keep_all_values).
inline double f32_tolerance(const Graph& g, const InterpResult& oracle) {
  double scale = 1.0;
  for (const HostTensor& t : oracle.values)
    for (double v : t.to_f64())
      if (std::isfinite(v)) scale = std::max(scale, std::fabs(v));
  return tg::testing::graph_tolerance(g) * scale;
}

inline double f32_tolerance(const Graph& g, const TensorMap& in) {
  return f32_tolerance(g, interpret(g, in, {.compute = ComputeType::f64, .keep_all_values = true}));
}

struct OracleCheck {
  // Absolute bound per output name; outputs not named get `otherwise`.
  std::map<std::string, double> tolerance;
  // 0: exact (NaN matching NaN); nullopt: each output's cone bound (tg::output_tolerances of the
  // f64 oracle's run), no looser than f32_tolerance(g, oracle) and tighter for an output that does
  // not read the graph's largest values.
  std::optional<double> otherwise = 0.0;
  // Exact matches must also agree in the sign of zero (for ops that route signed zeros).
  bool signed_zeros = false;
  // A second run of the same Program must repeat the bits.
  bool replay = true;
  // A Program with guard regions must match too and leave its guards intact.
  bool guards = true;
};

// Runs g on Vulkan and on the f64 oracle and compares every output as `options` says.
inline void check_against_oracle(const std::shared_ptr<Context>& ctx, const Graph& g, const TensorMap& in,
                                 const OracleCheck& options = {}) {
  // All values are kept only when the default bound needs their scale.
  const bool need_scale = !options.otherwise.has_value();
  const InterpResult oracle = interpret(g, in, {.compute = ComputeType::f64, .keep_all_values = need_scale});
  std::map<std::string, double> cone_bound;
  if (need_scale) {
    const std::vector<OutputTolerance> bounds = tg::testing::output_tolerances(g, oracle.values);
    for (std::size_t k = 0; k < g.outputs().size(); ++k) cone_bound[g.outputs()[k].name] = bounds[k].absolute();
  }
  const auto expect_matches = [&](const TensorMap& got) {
    for (const auto& [name, want] : oracle.outputs) {
      const HostTensor& out = got.at(name);
      ASSERT_EQ(out.type, want.type) << name;
      const auto bound = options.tolerance.find(name);
      const double tol =
          bound != options.tolerance.end() ? bound->second : (need_scale ? cone_bound.at(name) : *options.otherwise);
      std::size_t bad = 0;
      for (std::size_t i = 0; i < want.size(); ++i) {
        const double w = want.at(i), v = out.at(i);
        const bool equal = v == w && (!options.signed_zeros || std::signbit(v) == std::signbit(w));
        // With a bound of 0 only `equal` passes, so the sign-of-zero check is not bypassed.
        const bool ok = (std::isnan(w) && std::isnan(v)) || equal || (tol > 0 && std::fabs(v - w) <= tol);
        if (!ok && ++bad <= 5) {
          ADD_FAILURE() << name << "[" << i << "]: Vulkan " << v << ", f64 oracle " << w << " (allowed " << tol << ")";
        }
      }
      EXPECT_EQ(bad, 0u) << name << ": elements off";
    }
  };
  Program program(ctx, g);
  const TensorMap first = program.run(in);
  expect_matches(first);
  if (options.replay) {
    const TensorMap again = program.run(in);
    for (const auto& [name, t] : first) {
      EXPECT_TRUE(same_bits(t.to_f64(), again.at(name).to_f64())) << name << " not bitwise replayable";
    }
  }
  if (options.guards) {
    Program guarded(ctx, g, {.guard_bytes = 64});
    expect_matches(guarded.run(in));
    EXPECT_TRUE(guarded.check_guards().empty()) << join_lines(guarded.check_guards());
  }
}

}  // namespace tg::vk::testing
