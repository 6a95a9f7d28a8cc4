#include "checks.h"

#include <tbb/global_control.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

namespace tg::testing {

namespace {

constexpr double kF64Epsilon = std::numeric_limits<double>::epsilon();

InterpResult run(const Graph& g, const TensorMap& inputs, ComputeType compute, bool keep = false) {
  return interpret(g, inputs, {.compute = compute, .keep_all_values = keep});
}

double max_abs(const std::vector<HostTensor>& tensors) {
  double m = 0;
  for (const auto& t : tensors)
    for (double v : t.to_f64()) m = std::max(m, std::fabs(v));
  return m;
}

std::string fmt(double v) {
  std::ostringstream out;
  out.precision(17);
  out << v;
  return out.str();
}

// Appends a loss = sum_k sum(out_k * w_k) over the f32 outputs, with each w_k a data input
// "proj.k" filled with values in [-1, 1]. Returns false when there is no f32 output.
bool add_projected_loss(const GraphCase& c, SampleRng& rng, Graph& out_graph, TensorMap& inputs) {
  GraphBuilder b(c.graph.name());
  b.mutable_graph() = c.graph;
  TracingScope scope(b);
  std::optional<Tensor> loss;
  int k = 0;
  for (const auto& output : c.graph.outputs()) {
    const TensorType& type = c.graph.type(output.value);
    if (type.dtype != DType::f32) continue;
    const std::string name = "proj." + std::to_string(k++);
    Tensor w = b.input(name, type);
    std::vector<double> values(static_cast<std::size_t>(type.size()));
    for (double& v : values) v = static_cast<float>(rng.uniform(-1, 1));
    inputs.emplace(name, HostTensor::of(type, std::move(values)));
    Tensor term = sum(b.wrap(output.value) * w);
    loss = loss ? *loss + term : term;
  }
  if (!loss) return false;
  b.output("loss", *loss);
  out_graph = b.take();
  return true;
}

std::vector<std::string> differentiable_inputs(const GraphCase& c) {
  std::vector<std::string> names;
  for (const auto& in : c.graph.inputs()) {
    if (c.graph.type(in.value).dtype == DType::f32 && !c.frozen.contains(in.name)) names.push_back(in.name);
  }
  return names;
}

double loss_at(const Graph& g, const TensorMap& inputs) {
  return run(g, inputs, ComputeType::f64).outputs.at("loss").at(0);
}

}  // namespace

std::optional<std::string> check_f32_matches_f64(const GraphCase& c) {
  const auto oracle = run(c.graph, c.inputs, ComputeType::f64, true);
  const auto fast = run(c.graph, c.inputs, ComputeType::f32);
  // Each output within the bound of its own cone (tolerance.h): the largest error is the one reported.
  for (const OutputComparison& out : compare_with_oracle(c.graph, fast.outputs, oracle.values, 1.0, 1)) {
    if (out.ok()) continue;
    if (out.type_mismatch) return "output " + out.name + ": f32 and f64 runs give different types";
    const ElementError& e = out.worst.front();
    return "output " + out.name + "[" + std::to_string(e.index) + "]: f32 gives " + fmt(e.got) + ", the f64 oracle " +
           fmt(e.expected) + " (allowed error " + fmt(out.tolerance.absolute()) + ", the bound of its cone: scale " +
           fmt(out.tolerance.scale) + ")";
  }
  return std::nullopt;
}

std::optional<std::string> check_same_bits_any_thread_count(const GraphCase& c) {
  for (ComputeType compute : {ComputeType::f64, ComputeType::f32}) {
    InterpResult many = run(c.graph, c.inputs, compute, true);
    InterpResult one;
    {
      tbb::global_control single(tbb::global_control::max_allowed_parallelism, 1);
      one = run(c.graph, c.inputs, compute, true);
    }
    for (std::size_t v = 0; v < many.values.size(); ++v) {
      if (many.values[v] != one.values[v]) {
        return "value %" + std::to_string(v) + " differs between 1 thread and all threads (" +
               (compute == ComputeType::f64 ? "f64" : "f32") + ")";
      }
    }
  }
  return std::nullopt;
}

std::optional<std::string> check_coverage(const GraphCase& c) {
  for (ComputeType compute : {ComputeType::f64, ComputeType::f32}) {
    try {
      interpret(c.graph, c.inputs, {.compute = compute, .check_coverage = true});
    } catch (const RuntimeError& e) {
      return std::string("shape rule and kernel disagree: ") + e.what();
    }
  }
  return std::nullopt;
}

std::optional<std::string> check_round_trip(const GraphCase& c) {
  const std::string text = print_graph(c.graph);
  Graph parsed;
  try {
    parsed = parse_graph(text);
  } catch (const Error& e) {
    return std::string("the printed graph does not parse: ") + e.what() + "\n" + text;
  }
  if (!(parsed == c.graph)) return "parse(print(g)) differs from g:\n" + text + "\nreprinted:\n" + print_graph(parsed);
  if (print_graph(parsed) != text) return "print(parse(text)) differs from text:\n" + text;
  return std::nullopt;
}

std::optional<std::string> check_directional_gradient(const GraphCase& c, std::uint64_t seed) {
  SampleRng rng(seed);
  Graph with_loss;
  TensorMap inputs = c.inputs;
  if (!add_projected_loss(c, rng, with_loss, inputs)) return std::nullopt;
  const auto wrt = differentiable_inputs(c);
  if (wrt.empty()) return std::nullopt;
  const Graph grad_graph = differentiate(with_loss, {.loss = "loss", .wrt = wrt});
  verify(grad_graph);
  const auto grads = run(grad_graph, inputs, ComputeType::f64).outputs;

  TensorMap plus = inputs;
  TensorMap minus = inputs;
  constexpr double h = 1e-6;
  double analytic = 0;
  double magnitude = 0;
  for (const auto& name : wrt) {
    const HostTensor& g = grads.at("grad." + name);
    auto p = plus.at(name).mutable_wide();
    auto m = minus.at(name).mutable_wide();
    for (std::size_t i = 0; i < g.size(); ++i) {
      const double direction = rng.uniform(-1, 1);
      analytic += g.at(i) * direction;
      magnitude += std::fabs(g.at(i) * direction);
      p[i] += h * direction;
      m[i] -= h * direction;
    }
  }
  const auto all = run(with_loss, inputs, ComputeType::f64, true);
  const double loss_scale = std::max(1.0, max_abs(all.values));
  const double numeric = (loss_at(with_loss, plus) - loss_at(with_loss, minus)) / (2 * h);
  // Truncation error is O(h^2); rounding error is about eps * |values| / h per evaluation.
  const double tol =
      1e-6 * (1 + magnitude) + 64 * kF64Epsilon * loss_scale * static_cast<double>(c.graph.nodes().size() + 1) / h;
  if (std::fabs(analytic - numeric) > tol) {
    return "autodiff directional derivative " + fmt(analytic) + " vs central difference " + fmt(numeric) +
           " (allowed error " + fmt(tol) + ")\ngradient graph:\n" + print_graph(grad_graph, {.locations = false});
  }
  return std::nullopt;
}

GraphCost directional_gradient_cost(const GraphCase& c, std::uint64_t seed) {
  SampleRng rng(seed);  // the same draws as check_directional_gradient: the same graphs
  Graph with_loss;
  TensorMap inputs = c.inputs;
  GraphCost cost = graph_cost(c.graph);
  if (!add_projected_loss(c, rng, with_loss, inputs)) return cost;
  const auto wrt = differentiable_inputs(c);
  if (wrt.empty()) return cost;
  cost = graph_cost(with_loss);
  cost += graph_cost(differentiate(with_loss, {.loss = "loss", .wrt = wrt}));
  std::int64_t input_bytes = 0;
  for (const auto& [name, t] : inputs) input_bytes += static_cast<std::int64_t>(t.size()) * 8;
  cost += GraphCost{.value_bytes = 2 * input_bytes, .work = 0};  // the plus and minus copies
  return cost;
}

std::optional<GraphCase> projected_gradient_case(const GraphCase& c, std::uint64_t seed) {
  SampleRng rng(seed);
  Graph with_loss;
  TensorMap inputs = c.inputs;
  if (!add_projected_loss(c, rng, with_loss, inputs)) return std::nullopt;
  std::vector<std::string> wrt;
  for (const auto& in : c.graph.inputs())
    if (c.graph.type(in.value).dtype == DType::f32) wrt.push_back(in.name);
  if (wrt.empty()) return std::nullopt;
  return GraphCase{differentiate(with_loss, {.loss = "loss", .wrt = wrt}), std::move(inputs), c.frozen};
}

std::optional<GraphCase> dtype_gradient_case(const GraphCase& c, DType dtype, std::uint64_t seed) {
  std::vector<std::string> wrt;
  for (const auto& in : c.graph.inputs())
    if (c.graph.type(in.value).dtype == dtype && !c.frozen.count(in.name)) wrt.push_back(in.name);
  if (wrt.empty()) return std::nullopt;
  GraphBuilder b(c.graph.name());
  b.mutable_graph() = c.graph;
  TensorMap inputs = c.inputs;
  SampleRng rng(seed);
  {
    TracingScope scope(b);
    std::optional<Tensor> loss;
    for (const GraphOutput& out : c.graph.outputs()) {
      if (c.graph.type(out.value).dtype != dtype) continue;
      const TensorType w_type{DType::f32, c.graph.type(out.value).shape};
      const std::string w_name = "w." + out.name;
      const Tensor term = sum(cast(b.wrap(out.value), DType::f32) * b.input(w_name, w_type));
      loss = loss ? *loss + term : term;
      std::vector<float> w(static_cast<std::size_t>(w_type.size()));
      for (float& v : w) v = static_cast<float>(rng.uniform(-1, 1));
      inputs.emplace(w_name, HostTensor::f32(w_type.shape, std::move(w)));
    }
    if (!loss) return std::nullopt;
    b.output("loss", *loss);
  }
  return GraphCase{differentiate(b.take(), {.loss = "loss", .wrt = wrt}), std::move(inputs), c.frozen};
}

std::optional<std::string> check_full_jacobian(const GraphCase& c) {
  const auto y_id = c.graph.find_output("y");
  if (!y_id || c.graph.type(*y_id).dtype != DType::f32) return std::nullopt;
  const auto wrt = differentiable_inputs(c);
  if (wrt.empty()) return std::nullopt;
  const TensorType y_type = c.graph.type(*y_id);

  GraphBuilder b(c.graph.name());
  b.mutable_graph() = c.graph;
  {
    TracingScope scope(b);
    b.output("loss", sum(b.wrap(*y_id) * b.input("w", y_type)));
  }
  const Graph with_loss = b.take();
  const Graph grad_graph = differentiate(with_loss, {.loss = "loss", .wrt = wrt});

  const auto n_out = static_cast<std::size_t>(y_type.size());
  TensorMap inputs = c.inputs;
  inputs.emplace("w", HostTensor::filled(y_type, 0.0));
  // rows[j][name] = d y_j / d name, by autodiff with a one-hot cotangent on y_j.
  std::vector<TensorMap> rows;
  for (std::size_t j = 0; j < n_out; ++j) {
    auto w = inputs.at("w").mutable_wide();
    std::fill(w.begin(), w.end(), 0.0);
    w[j] = 1.0;
    rows.push_back(run(grad_graph, inputs, ComputeType::f64).outputs);
  }
  const double y_scale = std::max(1.0, max_abs({run(c.graph, c.inputs, ComputeType::f64).outputs.at("y")}));
  constexpr double h = 1e-6;
  for (const auto& name : wrt) {
    const auto n_in = c.inputs.at(name).size();
    for (std::size_t e = 0; e < n_in; ++e) {
      TensorMap plus = c.inputs;
      TensorMap minus = c.inputs;
      plus.at(name).mutable_wide()[e] += h;
      minus.at(name).mutable_wide()[e] -= h;
      const auto yp = run(c.graph, plus, ComputeType::f64).outputs.at("y").to_f64();
      const auto ym = run(c.graph, minus, ComputeType::f64).outputs.at("y").to_f64();
      for (std::size_t j = 0; j < n_out; ++j) {
        const double numeric = (yp[j] - ym[j]) / (2 * h);
        const double analytic = rows[j].at("grad." + name).at(e);
        const double tol = 1e-6 * (1 + std::fabs(analytic)) + 64 * kF64Epsilon * y_scale / h;
        if (std::fabs(numeric - analytic) > tol) {
          return "Jacobian entry d y[" + std::to_string(j) + "] / d " + name + "[" + std::to_string(e) +
                 "]: autodiff " + fmt(analytic) + ", central difference " + fmt(numeric) + "\ngradient graph:\n" +
                 print_graph(grad_graph, {.locations = false});
        }
      }
    }
  }
  return std::nullopt;
}

}  // namespace tg::testing
