// The parallel interpreter schedule (InterpSchedule::parallel) against the sequential one on random
// registry graphs: under 1, 2 and 4 TBB threads, in both compute types, every output has the same
// storage and the same bytes (NaN payloads included), every intermediate value too
// (keep_all_values), and a graph whose run fails fails with the same message.
#include <tbb/global_control.h>

#include <cstring>
#include <optional>
#include <string>

#include "graph_gen.h"
#include "property_support.h"

namespace tg::testing {
namespace {

// Why `got` is not bit for bit `want`, or nothing.
std::optional<std::string> bit_difference(const HostTensor& want, const HostTensor& got) {
  if (want.type != got.type) return "type " + got.type.to_string() + " instead of " + want.type.to_string();
  if (want.storage() != got.storage()) {
    return "storage " + std::string(host_storage_name(got.storage())) + " instead of " +
           std::string(host_storage_name(want.storage()));
  }
  const std::size_t width = host_storage_bytes(want.storage());
  const std::size_t bytes = want.size() * width;
  if (bytes > 0 && std::memcmp(want.raw_data(), got.raw_data(), bytes) != 0) {
    for (std::size_t e = 0; e < want.size(); ++e) {
      if (std::memcmp(static_cast<const char*>(want.raw_data()) + e * width,
                      static_cast<const char*>(got.raw_data()) + e * width, width) != 0) {
        return "element " + std::to_string(e) + " is " + std::to_string(got.at(e)) + " instead of " +
               std::to_string(want.at(e));
      }
    }
  }
  return std::nullopt;
}

// The outputs and every value of one run, or the message it failed with.
struct Outcome {
  std::optional<InterpResult> result;
  std::string error;
};

Outcome run_once(const GraphCase& c, ComputeType compute, InterpSchedule schedule) {
  Outcome outcome;
  try {
    outcome.result = interpret(c.graph, c.inputs, {.compute = compute, .keep_all_values = true, .schedule = schedule});
  } catch (const Error& e) {
    outcome.error = e.what();
  }
  return outcome;
}

std::optional<std::string> compare(const Outcome& want, const Outcome& got) {
  if (!want.result || !got.result) {
    if (want.result.has_value() != got.result.has_value() || want.error != got.error) {
      return "sequential: " + (want.result ? std::string("ran") : "failed with '" + want.error + "'") +
             "; parallel: " + (got.result ? std::string("ran") : "failed with '" + got.error + "'");
    }
    return std::nullopt;
  }
  for (const auto& [name, tensor] : want.result->outputs) {
    if (auto d = bit_difference(tensor, got.result->outputs.at(name))) return "output '" + name + "': " + *d;
  }
  for (std::size_t v = 0; v < want.result->values.size(); ++v) {
    if (auto d = bit_difference(want.result->values[v], got.result->values.at(v))) {
      return "value %" + std::to_string(v) + ": " + *d;
    }
  }
  return std::nullopt;
}

TG_PROPERTY(ParallelSchedule, GivesTheSequentialBitsForAnyThreadCount, 1000, ()) {
  static const std::vector<OpId> ops = sampled_ops();
  const bool boundary = *rc::gen::weightedElement<bool>({{3, false}, {1, true}});
  const auto steps = *gen_recipe(ops.size(), boundary ? 6 : 16);
  const GraphCase c = build_graph(steps, ops, boundary ? boundary_options() : GenOptions{});
  RC_PRE(!c.graph.nodes().empty());
  for (ComputeType compute : {ComputeType::f32, ComputeType::f64}) {
    const Outcome sequential = run_once(c, compute, InterpSchedule::sequential);
    for (int threads : {1, 2, 4}) {
      const tbb::global_control limit(tbb::global_control::max_allowed_parallelism, static_cast<std::size_t>(threads));
      const Outcome parallel = run_once(c, compute, InterpSchedule::parallel);
      if (auto d = compare(sequential, parallel)) {
        RC_FAIL(*d + " (" + (compute == ComputeType::f32 ? "f32" : "f64") + ", " + std::to_string(threads) +
                " threads)\ngraph:" + describe(c));
      }
    }
  }
}

}  // namespace
}  // namespace tg::testing
