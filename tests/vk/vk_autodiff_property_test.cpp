// Autodiff graphs on Vulkan: a random graph from the registry's sample generators gets the loss
// sum_k sum(out_k * proj_k) over its f32 outputs (proj_k random in [-1, 1], as the property suite's
// gradient checks build it), tg::differentiate turns it into one graph computing the outputs, the
// loss and the gradient of every f32 input, and tg::vk::Program must run that graph to within
// graph_tolerance of the f64 oracle running the same graph, with the same bits on a second run and
// from a second Program (the other guard setting), guards intact and no validation message. The op
// pool is every op that has a sample, a Vulkan kernel, and a gradient graph whose every op has a
// kernel too; what is left out, and why, is printed, and the property fails if anything is.
//
// Gradient graphs are checked in batches, many per Program (vk_property_batch.h; a failing batch
// shrinks to its one failing graph). The context keeps the pipelines, so a compile builds none
// after the first batches, except fused elementwise launches: gradient graphs are full of
// elementwise runs, each with its own specialization constants, and lavapipe compiles each in
// about a second. So a share of batches fuses (one graph each), the rest run unfused.
#include <rapidcheck.h>

#include <algorithm>
#include <exception>
#include <iostream>
#include <optional>
#include <set>
#include <vector>

#include "property/checks.h"
#include "property/graph_gen.h"
#include "property/property_support.h"
#include "property/regression_writer.h"
#include "tensorgrad/vk/executor.h"
#include "vk_property_batch.h"
#include "vk_test_support.h"

namespace tg::vk {
namespace {

using testing::check_batch_or_fail;
using testing::gen_batch;
using testing::gen_member;
using testing::gen_program_options;
using testing::GraphCount;
using testing::MemberDraw;
using testing::one_in;
using testing::VkTest;
using tg::testing::GraphCase;

// Gradient graphs are about three times their forward graph; 6 steps keep a graph near 20-40
// dispatches.
constexpr int kMaxSteps = 6;
// Per CI run (TG_PROPERTY_SCALE multiplies the batches): kBatches cases of kBatch graphs, one in
// kFusedOneIn of them a fused batch of kFusedBatch; one graph in kBoundaryOneIn with boundary
// sizes, one case in kSmallGridOneIn under a 1-3 workgroup cap.
constexpr int kBatches = 100;
constexpr std::size_t kBatch = 12;
constexpr std::size_t kFusedBatch = 1;
constexpr int kFusedOneIn = 3;
constexpr int kBoundaryOneIn = 3;
constexpr int kSmallGridOneIn = 3;
// The gradient of embedding is a one-hot matmul whose [N, V] one-hot grows as the product of the
// index count and the vocabulary: from a boundary-sized forward graph within the generator's
// bounds it can reach 32767 x 3876 (484 MiB, above lavapipe's 128 MiB maxStorageBufferRange, which
// Program refuses by name), and the f64 oracle takes seconds over it. Gradient graphs with a value
// above this many elements are left out (counted), as build_graph leaves out steps above its bounds.
constexpr std::int64_t kMaxGradientValueElements = std::int64_t{1} << 21;

// Samples per op differentiated when choosing the pool: gradient rules branch on attributes and
// broadcasting (sum_to_shape), so one sample could miss an op the gradient needs.
constexpr std::uint64_t kPoolSamples = 8;

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
        if (const auto grads =
                tg::testing::projected_gradient_case(tg::testing::build_single_op(op, *sample, rng), seed)) {
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

TEST_F(VkTest, RandomAutodiffGraphsMatchTheF64Oracle) {
  // Fused pipelines are new in almost every graph and take ~3 MiB each on lavapipe: a smaller
  // bound than the default keeps a soak run's memory flat.
  auto ctx = make_context({.max_cached_pipelines = 256});
  static const std::vector<OpId> ops = autodiff_ops();
  // Every registry op has a sample, a Vulkan kernel and gradient ops with kernels: a pool that
  // leaves one out (printed above with the reason) fails rather than shrinking what is tested.
  ASSERT_EQ(ops.size(), all_ops().size()) << "the autodiff pool leaves registry ops out (listed above)";
  GraphCount count;
  tg::testing::check_property(
      [&] {
        ProgramOptions options = gen_program_options(kSmallGridOneIn);
        options.fuse_elementwise = one_in(kFusedOneIn);
        const auto draws = *gen_batch(options.fuse_elementwise ? kFusedBatch : kBatch,
                                      gen_member(ops.size(), kMaxSteps, kBoundaryOneIn));
        std::vector<GraphCase> members;
        std::size_t boundary = 0, too_large = 0;
        for (const MemberDraw& draw : draws) {
          const GraphCase forward = testing::build_member(draw, ops);
          if (forward.graph.nodes().empty()) continue;  // every step was skipped
          std::optional<GraphCase> c;
          try {
            c = tg::testing::projected_gradient_case(forward, draw.seed);
          } catch (const std::exception& e) {
            // An autodiff bug: the forward graph pins it (the regression runner differentiates it).
            tg::testing::maybe_write_regression(forward);
            RC_FAIL(std::string("differentiating the graph threw: ") + e.what() + tg::testing::describe(forward));
          }
          if (!c) continue;  // no f32 output or no f32 input: nothing to differentiate
          if (const std::set<OpId> missing = ops_without_kernel(c->graph); !missing.empty()) {
            RC_FAIL("the gradient graph needs " + op_list(missing) + ", which has no Vulkan kernel" +
                    tg::testing::describe(*c));
          }
          if (tg::testing::largest_value(c->graph) > kMaxGradientValueElements) {
            ++too_large;
            continue;
          }
          boundary += draw.boundary ? 1 : 0;
          members.push_back(std::move(*c));
        }
        RC_PRE(!members.empty());
        check_batch_or_fail(ctx, members, options);
        count.graphs += members.size();
        ++count.batches;
        count.fused_graphs += options.fuse_elementwise ? members.size() : 0;
        count.boundary_graphs += boundary;
        count.small_grid_graphs += options.max_workgroups > 0 ? members.size() : 0;
        count.left_out += too_large;
      },
      kBatches);
  std::cout << count << "; pipelines: " << ctx->pipeline_stats().created << " compiled, "
            << ctx->pipeline_stats().reused << " reused\n";
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

}  // namespace
}  // namespace tg::vk
