// Batches of random graphs checked as one Program (see vk_property_batch.h).
#include "vk_property_batch.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <exception>
#include <sstream>
#include <utility>

#include "property/regression_writer.h"
#include "support/tolerance.h"
#include "vk_test_support.h"

namespace tg::vk::testing {

using tg::testing::GraphCase;

namespace {

std::string fmt(double v) {
  std::ostringstream s;
  s.precision(17);
  s << v;
  return s.str();
}

std::string member_name(std::size_t k, const std::string& name) { return "m" + std::to_string(k) + "." + name; }

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
    for (std::size_t i = 0; i < x.size(); ++i) {
      if (element_bits(x.type.dtype, x.at(i)) != element_bits(y.type.dtype, y.at(i))) {
        return "output " + name + "[" + std::to_string(i) + "]: " + fmt(x.at(i)) + " vs " + fmt(y.at(i));
      }
    }
  }
  return std::nullopt;
}

// Member k's outputs in `got` against the f64 oracle on the member alone, within the member's
// graph_tolerance scaled by the largest magnitude among its values.
std::optional<std::string> compare_member(std::size_t k, const GraphCase& member, const TensorMap& got) {
  const InterpResult oracle =
      interpret(member.graph, member.inputs, {.compute = ComputeType::f64, .keep_all_values = true});
  double scale = 1.0;
  for (const HostTensor& t : oracle.values)
    for (double v : t.to_f64()) scale = std::max(scale, std::fabs(v));
  const double tol = tg::testing::graph_tolerance(member.graph) * scale;
  for (const auto& [name, want] : oracle.outputs) {
    const auto it = got.find(member_name(k, name));
    if (it == got.end()) return "output " + name + " is missing";
    const HostTensor& g = it->second;
    if (g.type != want.type) return "output " + name + " has type " + g.type.to_string();
    for (std::size_t i = 0; i < want.size(); ++i) {
      const double d = want.at(i), f = g.at(i);
      const bool ok = is_float(want.type.dtype) ? std::fabs(f - d) <= tol : f == d;
      if (!ok) {
        return "output " + name + "[" + std::to_string(i) + "]: Vulkan gives " + fmt(f) + ", the f64 oracle " + fmt(d) +
               " (allowed error " + fmt(tol) + ")";
      }
    }
  }
  return std::nullopt;
}

std::optional<std::string> checks(const std::shared_ptr<Context>& ctx, std::span<const GraphCase> members,
                                  const GraphCase& all, const ProgramOptions& options) {
  Program program(ctx, all.graph, options);
  const TensorMap got = program.run(all.inputs);
  if (const auto guards = program.check_guards(); !guards.empty())
    return "guard regions overwritten:\n" + join_lines(guards);
  for (std::size_t k = 0; k < members.size(); ++k) {
    if (auto why = compare_member(k, members[k], got)) return *why;
  }
  // Determinism: a replay of the recorded command buffer, then a second Program from the same
  // graph with the other guard setting, so its buffer plan (offsets, reuse, barriers) differs.
  // Neither may change a bit: kernels must not depend on scheduling or placement.
  if (auto diff = first_bit_difference(got, program.run(all.inputs)))
    return "the second run of one Program differs from the first: " + *diff;
  ProgramOptions other = options;
  other.guard_bytes = options.guard_bytes > 0 ? 0 : 64;
  Program recompiled(ctx, all.graph, other);
  if (auto diff = first_bit_difference(got, recompiled.run(all.inputs)))
    return "a second Program compiled from the same graph differs: " + *diff;
  if (const auto guards = recompiled.check_guards(); !guards.empty())
    return "guard regions overwritten (second Program):\n" + join_lines(guards);
  return std::nullopt;
}

}  // namespace

bool one_in(int n) {
  // RapidCheck scales inRange by its size parameter (small in the first cases): drawn at full size,
  // the share holds from the first case on. Shrinks toward false.
  return *rc::gen::resize(100, rc::gen::inRange(0, n)) == n - 1;
}

namespace {

std::string describe_options(const ProgramOptions& o) {
  return "guard_bytes " + std::to_string(o.guard_bytes) + ", max_workgroups " + std::to_string(o.max_workgroups) +
         ", max_block_bytes " + std::to_string(o.max_block_bytes) + ", fuse_elementwise " +
         (o.fuse_elementwise ? "on" : "off");
}

}  // namespace

void showValue(const MemberDraw& draw, std::ostream& os) {
  os << "{steps: ";
  rc::show(draw.steps, os);
  os << ", boundary: " << (draw.boundary ? "yes" : "no") << ", seed: " << draw.seed << "}";
}

rc::Gen<MemberDraw> gen_member(std::size_t op_count, int max_steps, int boundary_one_in) {
  return rc::gen::exec([=] {
    MemberDraw draw;
    // First, so it shrinks first: a shrunk member keeps boundary sizes only when its failure needs
    // them. Boundary graphs take at most kMaxBoundarySteps steps, as in the interpreter suites.
    draw.boundary = one_in(boundary_one_in);
    draw.steps = *tg::testing::gen_recipe(op_count, draw.boundary ? std::min(max_steps, kMaxBoundarySteps) : max_steps);
    draw.seed = *rc::gen::arbitrary<std::uint64_t>();
    return draw;
  });
}

