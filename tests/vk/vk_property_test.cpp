// Random graphs from the registry's sample generators, restricted to the ops that have a Vulkan
// kernel, run by tg::vk::Program and compared with the f64 oracle under graph_tolerance (the same
// bound the f32 interpreter meets). Forward only (vk_autodiff_property_test.cpp runs gradient
// graphs). Every case also checks determinism: the same Program run twice, and a second Program
// compiled from the same graph, give the same bits. One context serves every case; each case
// compiles its own Programs.
#include <rapidcheck.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <iostream>
#include <sstream>

#include "property/graph_gen.h"
#include "property/property_support.h"
#include "support/tolerance.h"
#include "tensorgrad/vk/executor.h"
#include "vk_test_support.h"

namespace tg::vk {
namespace {

using testing::VkTest;

// The ops random graphs draw from, and (printed) the registry ops left out and why; the property
// fails when any is left out.
std::vector<OpId> vulkan_ops() {
  std::vector<OpId> ops;
  std::string left_out;
  for (OpId op : all_ops()) {
    const char* why = nullptr;
    if (!op_def(op).samples) {
      why = "no sample generator";
    } else if (!has_kernel(op)) {
      why = "no Vulkan kernel";
    }
    if (why) {
      left_out += "  " + std::string(op_name(op)) + ": " + why + "\n";
    } else {
      ops.push_back(op);
    }
  }
  std::cout << "forward pool: " << ops.size() << " ops; left out:\n" << (left_out.empty() ? "  none\n" : left_out);
  return ops;
}

std::string fmt(double v) {
  std::ostringstream s;
  s.precision(17);
  s << v;
  return s.str();
}

// f32 elements by their float bit pattern (a NaN equals itself, -0 differs from +0); i32 and bool
// elements by value. HostTensor carries every element as a double converted from the device's word.
std::uint64_t element_bits(DType dtype, double v) {
  if (dtype == DType::f32) return std::bit_cast<std::uint32_t>(static_cast<float>(v));
  return static_cast<std::uint64_t>(static_cast<std::int64_t>(v));
}

// nullopt when `a` and `b` hold the same outputs bit for bit; otherwise the first difference.
std::optional<std::string> first_bit_difference(const TensorMap& a, const TensorMap& b) {
  for (const auto& [name, x] : a) {
    const auto it = b.find(name);
    if (it == b.end()) return "output " + name + " is missing from one run";
    const HostTensor& y = it->second;
    if (x.type != y.type) return "output " + name + " has type " + x.type.to_string() + " vs " + y.type.to_string();
    for (std::size_t i = 0; i < x.values.size(); ++i) {
      if (element_bits(x.type.dtype, x.values[i]) != element_bits(y.type.dtype, y.values[i])) {
        return "output " + name + "[" + std::to_string(i) + "]: " + fmt(x.values[i]) + " vs " + fmt(y.values[i]);
      }
    }
  }
  return std::nullopt;
}

TEST_F(VkTest, RandomGraphsMatchTheF64OracleAndRepeatBitForBit) {
  auto ctx = make_context();
  static const std::vector<OpId> ops = vulkan_ops();
  ASSERT_EQ(ops.size(), all_ops().size()) << "the forward pool leaves registry ops out (listed above)";
  tg::testing::check_property(
      [&] {
        const auto steps = *tg::testing::gen_recipe(ops.size(), 8);
        const tg::testing::GraphCase c = tg::testing::build_graph(steps, ops);
        RC_PRE(!c.graph.nodes().empty());
        const InterpResult oracle =
            interpret(c.graph, c.inputs, {.compute = ComputeType::f64, .keep_all_values = true});
        // Half the cases with guards (no memory reuse), half without (reuse and its barriers).
        const bool guarded = *rc::gen::arbitrary<bool>();
        Program program(ctx, c.graph, {.guard_bytes = guarded ? 64u : 0u});
        const TensorMap got = program.run(c.inputs);
        const std::vector<std::string> guards = program.check_guards();
        if (!guards.empty())
          RC_FAIL("guard regions overwritten:\n" + testing::join_lines(guards) + tg::testing::describe(c));
        double scale = 1.0;
        for (const HostTensor& t : oracle.values)
          for (double v : t.values) scale = std::max(scale, std::fabs(v));
        const double tol = tg::testing::graph_tolerance(c.graph) * scale;
        for (const auto& [name, expected] : oracle.outputs) {
          const HostTensor& g = got.at(name);
          RC_ASSERT(g.type == expected.type);
          for (std::size_t i = 0; i < expected.values.size(); ++i) {
            const double d = expected.values[i], f = g.values[i];
            const bool ok = is_float(expected.type.dtype) ? std::fabs(f - d) <= tol : f == d;
            if (!ok) {
              RC_FAIL("output " + name + "[" + std::to_string(i) + "]: Vulkan gives " + fmt(f) + ", the f64 oracle " +
                      fmt(d) + " (allowed error " + fmt(tol) + ")\n" + tg::testing::describe(c));
            }
          }
        }

        // Determinism: a replay of the recorded command buffer, then a second Program from the same
        // graph with the other guard setting, so its buffer plan (offsets, reuse, barriers) differs.
        // Neither may change a bit: kernels must not depend on scheduling or placement.
        if (auto diff = first_bit_difference(got, program.run(c.inputs))) {
          RC_FAIL("the second run of one Program differs from the first: " + *diff + tg::testing::describe(c));
        }
        Program recompiled(ctx, c.graph, {.guard_bytes = guarded ? 0u : 64u});
        if (auto diff = first_bit_difference(got, recompiled.run(c.inputs))) {
          RC_FAIL("a second Program compiled from the same graph differs: " + *diff + tg::testing::describe(c));
        }
        const std::vector<std::string> recompiled_guards = recompiled.check_guards();
        if (!recompiled_guards.empty())
          RC_FAIL("guard regions overwritten:\n" + testing::join_lines(recompiled_guards));

        const auto messages = ctx->validation_messages();
        if (!messages.empty()) RC_FAIL("validation messages:\n" + testing::join_lines(messages));
      },
      // Compiling a Program dominates a case (lavapipe builds each shader's pipeline with LLVM, ~10-20
      // ms, and every case compiles two), so the count keeps the vk label fast; TG_PROPERTY_SCALE
      // raises it for soak runs.
      120);
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

}  // namespace
}  // namespace tg::vk
