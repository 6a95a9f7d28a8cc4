// tg check GRAPH --backend B: runs the graph and its autodiff graph on the backend and on the f64
// oracle, and compares every output under the tolerance classes (tensorgrad/runtime/tolerance.h):
// a float element passes when |got - expected| is within its output's cone bound
// (output_tolerances: the ulps and the scale of the values that output depends on; NaN matching
// NaN), an i32 or bool element when equal. Prints each output's verdict and worst elements; exits 1 when any
// element is off.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "commands.h"
#include "common.h"
#include "tensorgrad/ir/ops/api.h"
#include "tensorgrad/passes/autodiff.h"
#include "tensorgrad/runtime/tolerance.h"

namespace tg::cli {

namespace {

constexpr double kF32Epsilon = std::numeric_limits<float>::epsilon();
// The output `tg check` adds when the graph has no scalar f32 output named "loss".
constexpr const char* kSumLoss = "tg_check.loss";

struct CheckOptions {
  std::string graph;
  BackendOptions backend;
  InputOptions inputs;
  bool no_grad = false;
  int worst = 3;
  double tolerance_scale = 1.0;
  bool quiet = false;
};

// The loss the autodiff graph differentiates: the scalar f32 output "loss" when there is one,
// else the sum of every f32 output's elements (added as output kSumLoss). nullopt: no f32 output.
std::optional<std::string> add_loss(Graph& graph) {
  if (const auto loss = graph.find_output("loss")) {
    const TensorType& type = graph.type(*loss);
    if (type.dtype == DType::f32 && type.rank() == 0) return std::string("loss");
  }
  GraphBuilder builder(graph.name());
  builder.mutable_graph() = graph;
  TracingScope scope(builder);
  std::optional<Tensor> total;
  for (const GraphOutput& out : graph.outputs()) {
    if (graph.type(out.value).dtype != DType::f32) continue;
    Tensor term = sum(builder.wrap(out.value));
    total = total ? *total + term : term;
  }
  if (!total) return std::nullopt;
  builder.output(kSumLoss, *total);
  graph = builder.take();
  return std::string(kSumLoss);
}

// The relative error of `error` against `expected`, printed next to the ulps: "-" where it has no
// meaning (an expected 0, a NaN or infinity on one side).
std::string relative_error(double error, double expected) {
  return expected != 0 && std::isfinite(error) && std::isfinite(expected)
             ? format_number(error / std::fabs(expected), true)
             : std::string("-");
}

// One graph on the backend and on the oracle; prints a line per output and returns whether all passed.
// Each output is judged by its own cone's bound (tg::compare_with_oracle): the nodes and values it
// depends on, so a large value elsewhere in the graph does not loosen it.
bool check_graph(const Graph& graph, std::string_view label, const CheckOptions& o, const TensorMap& inputs,
                 Session& session, const Progress& progress) {
  progress.stage(std::string(label) + ": running on " + o.backend.backend);
  const TensorMap got = run_or_throw(session, inputs, std::string(label) + " graph");
  progress.stage(std::string(label) + ": running on the f64 oracle");
  TensorMap expected;
  const std::vector<HostTensor> oracle = run_oracle(graph, inputs, expected, true);
  const std::vector<OutputComparison> outputs =
      compare_with_oracle(graph, got, oracle, o.tolerance_scale, static_cast<std::size_t>(o.worst));
  std::printf("%.*s graph: each output within the bound of its cone (ulps: eps_f32 units of that output's scale)\n",
              static_cast<int>(label.size()), label.data());
  bool all_pass = true;
  for (const OutputComparison& c : outputs) {
    all_pass = all_pass && c.ok();
    const HostTensor& want = expected.at(c.name);
    if (c.type_mismatch) {
      std::printf("  FAIL %s: type %s, the oracle's %s\n", c.name.c_str(), got.at(c.name).type.to_string().c_str(),
                  want.type.to_string().c_str());
      continue;
    }
    const char* verdict = c.ok() ? "ok  " : "FAIL";
    const auto off = static_cast<long long>(c.elements_off);
    const auto size = static_cast<long long>(want.size());
    const bool is_f32 = is_float(want.type.dtype);
    const double ulp = kF32Epsilon * c.tolerance.scale;  // errors are reported in eps_f32 units of the scale
    if (is_f32) {
      std::printf(
          "  %s %s  %s  %lld of %lld elements off, largest error %s ulps (relative %s); bound %s ulps of "
          "scale %s = %s\n",
          verdict, c.name.c_str(), want.type.to_string().c_str(), off, size,
          format_number(c.largest_error / ulp, true).c_str(), format_number(c.largest_relative_error, true).c_str(),
          format_number(c.tolerance.relative / kF32Epsilon, true).c_str(),
          format_number(c.tolerance.scale, true).c_str(), format_number(c.tolerance.absolute(), true).c_str());
    } else {
      std::printf("  %s %s  %s  %lld of %lld elements off, largest error %s (must be equal)\n", verdict, c.name.c_str(),
                  want.type.to_string().c_str(), off, size, format_number(c.largest_error).c_str());
    }
    for (const ElementError& w : c.worst) {
      std::printf("      %s  got %s  expected %s  error %s%s  relative %s\n",
                  index_string(want.type.shape, static_cast<std::int64_t>(w.index)).c_str(),
                  format_number(w.got, is_f32).c_str(), format_number(w.expected).c_str(),
                  format_number(is_f32 ? w.error / ulp : w.error, true).c_str(), is_f32 ? " ulps" : "",
                  relative_error(w.error, w.expected).c_str());
    }
  }
  return all_pass;
}

int check(const CheckOptions& o) {
  const Progress progress("check", o.quiet);
  const Backend backend = parse_backend(o.backend.backend);
  progress.stage("reading " + o.graph);
  const Graph forward = load_graph(o.graph);
  const PreparedInputs inputs = prepare_inputs(forward, o.inputs);

  // The autodiff graph: gradients of the loss with respect to every f32 input.
  std::optional<Graph> backward;
  std::string skipped;
  if (!o.no_grad) {
    Graph with_loss = forward;
    std::optional<std::string> loss;
    try {
      loss = add_loss(with_loss);
    } catch (const Error& e) {
      throw ToolError(kBadInput, "graph '" + forward.name() + "': cannot add the sum loss: " + e.what());
    }
    GradOptions grad{.loss = loss.value_or("")};
    for (const GraphInput& in : forward.inputs()) {
      if (forward.type(in.value).dtype == DType::f32) grad.wrt.push_back(in.name);
    }
    if (!loss) {
      skipped = "no f32 output to differentiate";
    } else if (grad.wrt.empty()) {
      skipped = "no f32 input to differentiate against";
    } else {
      try {
        backward = differentiate(with_loss, grad);
      } catch (const Error& e) {
        throw ToolError(kBadInput, "autodiff of graph '" + forward.name() + "' (loss " + *loss +
                                       ") failed: " + e.what() + " (--no-grad checks the forward graph only)");
      }
      progress.stage("autodiff graph: gradients of " + *loss + " for " + std::to_string(grad.wrt.size()) + " inputs, " +
                     std::to_string(backward->nodes().size()) + " nodes");
    }
  }

  std::shared_ptr<vk::Context> context;
  if (backend == Backend::vulkan) {
    context = open_vulkan(o.backend.device);
    progress.stage("device " + context->info().summary());
  }
  std::printf("tg check %s on %s (against the f64 oracle)\n", o.graph.c_str(), o.backend.backend.c_str());
  progress.stage("compiling the forward graph");
  Session forward_session = open_session(forward, backend, context);
  bool pass = check_graph(forward, "forward", o, inputs.tensors, forward_session, progress);
  if (backward) {
    progress.stage("compiling the autodiff graph");
    Session backward_session = open_session(*backward, backend, context);
    pass = check_graph(*backward, "autodiff", o, inputs.tensors, backward_session, progress) && pass;
  } else if (!o.no_grad) {
    std::printf("autodiff graph: not checked (%s)\n", skipped.c_str());
  }
  std::printf("%s\n", pass ? "check passed" : "check FAILED");
  return pass ? kOk : kCheckFailed;
}

}  // namespace

Command add_check_command(CLI::App& tool) {
  auto o = std::make_shared<CheckOptions>();
  CLI::App* app = tool.add_subcommand(
      "check", "Compare a graph and its autodiff graph on a backend with the f64 oracle (exit 1 on a mismatch)");
  app->add_option("GRAPH", o->graph, "graph text file")->required();
  add_backend_options(*app, o->backend);
  add_input_options(*app, o->inputs);
  app->add_flag("--no-grad", o->no_grad, "check the forward graph only");
  app->add_option("--worst", o->worst, "worst elements printed per output")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app->add_option("--tolerance-scale", o->tolerance_scale,
                  "multiply every bound by this (0: only exact agreement passes)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app->add_flag("-q,--quiet", o->quiet, "no progress lines on stderr");
  return {app, [o] { return check(*o); }};
}

}  // namespace tg::cli
