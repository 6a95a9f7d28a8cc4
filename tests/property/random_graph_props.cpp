// Properties of random graphs built from the whole registry: dims 1-8 and up to 12 steps, and (the
// *AtBoundarySizes properties) dims from the kernels' boundary sets, up to 6 steps, under the
// element bounds of boundary_options(). A failure prints the shrunk graph in the text format with
// its input values.
#include <algorithm>
#include <fstream>
#include <iostream>
#include <optional>
#include <set>
#include <string>
#include <utility>

#include "checks.h"
#include "graph_gen.h"
#include "property_support.h"
#include "regression_writer.h"
#include "tensorgrad/ir/ops/ids/attention.h"
#include "tensorgrad/ir/ops/ids/elementwise_unary.h"

namespace tg::testing {
namespace {

constexpr int kMaxSteps = 12;
// Boundary-sized graphs cost up to ~10^5 elements a step; fewer steps keep a case near 10-100 ms.
constexpr int kMaxBoundarySteps = 6;

GraphCase generate(std::span<const OpId> ops, bool boundary, bool f32_only = false) {
  const auto steps = *gen_recipe(ops.size(), boundary ? kMaxBoundarySteps : kMaxSteps);
  GenOptions options = boundary ? boundary_options() : GenOptions{};
  if (f32_only) options.float_dtypes = {DType::f32};
  GraphCase c = build_graph(steps, ops, options);
  RC_PRE(!c.graph.nodes().empty());
  return c;
}

GraphCase generate(bool boundary = false) {
  static const std::vector<OpId> ops = sampled_ops();
  return generate(ops, boundary);
}

// Ops whose outputs move smoothly with their float inputs while autodiff, by design, sends no
// gradient through them: finite differences would see what autodiff is told to ignore. They are
// stop_gradient and attention's helpers (lse and the backward ops, declared not differentiable:
// attention's own gradient, which uses them, is probed through `attention`). Values are f32 only:
// a value rounded to 16 bits is a step function of its inputs, whose difference quotients say
// nothing about the gradient (16-bit gradient graphs are checked against the oracle instead).
GraphCase generate_for_finite_differences(bool boundary = false) {
  static const std::vector<OpId> ops = [] {
    auto all = sampled_ops();
    for (OpId op : {op::StopGradient, op::AttentionLse, op::AttentionGradQ, op::AttentionGradKv}) std::erase(all, op);
    return all;
  }();
  return generate(ops, boundary, /*f32_only=*/true);
}

// The tag of a finite-difference case skipped before it runs: its graphs are over the memory bound
// (checks.h, docs/testing.md "Memory bound"). The distribution RapidCheck prints counts them.
const char* const kOverTheBound = "skipped: over the memory bound";

// AddressSanitizer keeps freed memory in quarantine and ThreadSanitizer adds shadow memory: the
// resident set then says nothing about what a case holds.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kUnderSanitizer = true;
#else
constexpr bool kUnderSanitizer = false;
#endif

// A field of /proc/self/status in bytes ("VmRSS", "VmHWM"), -1 when it cannot be read.
std::int64_t status_bytes(const std::string& field) {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind(field + ":", 0) == 0) return std::stoll(line.substr(field.size() + 1)) * 1024;  // in kB
  }
  return -1;
}

// Starts a fresh peak-RSS measurement: resets the kernel's high-water mark (Linux 4.0+) and returns
// the resident set now, or -1 where the mark cannot be reset (the check is then not made).
std::int64_t start_peak_rss() {
  std::ofstream clear("/proc/self/clear_refs");
  clear << "5";
  clear.flush();
  if (!clear) return -1;
  const std::int64_t now = status_bytes("VmRSS");
  return status_bytes("VmHWM") <= now + (std::int64_t{1} << 20) ? now : -1;
}

// The largest value of a graph, for the distribution RapidCheck prints: how large the boundary
// properties' graphs got.
std::string size_tag(const GraphCase& c) {
  const std::int64_t largest = largest_value(c.graph);
  return largest <= 512 ? "largest value <= 512" : largest <= 8192 ? "largest value <= 8192" : "largest value > 8192";
}

