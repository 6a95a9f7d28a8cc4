// Autodiff graphs on Vulkan: a random graph from the registry's sample generators gets the loss
// sum_k sum(out_k * proj_k) over its f32 outputs (proj_k random in [-1, 1], as the property suite's
// gradient checks build it), tg::differentiate turns it into one graph computing the outputs, the
// loss and the gradient of every f32 input, and tg::vk::Program must run that graph to within
// graph_tolerance of the f64 oracle running the same graph. The op pool is every op that has a
// sample, a Vulkan kernel, and a gradient graph whose every op has a kernel too; what is left out,
// and why, is printed (not asserted: kernels are still landing).
#include <rapidcheck.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <iostream>
#include <set>
#include <sstream>

#include "property/graph_gen.h"
#include "property/property_support.h"
#include "support/tolerance.h"
#include "tensorgrad/vk/executor.h"
#include "vk_test_support.h"

namespace tg::vk {
namespace {

using testing::VkTest;
using tg::testing::GraphCase;

// Gradient graphs are about three times their forward graph; 6 steps keep a case near 20-40
// dispatches, so the property stays within a few seconds on lavapipe.
constexpr int kMaxSteps = 6;
// Samples per op differentiated when choosing the pool: gradient rules branch on attributes and
// broadcasting (sum_to_shape), so one sample could miss an op the gradient needs.
constexpr std::uint64_t kPoolSamples = 8;

std::string fmt(double v) {
  std::ostringstream s;
  s.precision(17);
  s << v;
  return s.str();
}

// `c` with the projected loss appended and differentiated against every f32 input of `c`; the
// inputs gain the proj.k values. nullopt when `c` has no f32 output or no f32 input.
std::optional<GraphCase> gradient_case(const GraphCase& c, std::uint64_t seed) {
  SampleRng rng(seed);
  GraphBuilder b(c.graph.name());
  b.mutable_graph() = c.graph;
  TensorMap inputs = c.inputs;
  {
    TracingScope scope(b);
    std::optional<Tensor> loss;
    int k = 0;
    for (const auto& output : c.graph.outputs()) {
      const TensorType& type = c.graph.type(output.value);
      if (type.dtype != DType::f32) continue;
      const std::string name = "proj." + std::to_string(k++);
      const Tensor w = b.input(name, type);
      std::vector<double> values(static_cast<std::size_t>(type.size()));
      for (double& v : values) v = static_cast<float>(rng.uniform(-1, 1));
      inputs.emplace(name, HostTensor::of(type, std::move(values)));
      const Tensor term = sum(b.wrap(output.value) * w);
      loss = loss ? *loss + term : term;
    }
    if (!loss) return std::nullopt;
    b.output("loss", *loss);
  }
  std::vector<std::string> wrt;
  for (const auto& in : c.graph.inputs())
    if (c.graph.type(in.value).dtype == DType::f32) wrt.push_back(in.name);
  if (wrt.empty()) return std::nullopt;
  return GraphCase{differentiate(b.take(), {.loss = "loss", .wrt = wrt}), std::move(inputs), c.frozen};
}

std::set<OpId> ops_without_kernel(const Graph& g) {
  std::set<OpId> missing;
  for (const Node& node : g.nodes())
    if (!has_kernel(node.op)) missing.insert(node.op);
  return missing;
}

std::string op_list(const std::set<OpId>& ops) {
  std::string text;
  for (OpId op : ops) text += (text.empty() ? "" : ", ") + std::string(op_name(op));
  return text;
}

// The pool, printing each registry op left out and why.
std::vector<OpId> autodiff_ops() {
  std::vector<OpId> ops;
  std::string left_out;
  for (OpId op : all_ops()) {
    const OpDef& def = op_def(op);
    std::string why;
    if (!def.samples) {
      why = "no sample generator";
    } else if (!has_kernel(op)) {
      why = "no Vulkan kernel";
    } else {
      std::set<OpId> missing;
      for (std::uint64_t seed = 1; seed <= kPoolSamples; ++seed) {
        SampleRng rng(seed);
        const std::optional<OpSample> sample = def.samples(rng, std::nullopt);
        if (!sample) continue;
        if (const auto grads = gradient_case(tg::testing::build_single_op(op, *sample, rng), seed)) {
          missing.merge(ops_without_kernel(grads->graph));
        }
      }
      if (!missing.empty()) why = "its gradient graph needs " + op_list(missing) + " (no Vulkan kernel)";
    }
    if (why.empty()) {
      ops.push_back(op);
    } else {
      left_out += "  " + std::string(op_name(op)) + ": " + why + "\n";
    }
  }
  std::cout << "autodiff pool: " << ops.size() << " ops; left out:\n" << (left_out.empty() ? "  none\n" : left_out);
  return ops;
}

// nullopt when every output of `got` is within `tol` of the oracle's (exactly equal for i32/bool).
std::optional<std::string> compare_with_oracle(const TensorMap& expected, const TensorMap& got, double tol) {
  for (const auto& [name, want] : expected) {
    const HostTensor& g = got.at(name);
    if (g.type != want.type) return "output " + name + " has type " + g.type.to_string();
    for (std::size_t i = 0; i < want.values.size(); ++i) {
      const double d = want.values[i], f = g.values[i];
      const bool ok = is_float(want.type.dtype) ? std::fabs(f - d) <= tol : f == d;
      if (!ok) {
        return "output " + name + "[" + std::to_string(i) + "]: Vulkan gives " + fmt(f) + ", the f64 oracle " + fmt(d) +
               " (allowed error " + fmt(tol) + ")";
      }
    }
  }
  return std::nullopt;
}

// Compares f32 elements by their float bits (NaN equals itself), i32/bool by value.
bool same_bits(const TensorMap& a, const TensorMap& b) {
  for (const auto& [name, x] : a) {
    const HostTensor& y = b.at(name);
    for (std::size_t i = 0; i < x.values.size(); ++i) {
      const bool same = x.type.dtype == DType::f32 ? std::bit_cast<std::uint32_t>(static_cast<float>(x.values[i])) ==
                                                         std::bit_cast<std::uint32_t>(static_cast<float>(y.values[i]))
                                                   : x.values[i] == y.values[i];
      if (!same) return false;
    }
  }
  return true;
}

TEST_F(VkTest, RandomAutodiffGraphsMatchTheF64Oracle) {
  auto ctx = make_context();
  static const std::vector<OpId> ops = autodiff_ops();
  // Every registry op has a sample, a Vulkan kernel and gradient ops with kernels: a pool that
  // leaves one out (printed above with the reason) fails rather than shrinking what is tested.
  ASSERT_EQ(ops.size(), all_ops().size()) << "the autodiff pool leaves registry ops out (listed above)";
  tg::testing::check_property(
      [&] {
        const auto steps = *tg::testing::gen_recipe(ops.size(), kMaxSteps);
        const GraphCase forward = tg::testing::build_graph(steps, ops);
        RC_PRE(!forward.graph.nodes().empty());
        const std::optional<GraphCase> c = gradient_case(forward, *rc::gen::arbitrary<std::uint64_t>());
        RC_PRE(c.has_value());
        if (const std::set<OpId> missing = ops_without_kernel(c->graph); !missing.empty()) {
          RC_FAIL("the gradient graph needs " + op_list(missing) + ", which has no Vulkan kernel" +
                  tg::testing::describe(*c));
        }
        const InterpResult oracle =
            interpret(c->graph, c->inputs, {.compute = ComputeType::f64, .keep_all_values = true});
        const bool guarded = *rc::gen::arbitrary<bool>();  // half with guards, half with memory reuse
        Program program(ctx, c->graph, {.guard_bytes = guarded ? 64u : 0u});
        const TensorMap got = program.run(c->inputs);
        const std::vector<std::string> guards = program.check_guards();
        if (!guards.empty())
          RC_FAIL("guard regions overwritten:\n" + testing::join_lines(guards) + tg::testing::describe(*c));
        double scale = 1.0;
        for (const HostTensor& t : oracle.values)
          for (double v : t.values) scale = std::max(scale, std::fabs(v));
        const double tol = tg::testing::graph_tolerance(c->graph) * scale;
        if (auto why = compare_with_oracle(oracle.outputs, got, tol))
          RC_FAIL(*why + "\ngradient graph:" + tg::testing::describe(*c));
        if (!same_bits(got, program.run(c->inputs)))
          RC_FAIL("a second run gave other bits" + tg::testing::describe(*c));
        const auto messages = ctx->validation_messages();
        if (!messages.empty()) RC_FAIL("validation messages:\n" + testing::join_lines(messages));
      },
      // One Program compile per case dominates (see vk_property_test.cpp); TG_PROPERTY_SCALE raises
      // the count for soak runs.
      100);
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

}  // namespace
}  // namespace tg::vk
