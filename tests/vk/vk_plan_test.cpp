// The buffer plan alone (no device): reuse, alignment, live inputs and outputs, scratch, aliases,
// limits, and the blocks a plan is spread over (first fit across blocks, the cap, the heap).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "support/library.h"
#include "tensorgrad/vk/executor.h"
#include "vk/plan.h"
#include "vk_transformer_step.h"

namespace tg::vk {
namespace {

// Whether two slots share bytes: only ranges of the same block can.
bool overlaps(const ValueSlot& p, const ValueSlot& q) {
  return p.block == q.block && p.offset < q.offset + q.bytes && q.offset < p.offset + p.bytes;
}

// Every pair of values alive at the same time is disjoint, and every slot lies inside its block.
void expect_disjoint_and_inside(const BufferPlan& plan) {
  const auto n = plan.slots.size();
  for (std::size_t a = 0; a < n; ++a) {
    const ValueSlot& p = plan.slots[a];
    if (plan.live_to[a] < 0) continue;  // never placed (no producer, not an input)
    ASSERT_LT(p.block, plan.blocks.size()) << a;
    EXPECT_LE(p.offset + p.bytes + p.guard_bytes, plan.blocks[p.block]) << a;
    for (std::size_t c = a + 1; c < n; ++c) {
      if (plan.live_to[c] < 0) continue;
      const bool both_live = plan.live_from[a] <= plan.live_to[c] && plan.live_from[c] <= plan.live_to[a];
      if (both_live) {
        EXPECT_FALSE(overlaps(p, plan.slots[c])) << a << " " << c;
      }
    }
  }
}

// The plan alone (no device): reuse, alignment, live inputs/outputs, limits.
TEST(VkPlan, ReusesDeadValuesKeepsInputsAndOutputsAndRespectsAlignment) {
  GraphBuilder b("plan");
  TracingScope scope(b);
  Tensor x = b.input("x", {DType::f32, {100}});
  Tensor h = exp(x);
  h = exp(h);
  h = exp(h);
  h = exp(h);
  b.output("y", h);
  const Graph g = b.take();
  const BufferPlan plan = plan_buffers(g, {.alignment = 64});
  for (const ValueSlot& s : plan.slots) {
    EXPECT_EQ(s.offset % 64, 0u);
    EXPECT_EQ(s.bytes, 400u);
  }
  const auto overlap = [&](ValueId a, ValueId c) {
    return overlaps(plan.slots[static_cast<std::size_t>(a)], plan.slots[static_cast<std::size_t>(c)]);
  };
  // Values alive at the same time never overlap.
  for (ValueId a = 0; a < static_cast<ValueId>(plan.slots.size()); ++a)
    for (ValueId c = a + 1; c < static_cast<ValueId>(plan.slots.size()); ++c) {
      const bool both_live = plan.live_from[static_cast<std::size_t>(a)] <= plan.live_to[static_cast<std::size_t>(c)] &&
                             plan.live_from[static_cast<std::size_t>(c)] <= plan.live_to[static_cast<std::size_t>(a)];
      if (both_live) {
        EXPECT_FALSE(overlap(a, c)) << a << " " << c;
      }
    }
  // x (input) stays; at most two of the four exps are live at once, so three slots instead of five.
  EXPECT_EQ(plan.total_bytes, 2 * 448u + 400u);
  EXPECT_EQ(plan.naive_bytes, 5 * 448u);
  const BufferPlan guarded = plan_buffers(g, {.alignment = 64}, {.guard_bytes = 100});
  for (const ValueSlot& s : guarded.slots) {
    EXPECT_EQ(s.guard_offset, s.offset + 400);
    EXPECT_EQ(s.guard_bytes, 100u);
  }
  EXPECT_EQ(guarded.total_bytes, 4 * 512u + 500u);  // no reuse with guards
  EXPECT_EQ(plan.blocks, std::vector<std::uint64_t>{plan.total_bytes});
  EXPECT_THROW(plan_buffers(g, {.max_storage_buffer_range = 399, .device = "tiny"}), LimitError);
  EXPECT_NO_THROW(plan_buffers(g, {.max_storage_buffer_range = 400, .max_memory_allocation_size = 400}));
  for (const PlanLimits& limits :
       {PlanLimits{.max_memory_allocation_size = 399, .device = "tiny"},
        PlanLimits{.alignment = 64, .heap_bytes = 1295, .heap = "heap 7", .device = "tiny"}}) {
    try {
      plan_buffers(g, limits);
      FAIL();
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("tiny"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("'plan'"), std::string::npos) << e.what();
    }
  }
  EXPECT_NO_THROW(plan_buffers(g, {.alignment = 64, .heap_bytes = 1296}));
}

// An alias group takes one range, alive from its first member's start to its last member's end.
TEST(VkPlan, AliasesShareTheirSourcesRangeForTheGroupsLifetime) {
  GraphBuilder b("plan");
  TracingScope scope(b);
  Tensor x = b.input("x", {DType::f32, {100}});
  const Tensor e1 = exp(x);                   // node 0
  const Tensor r = reshape(e1, {10, 10});     // node 1: an alias of e1
  const Tensor e2 = exp(x);                   // node 2
  const Tensor e3 = exp(e2);                  // node 3
  b.output("y", add(reshape(r, {100}), e3));  // node 4 reshapes again, node 5 reads the group
  const Graph g = b.take();
  const ValueId flat = g.nodes()[5].inputs[0];
  const BufferPlan plan = plan_buffers(g, {.alignment = 64}, {.aliases = {{r.id(), e1.id()}, {flat, r.id()}}});
  const auto slot = [&](ValueId v) { return plan.slots[static_cast<std::size_t>(v)]; };
  EXPECT_EQ(slot(r.id()).offset, slot(e1.id()).offset);
  EXPECT_EQ(slot(flat).offset, slot(e1.id()).offset);
  EXPECT_EQ(plan.live_to[static_cast<std::size_t>(e1.id())], 5);
  // e2 and e3 are born while the group is alive: they must not overlap it.
  for (const Tensor& t : {e2, e3}) EXPECT_FALSE(overlaps(slot(e1.id()), slot(t.id())));
}

// Scratch lives only while its node runs; an extra read keeps a value alive until its reader.
TEST(VkPlan, ScratchAndExtraReadsExtendNoLifetimeMoreThanNeeded) {
  GraphBuilder b("plan");
  TracingScope scope(b);
  Tensor x = b.input("x", {DType::f32, {100}});
  const Tensor e1 = exp(x);   // node 0
  const Tensor e2 = exp(e1);  // node 1: 200 bytes of scratch
  const Tensor e3 = exp(e2);  // node 2
  b.output("y", exp(e3));     // node 3: also reads e1 (an extra read)
  const Graph g = b.take();
  const auto slot = [](const BufferPlan& p, const Tensor& t) { return p.slots[static_cast<std::size_t>(t.id())]; };
  const auto overlap = overlaps;
  const BufferPlan plain = plan_buffers(g, {.alignment = 64});
  EXPECT_TRUE(overlap(slot(plain, e1), slot(plain, e3))) << "e3 reuses e1's memory when nothing reads e1 later";

  const BufferPlan plan =
      plan_buffers(g, {.alignment = 64}, {.scratch_bytes = {0, 198, 0, 0}, .extra_reads = {{e1.id(), 3}}});
  ASSERT_EQ(plan.scratch.size(), 4u);
  EXPECT_EQ(plan.scratch[0].bytes, 0u);
  const ValueSlot& scratch = plan.scratch[1];
  EXPECT_EQ(scratch.bytes, 200u);  // rounded up to whole words
  EXPECT_EQ(scratch.offset % 64, 0u);
  EXPECT_FALSE(overlap(scratch, slot(plan, e1))) << "node 1 reads e1";
  EXPECT_FALSE(overlap(scratch, slot(plan, e2))) << "node 1 writes e2";
  EXPECT_FALSE(overlap(scratch, slot(plan, x))) << "inputs live throughout";
  EXPECT_EQ(plan.live_to[static_cast<std::size_t>(e1.id())], 3);
  for (const Tensor& later : {e2, e3}) EXPECT_FALSE(overlap(slot(plan, e1), slot(plan, later)));
  EXPECT_THROW(plan_buffers(g, {.max_storage_buffer_range = 1000, .device = "tiny"}, {.scratch_bytes = {0, 1004}}),
               Error);
}

// Six values alive together under a block cap that holds two: the plan spreads them over blocks,
// first fit (a later value reuses a freed gap in an earlier block), none above the cap.
TEST(VkPlan, ValuesSpreadOverBlocksUnderTheCap) {
  GraphBuilder b("blocks");
  TracingScope scope(b);
  Tensor x = b.input("x", {DType::f32, {100}});
  std::vector<Tensor> parts;
  for (int i = 0; i < 6; ++i) parts.push_back(exp(x * static_cast<float>(i + 1)));
  Tensor sum = parts[0];
  for (int i = 1; i < 6; ++i) sum = sum + parts[static_cast<std::size_t>(i)];
  b.output("y", sum);
  const Graph g = b.take();
  const BufferPlan one = plan_buffers(g, {.alignment = 64});
  ASSERT_EQ(one.blocks.size(), 1u);
  const BufferPlan plan = plan_buffers(g, {.alignment = 64, .block_bytes = 1000});
  EXPECT_EQ(plan.block_cap, 1000u);
  EXPECT_GE(plan.blocks.size(), 4u) << "at least 7 values of 400 bytes live together, two per block";
  std::uint64_t total = 0;
  for (std::uint64_t bytes : plan.blocks) {
    EXPECT_LE(bytes, 1000u);
    EXPECT_EQ(bytes % 4, 0u);
    total += bytes;
  }
  EXPECT_EQ(plan.total_bytes, total);
  EXPECT_LE(plan.total_bytes, plan.naive_bytes);
  expect_disjoint_and_inside(plan);
  for (const ValueSlot& s : plan.slots) EXPECT_EQ(s.offset % 64, 0u);
  // With guards (no reuse) every slot still fits its block, guard included.
  const BufferPlan guarded = plan_buffers(g, {.alignment = 64, .block_bytes = 1000}, {.guard_bytes = 64});
  expect_disjoint_and_inside(guarded);
  for (const ValueSlot& s : guarded.slots) EXPECT_EQ(s.guard_offset, s.offset + s.bytes);
}

// A value larger than the requested cap raises the cap to itself; a cap above one allocation is
// lowered to it; the heap bounds all blocks together, and its error names the graph and the heap.
TEST(VkPlan, TheCapBendsToTheLargestValueAndTheHeapBoundsTheTotal) {
  GraphBuilder b("caps");
  TracingScope scope(b);
  Tensor x = b.input("x", {DType::f32, {1000}});
  Tensor y = b.input("y", {DType::f32, {10}});
  b.output("z", exp(x) + broadcast_to(sum(y), {1000}));
  const Graph g = b.take();
  const BufferPlan raised = plan_buffers(g, {.block_bytes = 100});
  EXPECT_EQ(raised.block_cap, 4000u);
  expect_disjoint_and_inside(raised);
  const BufferPlan lowered = plan_buffers(g, {.max_memory_allocation_size = 5000, .block_bytes = 1 << 20});
  EXPECT_EQ(lowered.block_cap, 5000u);
  for (std::uint64_t bytes : lowered.blocks) EXPECT_LE(bytes, 5000u);
  expect_disjoint_and_inside(lowered);
  try {
    plan_buffers(g, {.max_memory_allocation_size = 5000,
                     .heap_bytes = lowered.total_bytes - 4,
                     .heap = "memory heap 3",
                     .device = "dev"});
    FAIL() << "expected the heap to be too small";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("graph 'caps'"), std::string::npos) << m;
    EXPECT_NE(m.find(std::to_string(lowered.total_bytes) + " bytes"), std::string::npos) << m;
    EXPECT_NE(m.find("memory heap 3"), std::string::npos) << m;
    EXPECT_NE(m.find(std::to_string(lowered.blocks.size()) + " allocation"), std::string::npos) << m;
  }
  EXPECT_NO_THROW(plan_buffers(g, {.max_memory_allocation_size = 5000, .heap_bytes = lowered.total_bytes}));
}

// plan_memory() plans a training step for a device it never touches (here the H200's limits, as
// its driver reports them): W2's plan stays within 25% of the bytes alive at its peak step, the
// least any placement could need, and it is the same plan a Program would make.
TEST(VkPlanMemory, ATrainingStepPlansCloseToItsPeakWithoutADevice) {
  DeviceInfo h200;
  h200.name = "H200-like limits";
  h200.max_storage_buffer_range = 4294967295u;
  h200.max_memory_allocation_size = 4292870144u;
  h200.min_storage_buffer_offset_alignment = 16;
  h200.max_per_stage_storage_buffers = 1048576;
  h200.device_heap_bytes = 150754820096u;
  const auto report = [&](const examples::TransformerConfig& config, std::int64_t batch, const char* name) {
    const Training t = testing::compile_transformer(config, batch);
    const ProgramStats s = plan_memory(t.graph(), h200);
    std::cout << name << " at batch " << batch << ": plan " << s.device_bytes << " bytes in " << s.block_bytes.size()
              << " blocks, peak alive " << s.peak_live_bytes << " ("
              << static_cast<double>(s.device_bytes) / s.peak_live_bytes << "x), one slot per value "
              << s.unshared_bytes << "\n";
    EXPECT_GE(s.device_bytes, s.peak_live_bytes);
    EXPECT_LE(s.device_bytes, s.unshared_bytes);
    return s;
  };
  const ProgramStats w2 = report({}, 32, "W2");
  EXPECT_LE(static_cast<double>(w2.device_bytes), 1.25 * static_cast<double>(w2.peak_live_bytes));
  if (const char* env = std::getenv("TG_PLAN_W6"); env && std::string(env) == "1") {
    report(examples::kW6Config, 8, "W6");
  }
}

}  // namespace
}  // namespace tg::vk
