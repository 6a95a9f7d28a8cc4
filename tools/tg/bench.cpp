// tg bench GRAPH --backend B: per-node times on the backend next to the f64 oracle's, as Google
// Benchmark-shaped JSON (stdout or --json FILE) and a table on stderr. Interpreter times are each
// node's kernel wall time (InterpOptions::on_node_done); Vulkan times are each node's dispatches'
// device time from GPU timestamps (Session::timings()). Every time is the mean over --repetitions
// runs, after --warmup untimed runs.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <iostream>
#include <memory>
#include <new>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "commands.h"
#include "common.h"
#include "tensorgrad/interp/interpreter.h"

namespace tg::cli {

namespace {

struct BenchOptions {
  std::string graph;
  BackendOptions backend;
  InputOptions inputs;
  int repetitions = 10;
  int warmup = 1;
  std::string json;
  bool quiet = false;
};

// Mean per-node times in microseconds, and the mean wall time of a whole run.
struct NodeTimes {
  std::vector<double> microseconds;
  std::vector<int> dispatches;      // Vulkan: dispatches recorded for the node (0: fused into another, alias, constant)
  std::vector<std::string> labels;  // Vulkan: a dispatch's label when it is not the node's op (a fused group)
  double run_microseconds = 0;
};

double since_us(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
}

NodeTimes time_interpreter(const Graph& graph, const TensorMap& inputs, ComputeType compute, const BenchOptions& o,
                           const Progress& progress, std::string_view what) {
  NodeTimes times;
  times.microseconds.assign(graph.nodes().size(), 0.0);
  times.dispatches.assign(graph.nodes().size(), 1);
  times.labels.assign(graph.nodes().size(), "");
  bool timing = false;
  // Sequential on purpose: under InterpSchedule::parallel the kernel times of nodes that run side by
  // side overlap, and a node's time would include waiting for cores the others hold.
  InterpOptions options{.compute = compute, .schedule = InterpSchedule::sequential};
  options.on_node_done = [&](std::size_t node, double seconds) {
    if (timing) times.microseconds.at(node) += seconds * 1e6;
  };
  try {
    for (int r = 0; r < o.warmup; ++r) interpret(graph, inputs, options);
    timing = true;
    for (int r = 1; r <= o.repetitions; ++r) {
      const auto start = std::chrono::steady_clock::now();
      interpret(graph, inputs, options);
      times.run_microseconds += since_us(start);
      progress.repetition(what, r, o.repetitions);
    }
  } catch (const Error& e) {
    throw ToolError(kRunFailed, "graph '" + graph.name() + "' on " + std::string(what) + " failed: " + e.what());
  } catch (const std::bad_alloc&) {
    throw ToolError(kOutOfMemory, "graph '" + graph.name() + "' on " + std::string(what) + " ran out of host memory" +
                                      largest_value_note(graph, compute == ComputeType::f64 ? 8 : 4));
  }
  for (double& t : times.microseconds) t /= o.repetitions;
  times.run_microseconds /= o.repetitions;
  return times;
}

NodeTimes time_vulkan(const Graph& graph, const TensorMap& inputs, const BenchOptions& o, const Progress& progress,
                      const std::shared_ptr<vk::Context>& context) {
  Session session = open_session(graph, Backend::vulkan, context, /*timestamps=*/true);
  NodeTimes times;
  times.microseconds.assign(graph.nodes().size(), 0.0);
  times.dispatches.assign(graph.nodes().size(), 0);
  times.labels.assign(graph.nodes().size(), "");
  for (int r = 0; r < o.warmup; ++r) run_or_throw(session, inputs, "warm-up run");
  for (int r = 1; r <= o.repetitions; ++r) {
    const auto start = std::chrono::steady_clock::now();
    run_or_throw(session, inputs, "timed run");
    times.run_microseconds += since_us(start);
    for (const vk::DispatchTiming& d : session.timings()) {
      const auto node = static_cast<std::size_t>(d.node);
      times.microseconds.at(node) += d.microseconds;
      if (r == 1) {
        ++times.dispatches[node];
        if (d.op != op_name(graph.node(d.node).op)) times.labels[node] = d.op;
      }
    }
    progress.repetition("vulkan", r, o.repetitions);
  }
  for (double& t : times.microseconds) t /= o.repetitions;
  times.run_microseconds /= o.repetitions;
  return times;
}

std::string fixed(double value) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.3f", value);
  return buffer;
}

std::string now_iso8601() {
  const std::time_t t = std::time(nullptr);
  char buffer[64];
  std::strftime(buffer, sizeof buffer, "%Y-%m-%dT%H:%M:%S%z", std::localtime(&t));
  return buffer;
}

std::string host_name() {
  char buffer[256] = {};
  return gethostname(buffer, sizeof buffer - 1) == 0 ? buffer : "";
}

int bench(const BenchOptions& o) {
  const Progress progress("bench", o.quiet);
  const Backend backend = parse_backend(o.backend.backend);
  progress.stage("reading " + o.graph);
  const Graph graph = load_graph(o.graph);
  const PreparedInputs inputs = prepare_inputs(graph, o.inputs);
  std::string device = "cpu";
  NodeTimes ours;
  if (backend == Backend::vulkan) {
    const std::shared_ptr<vk::Context> context = open_vulkan(o.backend.device);
    device = context->info().summary();
    progress.stage("device " + device);
    ours = time_vulkan(graph, inputs.tensors, o, progress, context);
  } else {
    ours = time_interpreter(graph, inputs.tensors, backend == Backend::interp_f64 ? ComputeType::f64 : ComputeType::f32,
                            o, progress, o.backend.backend);
  }
  const NodeTimes oracle = time_interpreter(graph, inputs.tensors, ComputeType::f64, o, progress, "f64 oracle");

  nlohmann::ordered_json report;
  report["context"] = {{"date", now_iso8601()},
                       {"host_name", host_name()},
                       {"executable", "tg bench"},
                       {"num_cpus", std::thread::hardware_concurrency()},
                       {"library_build_type", "release"},
                       {"graph", o.graph},
                       {"graph_name", graph.name()},
                       {"backend", o.backend.backend},
                       {"device", device},
                       {"oracle", "interp_f64"},
                       {"repetitions", o.repetitions},
                       {"warmup", o.warmup},
                       {"nodes", graph.nodes().size()},
                       {"run_real_time", ours.run_microseconds},
                       {"oracle_run_real_time", oracle.run_microseconds},
                       {"time_unit", "us"}};
  nlohmann::ordered_json benchmarks = nlohmann::ordered_json::array();
  if (!o.quiet) {
    std::fprintf(stderr, "%6s  %-18s %-22s %14s %14s %8s\n", "node", "op", "output",
                 (o.backend.backend + " us").c_str(), "f64 oracle us", "speedup");
  }
  for (std::size_t n = 0; n < graph.nodes().size(); ++n) {
    const Node& node = graph.nodes()[n];
    const std::string op(op_name(node.op));
    const std::string name = o.backend.backend + "/%" + std::to_string(n) + "_" + op;
    nlohmann::ordered_json entry = {{"name", name},
                                    {"family_index", n},
                                    {"per_family_instance_index", 0},
                                    {"run_name", name},
                                    {"run_type", "iteration"},
                                    {"repetitions", 1},
                                    {"repetition_index", 0},
                                    {"threads", 1},
                                    {"iterations", o.repetitions},
                                    {"real_time", ours.microseconds[n]},
                                    {"cpu_time", ours.microseconds[n]},
                                    {"time_unit", "us"},
                                    {"node", n},
                                    {"op", op},
                                    {"output_type", graph.type(node.output).to_string()},
                                    {"oracle_real_time", oracle.microseconds[n]}};
    if (backend == Backend::vulkan) {
      entry["dispatches"] = ours.dispatches[n];
      if (!ours.labels[n].empty()) entry["dispatch_label"] = ours.labels[n];
    }
    benchmarks.push_back(std::move(entry));
    if (!o.quiet) {
      // speedup: the oracle's time over the backend's ("-": no dispatch of its own on Vulkan).
      const std::string shown = ours.dispatches[n] == 0 ? "-" : fixed(ours.microseconds[n]);
      const std::string ratio =
          ours.microseconds[n] > 0 ? fixed(oracle.microseconds[n] / ours.microseconds[n]) + "x" : "-";
      std::fprintf(stderr, "%6s  %-18s %-22s %14s %14s %8s%s\n", ("%" + std::to_string(n)).c_str(), op.c_str(),
                   graph.type(node.output).to_string().c_str(), shown.c_str(), fixed(oracle.microseconds[n]).c_str(),
                   ratio.c_str(), ours.labels[n].empty() ? "" : ("  " + ours.labels[n]).c_str());
    }
  }
  if (!o.quiet) {
    std::fprintf(stderr, "whole run (wall, mean of %d): %s us on %s, %s us on the f64 oracle\n", o.repetitions,
                 fixed(ours.run_microseconds).c_str(), o.backend.backend.c_str(),
                 fixed(oracle.run_microseconds).c_str());
  }
  report["benchmarks"] = std::move(benchmarks);
  const std::string text = report.dump(2) + "\n";
  if (o.json.empty() || o.json == "-") {
    std::cout << text;
  } else {
    std::ofstream file(o.json, std::ios::binary | std::ios::trunc);
    file << text;
    if (!file.flush()) throw ToolError(kBadInput, "--json '" + o.json + "': cannot be written");
    progress.stage("wrote " + o.json);
  }
  return kOk;
}

}  // namespace

Command add_bench_command(CLI::App& tool) {
  auto o = std::make_shared<BenchOptions>();
  CLI::App* app = tool.add_subcommand(
      "bench", "Per-node times on a backend next to the f64 oracle's (Google Benchmark JSON, a table on stderr)");
  app->add_option("GRAPH", o->graph, "graph text file")->required();
  add_backend_options(*app, o->backend);
  add_input_options(*app, o->inputs);
  app->add_option("-r,--repetitions", o->repetitions, "timed runs (times are their mean)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app->add_option("--warmup", o->warmup, "untimed runs first")->capture_default_str()->check(CLI::NonNegativeNumber);
  app->add_option("--json", o->json, "write the JSON here instead of stdout ('-': stdout)");
  app->add_flag("-q,--quiet", o->quiet, "no progress lines and no table on stderr");
  return {app, [o] { return bench(*o); }};
}

}  // namespace tg::cli
