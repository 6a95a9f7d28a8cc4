#pragma once
// Shared by the two Vulkan random-graph properties (vk_property_test.cpp, forward, and
// vk_autodiff_property_test.cpp, gradient graphs): many random graphs checked per Program.
//
// A RapidCheck case draws a batch of members (random graphs) and checks their disjoint union as
// ONE Program, so one compile, one submission and one readback serve many graphs. Every check a
// single graph had applies to each member: its outputs against the f64 oracle's under its own
// graph_tolerance, guard regions intact, a second run and a second Program (the other guard
// setting, so another buffer plan) giving the same bits, and no validation message. When the batch
// fails, each member is checked alone and the property fails on the first that fails alone, so
// RapidCheck shrinks the batch (removing members, then shrinking each) down to that one smallest
// graph; it is written as a regression file when TG_WRITE_REGRESSIONS is set
// (tests/property/regression_writer.h). A failure that no member shows alone is a bug of the union
// (fusion or planning across independent nodes), and the property fails with the whole union.
#include <rapidcheck.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <span>
#include <string>
#include <vector>

#include "property/graph_gen.h"
#include "tensorgrad/vk/context.h"
#include "tensorgrad/vk/executor.h"

namespace tg::vk::testing {

// How one member was drawn; the property turns it into a graph (none when the draw builds
// nothing, e.g. every step was skipped, and the member is left out).
struct MemberDraw {
  std::vector<tg::testing::Step> steps;
  bool boundary = false;   // draw sizes from the boundary profile (see build_member)
  std::uint64_t seed = 0;  // free for the property (the autodiff one seeds its loss projection)
};
void showValue(const MemberDraw& draw, std::ostream& os);

// Member draws: recipes of 1..max_steps steps over op_count ops; one in boundary_one_in draws its
// dims from the boundary profile (tests/property/graph_gen.h, boundary_options()) with at most
// kMaxBoundarySteps steps, which keeps those graphs within the elements a CI run can afford.
inline constexpr int kMaxBoundarySteps = 6;
rc::Gen<MemberDraw> gen_member(std::size_t op_count, int max_steps, int boundary_one_in);

// Exactly `count` members. Shrinking removes members (in chunks) and shrinks each one, so a
// failing batch shrinks to the one member that fails.
rc::Gen<std::vector<MemberDraw>> gen_batch(std::size_t count, rc::Gen<MemberDraw> member);

// The graph of a draw under its size profile.
tg::testing::GraphCase build_member(const MemberDraw& draw, std::span<const OpId> ops);

// The disjoint union of `members`: member k's inputs and outputs renamed "m<k>.<name>".
tg::testing::GraphCase union_of(std::span<const tg::testing::GraphCase> members);

// Every check on `members` run as one Program with `options`; nullopt when all pass, otherwise
// what failed. Clears the context's validation messages it read.
std::optional<std::string> check_batch(const std::shared_ptr<Context>& ctx,
                                       std::span<const tg::testing::GraphCase> members, const ProgramOptions& options);

// check_batch, and on a failure RC_FAIL on the first member that fails alone (written as a
// regression when TG_WRITE_REGRESSIONS is set), or on the union when none does.
void check_batch_or_fail(const std::shared_ptr<Context>& ctx, std::span<const tg::testing::GraphCase> members,
                         const ProgramOptions& options);

// True for one draw in n (RapidCheck shrinks it toward false).
bool one_in(int n);

// Program options a case draws: guards for half the cases (the other Program of each case gets the
// other setting), for one in `small_grid_one_in` a cap of 1-3 workgroups per dispatch, so every
// shader's grid-stride loop runs at small sizes (ProgramOptions::max_workgroups), and for one in
// `small_blocks_one_in` (0: never) a block cap of 256 B to 16 KiB (ProgramOptions::max_block_bytes),
// so the plan, bindings, barriers and staging run spread over many device allocations.
ProgramOptions gen_program_options(int small_grid_one_in, int small_blocks_one_in = 0);

// Counts the graphs a property checked, for the line it prints at the end.
struct GraphCount {
  std::size_t graphs = 0;
  std::size_t batches = 0;
  std::size_t fused_graphs = 0;
  std::size_t boundary_graphs = 0;
  std::size_t small_grid_graphs = 0;
  std::size_t multi_block_graphs = 0;  // in a Program whose plan has several blocks
  std::size_t left_out = 0;            // drawn but above a size bound the property sets
};
std::ostream& operator<<(std::ostream& os, const GraphCount& count);

}  // namespace tg::vk::testing