rc::Gen<std::vector<MemberDraw>> gen_batch(std::size_t count, rc::Gen<MemberDraw> member) {
  using Elements = std::vector<rc::Shrinkable<MemberDraw>>;
  return rc::Gen<std::vector<MemberDraw>>([count, member](const rc::Random& random, int size) {
    rc::Random r = random;
    Elements elements;
    for (std::size_t i = 0; i < count; ++i) elements.push_back(member(r.split(), size));
    // As rc::gen::container shrinks, but from a fixed count (a container's count follows the size).
    return rc::shrinkable::map(
        rc::shrinkable::shrinkRecur(std::move(elements),
                                    [](const Elements& e) {
                                      return rc::seq::concat(
                                          rc::shrink::removeChunks(e),
                                          rc::shrink::eachElement(
                                              e, [](const rc::Shrinkable<MemberDraw>& s) { return s.shrinks(); }));
                                    }),
        [](const Elements& e) {
          std::vector<MemberDraw> out;
          out.reserve(e.size());
          for (const auto& s : e) out.push_back(s.value());
          return out;
        });
  });
}

GraphCase build_member(const MemberDraw& draw, std::span<const OpId> ops) {
  return tg::testing::build_graph(draw.steps, ops,
                                  draw.boundary ? tg::testing::boundary_options() : tg::testing::GenOptions{});
}

GraphCase union_of(std::span<const GraphCase> members) {
  GraphCase all{Graph("batch"), {}, {}};
  for (std::size_t k = 0; k < members.size(); ++k) {
    const Graph& g = members[k].graph;
    std::vector<ValueId> value(g.values().size(), -1);
    // Inputs first: a graph may declare one after nodes that do not use it, and every node input
    // is an input or an earlier node's output, so node order stays topological.
    for (const GraphInput& in : g.inputs())
      value[static_cast<std::size_t>(in.value)] =
          all.graph.add_input(member_name(k, in.name), in.kind, g.type(in.value));
    for (const Node& node : g.nodes()) {
      std::vector<ValueId> inputs;
      for (ValueId v : node.inputs) inputs.push_back(value[static_cast<std::size_t>(v)]);
      value[static_cast<std::size_t>(node.output)] =
          all.graph.add_node(node.op, std::move(inputs), node.attrs, g.type(node.output), node.loc);
    }
    for (const GraphOutput& out : g.outputs())
      all.graph.add_output(member_name(k, out.name), value[static_cast<std::size_t>(out.value)]);
    for (const auto& [name, tensor] : members[k].inputs) all.inputs.emplace(member_name(k, name), tensor);
    for (const std::string& name : members[k].frozen) all.frozen.insert(member_name(k, name));
  }
  return all;
}

std::optional<std::string> check_batch(const std::shared_ptr<Context>& ctx, std::span<const GraphCase> members,
                                       const ProgramOptions& options) {
  std::optional<std::string> why;
  try {
    why = checks(ctx, members, union_of(members), options);
  } catch (const std::exception& e) {
    why = std::string("threw: ") + e.what();
  }
  // Read and cleared, so the next check (another batch, or a member checked alone) sees only its
  // own; the fixture's log keeps every message for the end of the test.
  const std::vector<std::string> messages = ctx->validation_messages();
  ctx->clear_validation_messages();
  if (!why && !messages.empty()) why = "validation messages:\n" + join_lines(messages);
  return why;
}

void check_batch_or_fail(const std::shared_ptr<Context>& ctx, std::span<const GraphCase> members,
                         const ProgramOptions& options) {
  const std::optional<std::string> why = check_batch(ctx, members, options);
  if (!why) return;
  if (members.size() > 1) {
    for (std::size_t k = 0; k < members.size(); ++k) {
      if (const auto alone = check_batch(ctx, members.subspan(k, 1), options)) {
        tg::testing::maybe_write_regression(members[k]);  // when TG_WRITE_REGRESSIONS is set
        RC_FAIL(*alone + "\n(member " + std::to_string(k) + " of a batch of " + std::to_string(members.size()) +
                ", failing alone; " + describe_options(options) + "; the batch failed with: " + *why + ")" +
                tg::testing::describe(members[k]));
      }
    }
    RC_FAIL(*why + "\n(a batch of " + std::to_string(members.size()) + " graphs fails, no member alone; " +
            describe_options(options) + ")" + tg::testing::describe(union_of(members)));
  }
  tg::testing::maybe_write_regression(members.front());
  RC_FAIL(*why + "\n(" + describe_options(options) + ")" + tg::testing::describe(members.front()));
}

ProgramOptions gen_program_options(int small_grid_one_in, int small_blocks_one_in) {
  ProgramOptions options;
  options.guard_bytes = one_in(2) ? 64 : 0;
  if (one_in(small_grid_one_in)) options.max_workgroups = *rc::gen::resize(100, rc::gen::inRange<std::uint32_t>(1, 4));
  if (small_blocks_one_in > 0 && one_in(small_blocks_one_in))
    options.max_block_bytes = std::uint64_t{256} << (2 * *rc::gen::resize(100, rc::gen::inRange(0, 4)));
  return options;
}

std::ostream& operator<<(std::ostream& os, const GraphCount& count) {
  os << "checked " << count.graphs << " graphs in " << count.batches << " batches (" << count.fused_graphs
     << " with elementwise fusion, " << count.boundary_graphs << " drawn with boundary sizes, "
     << count.small_grid_graphs << " under a 1-3 workgroup cap";
  if (count.multi_block_graphs > 0) os << ", " << count.multi_block_graphs << " in plans of several blocks";
  if (count.left_out > 0) os << "; " << count.left_out << " left out above the size bound";
  return os << ")";
}

}  // namespace tg::vk::testing
