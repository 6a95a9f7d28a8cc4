// Every placement the buffer planner can make, checked alone (no device): random graphs (unions of
// 1-6 random graphs, so plans hold dozens of ranges) are planned by plan_program for a device whose
// limits are drawn (offset alignment 4-256, a binding range exactly the largest value's, an
// allocation size just above the largest range) under a block cap drawn from a fraction of the
// bytes alive at the peak, so most plans spread over many blocks. Each strategy's placement (first
// fit in step order, greedy by size) and the kept one are checked by placement_check.h, which
// recomputes the lifetimes itself: ranges alive together disjoint, everything within the block and
// the device's limits, each strategy's own first-fit rule; the kept plan is the smaller of the two
// and every plan within a stated factor of the bytes alive at the peak (docs/vulkan.md, "Memory").
#include <gtest/gtest.h>
#include <rapidcheck.h>

#include <algorithm>
#include <cstdint>
#include <iomanip>
#include <iostream>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "placement_check.h"
#include "property/graph_gen.h"
#include "property/property_support.h"
#include "tensorgrad/vk/executor.h"
#include "vk/program_plan.h"
#include "vk_property_batch.h"

namespace tg::vk {
namespace {

using testing::one_in;
using testing::placement_errors;

constexpr int kCases = 300;
constexpr int kMaxMembers = 6;
constexpr int kMaxSteps = 10;
// Bytes of a plan over its aligned peak (aligned_sizes below; at 4-byte alignment that is
// peak_live_bytes), after the packing allowance: a range never straddles two blocks, so each block
// but the last may end up to one range short of what it could hold when the next range opens a new
// block, and a plan of n blocks may hold (n - 1) x its largest aligned range more than the peak
// whatever its strategy (with a cap of peak / 2 and ranges of 0.4 x peak, three blocks of 0.4 are
// needed where the peak is 1.0). Without the allowance the kept plan reached 1.2 at caps of one to
// four ranges (2026-11-29, TG_PROPERTY_SCALE=10, six seeds); with it, it stays within 1.1. Against
// the unaligned peak_live_bytes the plans reach 4.2x, all of it padding (4-byte values at 256-byte
// offsets): docs/vulkan.md, "Memory".
constexpr double kMaxKeptOverPeak = 1.1;
constexpr double kMaxStrategyOverPeak = 1.5;

std::vector<OpId> planned_ops() {
  std::vector<OpId> ops;
  for (OpId op : all_ops())
    if (op_def(op).samples && has_kernel(op)) ops.push_back(op);
  return ops;
}

// A plan's ranges with every size rounded up to the offset alignment (guards included):
//   peak     the most bytes alive at one node, what a placement must hold there when each range
//            starts at an aligned offset (equal to peak_live_bytes at 4-byte alignment; but for the
//            last range of a block, whose padding is not allocated, no placement needs less);
//   largest  the largest range, the packing allowance per block after the first.
struct AlignedSizes {
  std::uint64_t peak = 1;
  std::uint64_t largest = 0;
};

AlignedSizes aligned_sizes(const Graph& graph, const PlanLimits& limits, const PlanOptions& options,
                           const BufferPlan& plan) {
  std::vector<testing::CheckedRange> ranges = testing::checked_ranges(graph, options, plan);
  const std::uint64_t alignment = std::max<std::uint64_t>(4, limits.alignment);
  AlignedSizes sizes;
  for (testing::CheckedRange& r : ranges) {
    r.size = (r.size + alignment - 1) / alignment * alignment;
    sizes.largest = std::max(sizes.largest, r.size);
  }
  sizes.peak = std::max<std::uint64_t>(testing::live_peak(ranges), 1);
  return sizes;
}

std::string join(const std::vector<std::string>& lines) {
  std::string out;
  for (const std::string& line : lines) out += "  " + line + "\n";
  return out;
}

// What the property saw, printed at the end: how many blocks the kept plans had, and how each
// strategy's bytes compare with the peak.
struct Tally {
  std::map<std::size_t, int> blocks;  // blocks of the kept plan -> cases
  std::vector<double> kept, in_order, by_size, kept_aligned, in_order_aligned, by_size_aligned;
  int greedy_kept = 0;
};

void print_quantiles(const char* what, std::vector<double> ratios) {
  if (ratios.empty()) return;
  std::sort(ratios.begin(), ratios.end());
  const auto at = [&](double q) {
    return ratios[static_cast<std::size_t>(q * static_cast<double>(ratios.size() - 1))];
  };
  std::cout << std::fixed << std::setprecision(3) << "  " << what << ": median " << at(0.5) << ", p90 " << at(0.9)
            << ", p99 " << at(0.99) << ", max " << ratios.back() << "\n";
}

TEST(VkPlacementProperty, EveryStrategyKeepsLivesApartWithinTheLimitsAndTheKeptPlanNearThePeak) {
  static const std::vector<OpId> ops = planned_ops();
  Tally tally;
  tg::testing::check_property(
      [&] {
        const auto draws = *rc::gen::container<std::vector<testing::MemberDraw>>(
            static_cast<std::size_t>(*rc::gen::inRange(1, kMaxMembers + 1)),
            testing::gen_member(ops.size(), kMaxSteps, 4));
        std::vector<tg::testing::GraphCase> members;
        for (const auto& draw : draws) {
          tg::testing::GraphCase c = testing::build_member(draw, ops);
          if (!c.graph.nodes().empty()) members.push_back(std::move(c));
        }
        RC_PRE(!members.empty());
        const Graph graph = testing::union_of(members).graph;

        ProgramOptions options;
        options.guard_bytes = one_in(4) ? 64 : 0;
        options.fuse_elementwise = one_in(2);
        DeviceInfo device;
        device.name = "drawn limits";
        device.min_storage_buffer_offset_alignment = std::uint64_t{4} << (2 * *rc::gen::inRange(0, 4));
        device.max_storage_buffer_range = ~0ull;
        device.max_memory_allocation_size = ~0ull;
        device.max_per_stage_storage_buffers = 1u << 20;
        // One plan in one block tells the peak and the largest range; the cap is then a fraction of
        // the peak, so the plan needs several blocks (a cap below the largest range is raised to it).
        const ProgramPlan wide = plan_program(graph, device, options);
        std::uint64_t largest_payload = 0, largest_range = 0;  // values and scratch
        for (const auto* slots : {&wide.plan.slots, &wide.plan.scratch}) {
          for (const ValueSlot& s : *slots) {
            largest_payload = std::max(largest_payload, s.bytes);
            largest_range = std::max(largest_range, s.bytes + s.guard_bytes);
          }
        }
        const std::uint64_t peak = wide.plan.peak_live_bytes;
        options.max_block_bytes = std::max<std::uint64_t>(4, peak / *rc::gen::inRange<std::uint64_t>(1, 33));
        if (one_in(4)) device.max_storage_buffer_range = largest_payload;
        if (one_in(4)) {
          device.max_memory_allocation_size =
              largest_range + *rc::gen::inRange<std::uint64_t>(0, options.max_block_bytes + 1);
        }
        const ProgramPlan planned = plan_program(graph, device, options);
        const BufferPlan& kept = planned.plan;
        const auto errors = placement_errors(graph, planned.limits, planned.plan_options, kept);
        if (!errors.empty()) RC_FAIL("the kept plan:\n" + join(errors));

        PlanOptions alone = planned.plan_options;
        alone.strategy = PlacementStrategy::first_fit_in_order;
        const BufferPlan in_order = plan_buffers(graph, planned.limits, alone);
        const auto in_order_errors = placement_errors(graph, planned.limits, alone, in_order);
        if (!in_order_errors.empty()) RC_FAIL("first fit in step order:\n" + join(in_order_errors));
        alone.strategy = PlacementStrategy::greedy_by_size;
        const BufferPlan by_size = plan_buffers(graph, planned.limits, alone);
        const auto by_size_errors = placement_errors(graph, planned.limits, alone, by_size);
        if (!by_size_errors.empty()) RC_FAIL("greedy by size:\n" + join(by_size_errors));

        // The kept plan is the smaller, first fit on a tie.
        const BufferPlan& smaller = by_size.total_bytes < in_order.total_bytes ? by_size : in_order;
        RC_ASSERT(kept.blocks == smaller.blocks);
        for (std::size_t v = 0; v < kept.slots.size(); ++v) {
          RC_ASSERT(kept.slots[v].block == smaller.slots[v].block);
          RC_ASSERT(kept.slots[v].offset == smaller.slots[v].offset);
        }
        const auto ratio = [&](const BufferPlan& p) {
          return static_cast<double>(p.total_bytes) /
                 static_cast<double>(std::max<std::uint64_t>(p.peak_live_bytes, 1));
        };
        std::vector<double> aligned_ratios;  // kept, in order, by size
        for (const auto& [name, p, bound] : {std::tuple{"the kept plan", &kept, kMaxKeptOverPeak},
                                             std::tuple{"first fit in step order", &in_order, kMaxStrategyOverPeak},
                                             std::tuple{"greedy by size", &by_size, kMaxStrategyOverPeak}}) {
          const AlignedSizes sizes = aligned_sizes(graph, planned.limits, planned.plan_options, *p);
          const std::uint64_t allowance = (p->blocks.empty() ? 0 : p->blocks.size() - 1) * sizes.largest;
          const double total = static_cast<double>(p->total_bytes), aligned_peak = static_cast<double>(sizes.peak);
          aligned_ratios.push_back(total / aligned_peak);
          if (total > bound * aligned_peak + static_cast<double>(allowance)) {
            RC_FAIL(std::string(name) + " needs " + std::to_string(p->total_bytes) + " bytes in " +
                    std::to_string(p->blocks.size()) + " blocks, " + std::to_string(total / aligned_peak) +
                    " times the aligned peak, above " + std::to_string(bound) +
                    " times it plus the packing allowance of " + std::to_string(allowance) +
                    " bytes (peak_live_bytes " + std::to_string(p->peak_live_bytes) + ", cap " +
                    std::to_string(p->block_cap) + ", alignment " + std::to_string(planned.limits.alignment) + ")");
          }
        }
        tally.kept_aligned.push_back(aligned_ratios[0]);
        tally.in_order_aligned.push_back(aligned_ratios[1]);
        tally.by_size_aligned.push_back(aligned_ratios[2]);
        ++tally.blocks[kept.blocks.size()];
        tally.kept.push_back(ratio(kept));
        tally.in_order.push_back(ratio(in_order));
        tally.by_size.push_back(ratio(by_size));
        tally.greedy_kept += &smaller == &by_size ? 1 : 0;
      },
      kCases);
  std::cout << "blocks in the kept plan (blocks: cases):";
  for (const auto& [blocks, cases] : tally.blocks) std::cout << " " << blocks << ": " << cases;
  std::cout << "\ngreedy by size kept in " << tally.greedy_kept << " of " << tally.kept.size() << " cases\n";
  print_quantiles("kept plan / peak_live_bytes", tally.kept);
  print_quantiles("first fit in step order / peak_live_bytes", tally.in_order);
  print_quantiles("greedy by size / peak_live_bytes", tally.by_size);
  print_quantiles("kept plan / aligned peak", tally.kept_aligned);
  print_quantiles("first fit in step order / aligned peak", tally.in_order_aligned);
  print_quantiles("greedy by size / aligned peak", tally.by_size_aligned);
  int multi_block = 0;
  for (const auto& [blocks, cases] : tally.blocks) multi_block += blocks > 1 ? cases : 0;
  EXPECT_GE(multi_block * 2, static_cast<int>(tally.kept.size())) << "most plans should spread over several blocks";
}

}  // namespace
}  // namespace tg::vk
