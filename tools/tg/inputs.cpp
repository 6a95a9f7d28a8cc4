// Drawing the inputs that --inputs does not hold (docs/cli.md, "Inputs"). The f64 oracle and an f32
// backend both fail or both compute NaN on a value outside an op's domain, so f32 inputs need no
// care; i32 inputs do, since an index out of range stops the run: each i32 input is drawn inside
// the extent of every index it feeds, as the ops' own samples draw them for the property tests.
#include <algorithm>
#include <cstdint>
#include <set>
#include <string_view>
#include <vector>

#include "common.h"
#include "optimizer_inputs.h"
#include "tensorgrad/ir/ops/ids/indexing.h"
#include "tensorgrad/ir/ops/ids/layout.h"
#include "tensorgrad/ir/ops/ids/losses.h"
#include "tensorgrad/ir/ops/ids/structure.h"
#include "tensorgrad/ir/ops/sample.h"

namespace tg::cli {

namespace {

// Ops that move i32 values without changing them: an index passing through one still indexes
// whatever its result indexes.
bool moves_values(OpId op) {
  return op == op::Reshape || op == op::Permute || op == op::SwapAxes || op == op::BroadcastTo || op == op::Narrow ||
         op == op::Concat || op == op::Pad;
}

// The largest valid index where `value` enters input `position` of `node`, or nullopt when the
// position takes no index.
std::optional<std::int64_t> index_limit(const Graph& graph, const Node& node, std::size_t position) {
  const auto dim_of = [&](std::size_t input, std::int64_t axis) {
    const Shape& shape = graph.type(node.inputs.at(input)).shape;
    if (axis < 0) axis += static_cast<std::int64_t>(shape.size());
    return shape.at(static_cast<std::size_t>(axis));
  };
  if (node.op == op::OneHot && position == 0) return node.attrs.integer("depth") - 1;
  if (node.op == op::Embedding && position == 1) return dim_of(0, 0) - 1;
  if (node.op == op::TakeAlongAxis && position == 1) return dim_of(0, node.attrs.integer("axis")) - 1;
  if (node.op == op::ScatterAdd && position == 1) return node.attrs.integer("size") - 1;
  if ((node.op == op::NllLoss || node.op == op::CrossEntropy) && position == 1) return dim_of(0, -1) - 1;
  return std::nullopt;
}

// FNV-1a: each input's stream depends on its name, not on its position among the inputs.
std::uint64_t name_hash(std::string_view name) {
  std::uint64_t h = 14695981039346656037ull;
  for (char c : name) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  return h;
}

}  // namespace

std::pair<std::int64_t, std::int64_t> i32_draw_range(const Graph& graph, ValueId value) {
  std::vector<std::vector<std::pair<NodeId, std::size_t>>> readers(graph.values().size());
  for (std::size_t n = 0; n < graph.nodes().size(); ++n) {
    const Node& node = graph.nodes()[n];
    for (std::size_t p = 0; p < node.inputs.size(); ++p) {
      readers[static_cast<std::size_t>(node.inputs[p])].emplace_back(static_cast<NodeId>(n), p);
    }
  }
  std::optional<std::int64_t> limit;
  std::vector<ValueId> pending{value};
  std::set<ValueId> seen{value};
  while (!pending.empty()) {
    const ValueId v = pending.back();
    pending.pop_back();
    for (const auto& [n, position] : readers[static_cast<std::size_t>(v)]) {
      const Node& node = graph.node(n);
      if (const auto l = index_limit(graph, node, position)) limit = std::min(limit.value_or(*l), *l);
      if (moves_values(node.op) && graph.type(node.output).dtype == DType::i32 && seen.insert(node.output).second) {
        pending.push_back(node.output);
      }
    }
  }
  // The ops' samples draw free integers (elementwise and reductions over i32) from [0, 5].
  return {0, std::max<std::int64_t>(0, limit.value_or(5))};
}

HostTensor draw_input(const Graph& graph, const GraphInput& input, std::uint64_t seed, double lo, double hi) {
  const TensorType& type = graph.type(input.value);
  SampleRng rng(seed * 0x9E3779B97F4A7C15ull ^ name_hash(input.name));
  const auto count = static_cast<std::size_t>(type.size());
  // Each in its dtype's own storage: a quarter (f32, i32) or an eighth (bool) of wide storage, so
  // the largest input that can be drawn is as large as it can be.
  switch (type.dtype) {
    case DType::f32: {
      std::vector<float> values(count);
      for (float& v : values) v = static_cast<float>(rng.uniform(lo, hi));
      adjust_optimizer_input(graph, input, values);  // valid optimizer scalars and state
      return HostTensor::f32(type.shape, std::move(values));
    }
    case DType::f16:
    case DType::bf16: {
      std::vector<float> values(count);
      for (float& v : values) v = static_cast<float>(rng.uniform(lo, hi));
      return HostTensor::low_precision(type.dtype, type.shape, values);
    }
    case DType::boolean: {
      std::vector<bool> values(count);
      for (std::size_t i = 0; i < count; ++i) values[i] = rng.coin();
      return HostTensor::boolean(type.shape, values);
    }
    case DType::i32: {
      const auto [first, last] = i32_draw_range(graph, input.value);
      std::vector<std::int32_t> values(count);
      for (std::int32_t& v : values) v = static_cast<std::int32_t>(rng.uniform_int(first, last));
      return HostTensor::i32(type.shape, std::move(values));
    }
  }
  throw RuntimeError("input '" + input.name + "' has a dtype tg cannot draw");
}

}  // namespace tg::cli
