// Random graphs from the registry's sample generators, restricted to the ops that have a Vulkan
// kernel, run by tg::vk::Program and compared with the f64 oracle under graph_tolerance (the same
// bound the f32 interpreter meets). Forward only. One context serves every case; each case
// compiles its own Program (a few dispatches each: lavapipe needs ~50 us per dispatch).
#include <rapidcheck.h>

#include <algorithm>
#include <cmath>
#include <sstream>

#include "property/graph_gen.h"
#include "property/property_support.h"
#include "support/tolerance.h"
#include "tensorgrad/vk/executor.h"
#include "vk_test_support.h"

namespace tg::vk {
namespace {

using testing::VkTest;

std::vector<OpId> vulkan_ops() {
  std::vector<OpId> ops = tg::testing::sampled_ops();
  std::erase_if(ops, [](OpId op) { return !has_kernel(op); });
  return ops;
}

std::string fmt(double v) {
  std::ostringstream s;
  s.precision(17);
  s << v;
  return s.str();
}

TEST_F(VkTest, RandomElementwiseGraphsMatchTheF64Oracle) {
  auto ctx = make_context();
  static const std::vector<OpId> ops = vulkan_ops();
  ASSERT_GE(ops.size(), 26u) << "every elementwise op should have a sample and a Vulkan kernel";
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
        RC_ASSERT_FALSE(!guards.empty());
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
        const auto messages = ctx->validation_messages();
        if (!messages.empty()) RC_FAIL("validation messages:\n" + testing::join_lines(messages));
      },
      300);
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

}  // namespace
}  // namespace tg::vk