void fail_with(const std::optional<std::string>& problem, const GraphCase& c) {
  if (problem) {
    maybe_write_regression(c);  // when TG_WRITE_REGRESSIONS is set
    RC_FAIL(*problem + "\nshrunk graph:" + describe(c));
  }
}

TG_PROPERTY(RandomGraph, VerifierAcceptsEveryGeneratedGraph, 4800, ()) {
  const GraphCase c = generate();
  RC_TAG(c.graph.nodes().size());  // the printed distribution shows how big the graphs were
  try {
    verify(c.graph);
  } catch (const Error& e) {
    RC_FAIL(std::string(e.what()) + describe(c));
  }
}

TG_PROPERTY(RandomGraph, ShapeRuleMatchesKernelOutput, 4800, ()) {
  const GraphCase c = generate();
  fail_with(check_coverage(c), c);
}

TG_PROPERTY(RandomGraph, PrintParseRoundTrip, 4800, ()) {
  const GraphCase c = generate();
  fail_with(check_round_trip(c), c);
}

TG_PROPERTY(RandomGraph, FloatInterpreterMatchesDoubleOracle, 4800, ()) {
  const GraphCase c = generate();
  fail_with(check_f32_matches_f64(c), c);
}

TG_PROPERTY(RandomGraph, SameBitsWithOneThreadAndAllThreads, 1920, ()) {
  const GraphCase c = generate();
  fail_with(check_same_bits_any_thread_count(c), c);
}

TG_PROPERTY(RandomGraph, AutodiffMatchesFiniteDifferences, 4800, (std::uint64_t seed)) {
  const GraphCase c = generate_for_finite_differences();
  if (!within_memory_bound(directional_gradient_cost(c, seed))) {
    RC_TAG(kOverTheBound);
    return;
  }
  fail_with(check_directional_gradient(c, seed), c);
}

TG_PROPERTY(RandomGraph, ShapeRuleMatchesKernelOutputAtBoundarySizes, 1000, ()) {
  const GraphCase c = generate(true);
  RC_TAG(size_tag(c));
  fail_with(check_coverage(c), c);
}

TG_PROPERTY(RandomGraph, FloatInterpreterMatchesDoubleOracleAtBoundarySizes, 1500, ()) {
  const GraphCase c = generate(true);
  RC_TAG(size_tag(c));
  fail_with(check_f32_matches_f64(c), c);
}

TG_PROPERTY(RandomGraph, SameBitsWithOneThreadAndAllThreadsAtBoundarySizes, 600, ()) {
  const GraphCase c = generate(true);
  fail_with(check_same_bits_any_thread_count(c), c);
}

TG_PROPERTY(RandomGraph, AutodiffMatchesFiniteDifferencesAtBoundarySizes, 1500, (std::uint64_t seed)) {
  const GraphCase c = generate_for_finite_differences(true);
  RC_TAG(size_tag(c));
  if (!within_memory_bound(directional_gradient_cost(c, seed))) {
    RC_TAG(kOverTheBound);
    return;
  }
  fail_with(check_directional_gradient(c, seed), c);
}

