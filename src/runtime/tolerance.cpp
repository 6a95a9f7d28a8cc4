#include "tensorgrad/runtime/tolerance.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "tensorgrad/ir/dtype.h"
#include "tensorgrad/ir/error.h"
#include "tensorgrad/ir/ops/op_def.h"

namespace tg {

namespace {

constexpr double kF32Epsilon = std::numeric_limits<float>::epsilon();

// The tolerance_ulps of one node for its reduction length.
double node_ulps(const Graph& g, const Node& node, std::vector<TensorType>& types) {
  const OpDef& def = op_def(node.op);
  types.clear();
  for (ValueId v : node.inputs) types.push_back(g.type(v));
  std::int64_t n = 1;
  if (def.reduction_length) {
    n = def.reduction_length(node.attrs, types);
  } else if (!types.empty() && g.type(node.output).size() > 0) {
    n = std::max<std::int64_t>(1, types[0].size() / g.type(node.output).size());
  }
  double ulps = tolerance_ulps(def.tolerance, n);
  // A 16-bit result is the f32 (or f64) result rounded to its dtype. Both runs round once, but a
  // result within the runs' difference of a rounding boundary goes up in one and down in the other:
  // one ulp of the dtype, 2u relative (u its unit roundoff), counted here in f32 ulps. Exact ops give
  // both runs the same bits from the same inputs, so they cannot flip.
  const DType out = g.type(node.output).dtype;
  if (ulps > 0 && is_low_precision(out)) ulps += 2.0 * unit_roundoff(out) / kF32Epsilon;
  return ulps;
}

// Errors entering an op come out scaled by its derivative; the samples' domains keep those
// derivatives small (denominators >= 0.5, bounded inputs to exp), and a factor of 4 covers them.
double relative_bound(double ulps) { return 4.0 * kF32Epsilon * std::max(ulps, 1.0); }

double finite_max_abs(const HostTensor& t) {
  double m = 0;
  for (std::size_t i = 0; i < t.size(); ++i) {
    const double v = t.at_unchecked(i);
    if (std::isfinite(v)) m = std::max(m, std::fabs(v));
  }
  return m;
}

}  // namespace

double graph_tolerance(const Graph& g) {
  double ulps = 0;
  std::vector<TensorType> types;
  for (const Node& node : g.nodes()) ulps += node_ulps(g, node, types);
  return relative_bound(ulps);
}

double oracle_scale(const std::vector<HostTensor>& values) {
  double scale = 1.0;
  for (const HostTensor& t : values) scale = std::max(scale, finite_max_abs(t));
  return scale;
}

std::vector<bool> value_cone(const Graph& g, ValueId value) {
  const std::size_t count = g.values().size();
  if (value < 0 || static_cast<std::size_t>(value) >= count) {
    throw Error("value_cone: graph '" + g.name() + "' has no value %" + std::to_string(value) + " (it has " +
                std::to_string(count) + ")");
  }
  std::vector<bool> in_cone(count, false);
  std::vector<ValueId> pending{value};
  in_cone[static_cast<std::size_t>(value)] = true;
  while (!pending.empty()) {
    const ValueId v = pending.back();
    pending.pop_back();
    const NodeId producer = g.value(v).producer;
    if (producer == kNoNode) continue;
    for (ValueId read : g.node(producer).inputs) {
      if (!in_cone[static_cast<std::size_t>(read)]) {
        in_cone[static_cast<std::size_t>(read)] = true;
        pending.push_back(read);
      }
    }
  }
  return in_cone;
}

std::vector<OutputTolerance> output_tolerances(const Graph& g, const std::vector<HostTensor>& oracle_values) {
  const std::size_t count = g.values().size();
  if (oracle_values.size() != count) {
    throw Error("output_tolerances: graph '" + g.name() + "' has " + std::to_string(count) + " values, got " +
                std::to_string(oracle_values.size()) +
                " oracle values (run the f64 interpreter with InterpOptions::keep_all_values)");
  }
  // Each value's magnitude and its producer's ulps once, so each output costs one pass over the values.
  std::vector<double> magnitude(count, 0.0), ulps(count, 0.0);
  std::vector<bool> exact_constant(count, false);
  std::vector<TensorType> types;
  for (const Node& node : g.nodes()) {  // in order: a node's inputs are decided before its output
    const bool from_constants = std::all_of(node.inputs.begin(), node.inputs.end(),
                                            [&](ValueId in) { return exact_constant[static_cast<std::size_t>(in)]; });
    exact_constant[static_cast<std::size_t>(node.output)] =
        from_constants && op_def(node.op).tolerance == ToleranceClass::exact;
  }
  for (std::size_t v = 0; v < count; ++v) {
    // A constant (full, ones, arange, and exact ops of constants only) has the same bits in both
    // runs and carries no rounding: its size is no scale for the errors of the values it feeds,
    // whose own magnitudes count. Without this, mean's backward constant N (the batch size) set
    // the scale of every gradient and optimizer update.
    if (!exact_constant[v]) magnitude[v] = finite_max_abs(oracle_values[v]);
    const NodeId producer = g.values()[v].producer;
    if (producer != kNoNode) ulps[v] = node_ulps(g, g.node(producer), types);
  }
  std::vector<OutputTolerance> result;
  result.reserve(g.outputs().size());
  for (const GraphOutput& out : g.outputs()) {
    const std::vector<bool> cone = value_cone(g, out.value);
    double cone_ulps = 0, scale = 1.0;
    for (std::size_t v = 0; v < count; ++v) {
      if (!cone[v]) continue;
      cone_ulps += ulps[v];
      scale = std::max(scale, magnitude[v]);
    }
    result.push_back({relative_bound(cone_ulps), scale});
  }
  return result;
}

std::vector<OutputComparison> compare_with_oracle(const Graph& g, const TensorMap& got,
                                                  const std::vector<HostTensor>& oracle_values, double tolerance_scale,
                                                  std::size_t worst) {
  const std::vector<OutputTolerance> bounds = output_tolerances(g, oracle_values);
  std::vector<OutputComparison> result;
  for (std::size_t k = 0; k < g.outputs().size(); ++k) {
    const GraphOutput& out = g.outputs()[k];
    const auto found = got.find(out.name);
    if (found == got.end()) {
      throw Error("compare_with_oracle: the run of graph '" + g.name() + "' has no output '" + out.name + "'");
    }
    const HostTensor& have = found->second;
    const HostTensor& want = oracle_values[static_cast<std::size_t>(out.value)];
    OutputComparison c{.name = out.name, .tolerance = bounds[k]};
    c.tolerance.relative *= tolerance_scale;
    if (have.type != want.type) {
      c.type_mismatch = true;
      result.push_back(std::move(c));
      continue;
    }
    const bool is_float_output = is_float(want.type.dtype);
    const double bound = c.tolerance.absolute();
    const auto larger = [](const ElementError& a, const ElementError& b) { return a.error > b.error; };
    for (std::size_t i = 0; i < want.size(); ++i) {
      const double e = want.at(i), v = have.at(i);
      const bool same = e == v || (std::isnan(e) && std::isnan(v));
      const double error =
          same ? 0.0 : (std::isnan(v - e) ? std::numeric_limits<double>::infinity() : std::fabs(v - e));
      if (!(same || (is_float_output && error <= bound))) ++c.elements_off;
      c.largest_error = std::max(c.largest_error, error);
      if (e != 0 && std::isfinite(e) && std::isfinite(error)) {
        c.largest_relative_error = std::max(c.largest_relative_error, error / std::fabs(e));
      }
      if (error > 0 && worst > 0 && (c.worst.size() < worst || error > c.worst.back().error)) {
        const ElementError element{i, v, e, error};
        c.worst.insert(std::upper_bound(c.worst.begin(), c.worst.end(), element, larger), element);
        if (c.worst.size() > worst) c.worst.pop_back();
      }
    }
    result.push_back(std::move(c));
  }
  return result;
}

}  // namespace tg
