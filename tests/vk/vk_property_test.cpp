// Random graphs from the registry's sample generators, restricted to the ops that have a Vulkan
// kernel, run by tg::vk::Program and compared with the f64 oracle under graph_tolerance (the same
// bound the f32 interpreter meets). Forward only (vk_autodiff_property_test.cpp runs gradient
// graphs). Every graph also checks determinism: the same Program run twice, and a second Program
// compiled from the same graph with the other guard setting, give the same bits; guard regions
// stay intact; the validation layer reports nothing.
//
// Graphs are checked in batches, many per Program (vk_property_batch.h): one compile and one
// submission serve a batch, and a failing batch shrinks to its one failing graph. The context
// keeps the pipelines (Context::pipeline), so after the first batches a compile builds none,
// except fused elementwise launches, whose specialization constants differ per graph and cost
// lavapipe about a second each: a share of batches fuses (smaller ones), the rest run unfused.
#include <rapidcheck.h>

#include <iostream>
#include <vector>

#include "property/graph_gen.h"
#include "property/property_support.h"
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

// Per CI run (TG_PROPERTY_SCALE multiplies the batches): kBatches cases of kBatch graphs, one case in
// kFusedOneIn with elementwise fusion (forward graphs have few fusable runs, so a fused batch costs
// only a few fused compiles). Graphs of up to kMaxSteps steps; one in kBoundaryOneIn with boundary
// sizes, one case in kSmallGridOneIn under a 1-3 workgroup cap, one in kSmallBlocksOneIn under a
// block cap of 256 B to 16 KiB (plans of many blocks: bindings at offsets in several allocations,
// barriers between blocks, staging split under the cap).
constexpr int kBatches = 100;
constexpr std::size_t kBatch = 16;
constexpr int kFusedOneIn = 4;
constexpr int kMaxSteps = 8;
constexpr int kBoundaryOneIn = 3;
constexpr int kSmallGridOneIn = 3;
constexpr int kSmallBlocksOneIn = 3;

TEST_F(VkTest, RandomGraphsMatchTheF64OracleAndRepeatBitForBit) {
  // Fused pipelines are new in almost every graph and take ~3 MiB each on lavapipe: a smaller
  // bound than the default keeps a soak run's memory flat.
  auto ctx = make_context({.max_cached_pipelines = 256});
  static const std::vector<OpId> ops = vulkan_ops();
  ASSERT_EQ(ops.size(), all_ops().size()) << "the forward pool leaves registry ops out (listed above)";
  GraphCount count;
  tg::testing::check_property(
      [&] {
        ProgramOptions options = gen_program_options(kSmallGridOneIn, kSmallBlocksOneIn);
        options.fuse_elementwise = one_in(kFusedOneIn);
        const auto draws = *gen_batch(kBatch, gen_member(ops.size(), kMaxSteps, kBoundaryOneIn));
        std::vector<tg::testing::GraphCase> members;
        std::size_t boundary = 0;
        for (const MemberDraw& draw : draws) {
          tg::testing::GraphCase c = build_member(draw, ops);
          if (c.graph.nodes().empty()) continue;  // every step was skipped
          boundary += draw.boundary ? 1 : 0;
          members.push_back(std::move(c));
        }
        RC_PRE(!members.empty());
        check_batch_or_fail(ctx, members, options);
        if (plan_memory(testing::union_of(members).graph, ctx->info(), options).block_bytes.size() > 1)
          count.multi_block_graphs += members.size();
        count.graphs += members.size();
        ++count.batches;
        count.fused_graphs += options.fuse_elementwise ? members.size() : 0;
        count.boundary_graphs += boundary;
        count.small_grid_graphs += options.max_workgroups > 0 ? members.size() : 0;
      },
      kBatches);
  EXPECT_GT(count.multi_block_graphs, 0u) << "no batch ran a plan of several blocks";
  std::cout << count << "; pipelines: " << ctx->pipeline_stats().created << " compiled, "
            << ctx->pipeline_stats().reused << " reused\n";
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

}  // namespace
}  // namespace tg::vk