// Guards the memory bound (docs/testing.md, "Memory bound"): boundary-sized finite-difference cases
// are drawn and differentiated, not run, and their costs collected. At most 2% may be over the
// bound, or the property above would quietly check fewer graphs than its count says. The largest
// case within the bound is then run: it must pass, and the process's peak RSS must grow by less
// than the case's cost (the cost is an upper bound of what a case holds).
TEST(RandomGraph, BoundaryGradientCasesStayWithinTheMemoryBound) {
  int drawn = 0, over = 0;
  GraphCost largest_drawn, largest_cost;
  std::optional<std::pair<GraphCase, std::uint64_t>> largest;
  check_property(
      [&](std::uint64_t seed) {
        const GraphCase c = generate_for_finite_differences(true);
        const GraphCost cost = directional_gradient_cost(c, seed);
        ++drawn;
        largest_drawn.value_bytes = std::max(largest_drawn.value_bytes, cost.value_bytes);
        largest_drawn.work = std::max(largest_drawn.work, cost.work);
        if (!within_memory_bound(cost)) {
          ++over;
          return;
        }
        if (!largest || cost.value_bytes > largest_cost.value_bytes) {
          largest_cost = cost;
          largest.emplace(c, seed);
        }
      },
      1500);
  std::cout << over << " of " << drawn << " cases over the bound (largest drawn: " << largest_drawn.value_bytes
            << " bytes, work " << largest_drawn.work << "); largest within it: " << largest_cost.value_bytes
            << " bytes, work " << largest_cost.work << "\n";
  EXPECT_LE(over * 50, drawn) << over << " of " << drawn << " boundary gradient cases are over the memory bound";
  ASSERT_TRUE(largest.has_value());
  const std::int64_t before = start_peak_rss();
  const auto problem = check_directional_gradient(largest->first, largest->second);
  const std::int64_t peak = status_bytes("VmHWM");
  EXPECT_FALSE(problem.has_value()) << *problem << describe(largest->first);
  if (before < 0 || kUnderSanitizer) {
    std::cout << "the largest case ran; its peak RSS was not measured (the high-water mark cannot be reset, "
                 "or a sanitizer's quarantine and shadow memory would count)\n";
    return;
  }
  std::cout << "the largest case ran: resident set " << before << " bytes before, peak " << peak << " bytes\n";
  // A quarter over the price for the allocator's and the kernels' own buffers; a cost model that
  // misses the derived graphs, or counts elements instead of bytes, is far past it.
  EXPECT_LT(peak - before, largest_cost.value_bytes + largest_cost.value_bytes / 4)
      << "the case took more than its price";
}

TG_PROPERTY(RandomGraph, AutodiffGraphVerifiesAndRoundTrips, 1920, ()) {
  const GraphCase c = generate();
  GraphBuilder b("with_loss");
  b.mutable_graph() = c.graph;
  bool any = false;
  {
    TracingScope scope(b);
    std::optional<Tensor> loss;
    for (const auto& out : c.graph.outputs()) {
      // 16-bit outputs too, through a cast: their gradient rules then run in their own dtype.
      if (!is_float(c.graph.type(out.value).dtype)) continue;
      const Tensor term = sum(cast(b.wrap(out.value), DType::f32));
      loss = loss ? *loss + term : term;
    }
    if (loss) {
      b.output("loss", *loss);
      any = true;
    }
  }
  RC_PRE(any);
  std::vector<std::string> wrt;
  for (const auto& in : c.graph.inputs())
    if (is_float(c.graph.type(in.value).dtype)) wrt.push_back(in.name);
  RC_PRE(!wrt.empty());
  GraphCase grads{differentiate(b.take(), {.loss = "loss", .wrt = wrt}), c.inputs, c.frozen};
  for (const auto& in : c.graph.inputs()) {
    const DType dtype = c.graph.type(in.value).dtype;
    if (!is_float(dtype)) continue;
    const auto grad = grads.graph.find_output("grad." + in.name);
    if (!grad) RC_FAIL("no grad." + in.name + " output" + describe(grads));
    if (grads.graph.type(*grad).dtype != dtype) {
      RC_FAIL("grad." + in.name + " is " + grads.graph.type(*grad).to_string() + " for a " +
              std::string(dtype_name(dtype)) + " input" + describe(grads));
    }
  }
  try {
    verify(grads.graph);
  } catch (const Error& e) {
    RC_FAIL(std::string(e.what()) + describe(grads));
  }
  fail_with(check_round_trip(grads), grads);
}

// Guards the generator itself: a recipe distribution that never reaches part of the registry would
// let every property above pass without testing those ops.
TEST(RandomGraph, GeneratorReachesEveryOp) {
  std::set<OpId> seen;
  check_property(
      [&seen] {
        const GraphCase c = generate();
        for (const Node& node : c.graph.nodes()) seen.insert(node.op);
      },
      600);
  for (OpId op : sampled_ops()) EXPECT_TRUE(seen.contains(op)) << op_name(op) << " never appeared in a random graph";
}

}  // namespace
}  // namespace tg::testing
