// Gradient checkpointing on random graphs from the whole registry: random node ranges of a
// generated graph are marked as checkpoint segments (any set of nodes is a valid segment: what it
// did not compute is its input), and the gradient graph must give the same bits as the unmarked
// graph's on both interpreters, verify, and survive print -> parse with its marks.
#include <cmath>
#include <cstring>
#include <optional>
#include <string>

#include "checks.h"
#include "graph_gen.h"
#include "property_support.h"

namespace tg::testing {
namespace {

constexpr int kMaxSteps = 12;

// Same bits, element by element (two NaNs match: the interpreters keep no payload promise).
std::optional<std::string> same_outputs(const TensorMap& want, const TensorMap& got) {
  for (const auto& [name, w] : want) {
    const HostTensor& g = got.at(name);
    if (g.type != w.type) return name + ": type " + g.type.to_string() + " instead of " + w.type.to_string();
    for (std::size_t i = 0; i < w.size(); ++i) {
      const double a = w.at(i), b = g.at(i);
      if (std::isnan(a) && std::isnan(b)) continue;
      if (std::memcmp(&a, &b, sizeof a) != 0) {
        return name + "[" + std::to_string(i) + "]: " + std::to_string(b) + " with checkpoints, " + std::to_string(a) +
               " without";
      }
    }
  }
  return std::nullopt;
}

TG_PROPERTY(CheckpointProps, RandomSegmentsGiveBitIdenticalGradients, 1200, (std::uint64_t seed)) {
  static const std::vector<OpId> ops = sampled_ops();
  GraphCase c = build_graph(*gen_recipe(ops.size(), kMaxSteps), ops);
  const auto n = static_cast<int>(c.graph.nodes().size());
  RC_PRE(n > 0);
  const std::optional<GraphCase> plain = projected_gradient_case(c, seed);
  RC_PRE(plain.has_value());
  // 1-3 ranges [first, last], later ones overwriting earlier ones' marks where they overlap.
  const int ranges = *rc::gen::inRange(1, 4);
  for (int r = 0; r < ranges; ++r) {
    const int first = *rc::gen::inRange(0, n);
    const int last = *rc::gen::inRange(first, n);
    for (int node = first; node <= last; ++node) c.graph.set_checkpoint(node, r);
  }
  const std::optional<GraphCase> marked = projected_gradient_case(c, seed);
  RC_ASSERT(marked.has_value());
  RC_TAG(marked->graph.nodes().size() > plain->graph.nodes().size() ? "segment recomputed" : "nothing recomputed");
  try {
    verify(marked->graph);
  } catch (const Error& e) {
    RC_FAIL(std::string(e.what()) + describe(*marked));
  }
  for (ComputeType compute : {ComputeType::f32, ComputeType::f64}) {
    const TensorMap want = interpret(plain->graph, plain->inputs, {.compute = compute}).outputs;
    const TensorMap got = interpret(marked->graph, marked->inputs, {.compute = compute}).outputs;
    if (const auto problem = same_outputs(want, got)) {
      RC_FAIL(*problem + (compute == ComputeType::f32 ? " (f32)" : " (f64)") + "\nmarked graph:" + describe(*marked));
    }
  }
  if (const auto problem = check_round_trip(*marked)) RC_FAIL(*problem + describe(*marked));
}

}  // namespace
}  // namespace tg::testing
