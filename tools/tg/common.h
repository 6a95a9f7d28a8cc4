#pragma once
// What the subcommands of `tg` share: reading a graph file, preparing inputs (from a safetensors
// file, the rest drawn at random), opening a backend, running it with errors turned into exit
// codes, summarising a tensor, and the progress lines on stderr.
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "exit_codes.h"
#include "tensorgrad/interp/host_tensor.h"
#include "tensorgrad/ir/graph.h"
#include "tensorgrad/runtime/session.h"
#include "tensorgrad/vk/context.h"

namespace CLI {
class App;
}

namespace tg::cli {

// Progress of a long run on stderr, one line per stage ("tg check: [0.41 s] oracle done"); silent
// with --quiet. Results go to stdout, so `tg run ... > out.txt` keeps them apart.
class Progress {
 public:
  Progress(std::string command, bool quiet);
  void stage(std::string_view what) const;
  // Repetition `done` of `total`: on a terminal one line rewritten in place, elsewhere a line at
  // each tenth, so a log holds at most ~10 lines per loop.
  void repetition(std::string_view what, int done, int total) const;
  bool quiet() const { return quiet_; }

 private:
  std::string command_;
  bool quiet_;
  bool terminal_;
  std::chrono::steady_clock::time_point start_;
};

// Reads and parses a graph text file (tensorgrad/ir/text.h). ToolError(kBadInput) naming the file
// when it is missing, not a regular file, unreadable, or not a valid graph (with the parser's line
// and column).
Graph load_graph(const std::string& path);

// Makes every numeric option of `tool` and its subcommands take only plain decimal numbers, so a
// value means what a reader of the command line thinks: integers are digits with an optional '-'
// (none on an unsigned option), in range (no octal "010", hex "0x10", wrap of "-1" or saturation
// of 2^64 as CLI11's strtoull/strtoll would give); floating values are finite decimals (no "nan",
// "inf", or 1e400 overflowing to inf). Anything else is a usage error (exit 2) naming the option
// and the value. Called once by main() after every subcommand has added its options, so options
// added later in any subcommand are covered too.
void require_plain_numbers(CLI::App& tool);

// "vulkan", "interp_f32", "interp_f64": the names --backend takes.
std::vector<std::string> backend_names();
Backend parse_backend(std::string_view name);

// Where a subcommand's inputs come from (docs/cli.md, "Inputs").
struct InputOptions {
  std::string file;              // --inputs: a safetensors file holding some or all inputs
  std::uint64_t seed = 0;        // --seed: the draw of the inputs the file does not hold
  std::vector<double> f32_range  // --f32-range LO HI: where f32 inputs are drawn (finite as floats, LO <= HI)
      {-2.0, 2.0};
};
void add_input_options(CLI::App& command, InputOptions& options);

struct PreparedInputs {
  TensorMap tensors;               // every graph input
  std::vector<std::string> drawn;  // the names drawn at random, in graph order
};
// Loads options.file (each tensor must name a graph input and have its type: ToolError(kBadInput)
// otherwise) and draws every input it lacks. An input too large to allocate is
// ToolError(kOutOfMemory) naming it and the bytes it needs.
PreparedInputs prepare_inputs(const Graph& graph, const InputOptions& options);

// The values an i32 input is drawn from, inclusive: [0, extent - 1] of every index it feeds (through
// layout ops too), else [0, 5] like the ops' own samples.
std::pair<std::int64_t, std::int64_t> i32_draw_range(const Graph& graph, ValueId value);
// One input drawn from its own stream (seed and name), so adding a tensor to --inputs leaves the
// other draws as they were: f32 uniform in [lo, hi), bool 0 or 1 with equal odds, i32 uniform in
// i32_draw_range. The tensor is in its dtype's own storage (float, int32, byte).
HostTensor draw_input(const Graph& graph, const GraphInput& input, std::uint64_t seed, double lo, double hi);

// --backend and --device on a subcommand.
struct BackendOptions {
  std::string backend;
  std::string device;  // Vulkan: an index or a name substring (ContextOptions::device); empty: the default
};
void add_backend_options(CLI::App& command, BackendOptions& options, bool required = true);

// The Vulkan device, or ToolError(kBackendUnavailable) saying why there is none.
std::shared_ptr<vk::Context> open_vulkan(const std::string& device);
// A session of `graph` on the backend (null context: opened from options.device when Vulkan).
// ToolError(kBackendUnavailable) when the backend cannot compile the graph.
Session open_session(const Graph& graph, Backend backend, const std::shared_ptr<vk::Context>& context,
                     bool timestamps = false);
// One run; a failed run becomes a ToolError with the failure's kind mapped to an exit code.
TensorMap run_or_throw(Session& session, const TensorMap& inputs, std::string_view what);
// The f64 oracle on the interpreter (with every value kept when asked, for the tolerance scale).
std::vector<HostTensor> run_oracle(const Graph& graph, const TensorMap& inputs, TensorMap& outputs,
                                   bool keep_all_values);

// What running out of host memory on `graph` is about: its largest value, " (its largest value,
// %3 = broadcast_to : f32[...], needs N bytes at B bytes an element)", for the error message.
std::string largest_value_note(const Graph& graph, std::size_t bytes_per_element);
// "1.00 PiB (1125899906842624 bytes)".
std::string bytes_string(std::uint64_t bytes);

// The exit code for an error the library threw (typed errors by kind, anything else kRunFailed).
ExitCode exit_code_for(const std::exception& error);

// "name  f32[2,3]  min -1.5 max 2 mean 0.25 non-finite 0  values [..]" (at most `shown` values).
std::string summarize(std::string_view name, const HostTensor& tensor, int shown = 6);
// The shortest form that reads back to the same double, or with as_float to the same float (the
// f32 backends' results print as "0.1", not "0.100000001490116"); "nan", "inf", "-inf".
std::string format_number(double value, bool as_float = false);
// The multi-index of flat element `flat` in row-major `shape`: "[1,2]" ("[]" for a scalar).
std::string index_string(const Shape& shape, std::int64_t flat);

}  // namespace tg::cli
