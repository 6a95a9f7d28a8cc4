// tg run GRAPH --backend B: runs a graph file once and prints a summary of every output; --out
// writes the outputs to a safetensors file.
#include <CLI/CLI.hpp>
#include <iostream>
#include <memory>
#include <string>

#include "commands.h"
#include "common.h"
#include "tensorgrad/train/safetensors.h"

namespace tg::cli {

namespace {

struct RunOptions {
  std::string graph;
  BackendOptions backend;
  InputOptions inputs;
  std::string out;
  int shown = 6;
  bool quiet = false;
};

int run_graph(const RunOptions& o) {
  const Progress progress("run", o.quiet);
  const Backend backend = parse_backend(o.backend.backend);
  progress.stage("reading " + o.graph);
  const Graph graph = load_graph(o.graph);
  progress.stage("graph '" + graph.name() + "': " + std::to_string(graph.nodes().size()) + " nodes, " +
                 std::to_string(graph.inputs().size()) + " inputs, " + std::to_string(graph.outputs().size()) +
                 " outputs");
  const PreparedInputs inputs = prepare_inputs(graph, o.inputs);
  if (!inputs.drawn.empty())
    progress.stage("drew " + std::to_string(inputs.drawn.size()) + " inputs (seed " + std::to_string(o.inputs.seed) +
                   ")");
  std::shared_ptr<vk::Context> context;
  if (backend == Backend::vulkan) {
    context = open_vulkan(o.backend.device);
    progress.stage("device " + context->info().summary());
  }
  progress.stage("compiling for " + o.backend.backend);
  Session session = open_session(graph, backend, context);
  progress.stage("running");
  const TensorMap outputs = run_or_throw(session, inputs.tensors, "graph '" + graph.name() + "'");
  progress.stage("done");

  std::cout << "graph " << graph.name() << " on " << o.backend.backend << ": " << outputs.size() << " outputs\n";
  for (const GraphOutput& out : graph.outputs())
    std::cout << summarize(out.name, outputs.at(out.name), o.shown) << "\n";
  if (!o.out.empty()) {
    try {
      save_safetensors(o.out, outputs, {{"graph", graph.name()}, {"backend", o.backend.backend}});
    } catch (const Error& e) {
      throw ToolError(kBadInput, std::string("--out: ") + e.what());
    }
    progress.stage("wrote " + std::to_string(outputs.size()) + " outputs to " + o.out);
  }
  return kOk;
}

}  // namespace

Command add_run_command(CLI::App& tool) {
  auto o = std::make_shared<RunOptions>();
  CLI::App* app = tool.add_subcommand("run", "Run a graph file once on a backend and summarise its outputs");
  app->add_option("GRAPH", o->graph, "graph text file (tensorgrad/ir/text.h format)")->required();
  add_backend_options(*app, o->backend);
  add_input_options(*app, o->inputs);
  app->add_option("--out", o->out, "write every output to this safetensors file");
  app->add_option("--show", o->shown, "values printed per output")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app->add_flag("-q,--quiet", o->quiet, "no progress lines on stderr");
  return {app, [o] { return run_graph(*o); }};
}

}  // namespace tg::cli
