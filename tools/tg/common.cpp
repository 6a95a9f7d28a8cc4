#include "common.h"

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <new>
#include <sstream>
#include <type_traits>

#include "tensorgrad/interp/interpreter.h"
#include "tensorgrad/ir/error.h"
#include "tensorgrad/ir/text.h"
#include "tensorgrad/train/safetensors.h"
#include "tensorgrad/vk/error.h"

namespace tg::cli {

Progress::Progress(std::string command, bool quiet)
    : command_(std::move(command)),
      quiet_(quiet),
      terminal_(isatty(STDERR_FILENO) != 0),
      start_(std::chrono::steady_clock::now()) {}

void Progress::stage(std::string_view what) const {
  if (quiet_) return;
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  std::fprintf(stderr, "tg %s: [%.2f s] %.*s\n", command_.c_str(), seconds, static_cast<int>(what.size()), what.data());
}

void Progress::repetition(std::string_view what, int done, int total) const {
  if (quiet_ || total <= 0) return;
  if (terminal_) {
    std::fprintf(stderr, "\rtg %s: %.*s %d/%d", command_.c_str(), static_cast<int>(what.size()), what.data(), done,
                 total);
    if (done == total) std::fprintf(stderr, "\n");
    return;
  }
  const int step = std::max(1, total / 10);
  if (done % step == 0 || done == total) {
    stage(std::string(what) + " " + std::to_string(done) + "/" + std::to_string(total));
  }
}

namespace {

// Graph files are text; anything past this is refused before it is read (the parser would take
// minutes and the interpreter could not hold the graph's values anyway).
constexpr std::uintmax_t kMaxGraphFileBytes = std::uintmax_t{1} << 30;

std::string read_text_file(const std::string& path, std::string_view what) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  if (ec || !fs::exists(status)) throw ToolError(kBadInput, std::string(what) + " '" + path + "': no such file");
  if (!fs::is_regular_file(status))
    throw ToolError(kBadInput, std::string(what) + " '" + path + "': not a regular file");
  const std::uintmax_t bytes = fs::file_size(path, ec);
  if (ec || bytes > kMaxGraphFileBytes) {
    throw ToolError(kBadInput,
                    std::string(what) + " '" + path +
                        "': " + (ec ? "size unreadable" : "larger than 1 GiB (" + std::to_string(bytes) + " bytes)"));
  }
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  if (!in && !in.eof()) throw ToolError(kBadInput, std::string(what) + " '" + path + "': cannot be read");
  return text.str();
}

}  // namespace

Graph load_graph(const std::string& path) {
  const std::string text = read_text_file(path, "graph file");
  try {
    return parse_graph(text);
  } catch (const Error& e) {
    throw ToolError(kBadInput, "graph file '" + path + "': " + e.what());
  }
}

namespace {

constexpr std::string_view kSigned64Range = "[-9223372036854775808, 9223372036854775807]";
constexpr std::string_view kUnsigned64Range = "[0, 18446744073709551615]";

// The sign an option demands: CLI11's NonNegativeNumber and PositiveNumber checks, read from the
// option's type name ("INT:POSITIVE"), are made here first so that their message is readable.
enum class Sign { any, non_negative, positive };

Sign sign_of(const std::string& full_type) {
  if (full_type.find(":NONNEGATIVE") != std::string::npos) return Sign::non_negative;
  if (full_type.find(":POSITIVE") != std::string::npos) return Sign::positive;
  return Sign::any;
}

std::string sign_problem(const std::string& value, double parsed, Sign sign) {
  if (sign == Sign::non_negative && parsed < 0) return "'" + value + "' is negative: a value >= 0 is needed";
  if (sign == Sign::positive && !(parsed > 0)) return "'" + value + "' is not positive: a value > 0 is needed";
  return {};
}

// CLI11 reads integers with strtoll/strtoull in base 0: "010" is eight, "0x10" sixteen, "-1" wraps
// to 2^64 - 1 on an unsigned option and anything past 64 bits saturates. This transform, run first,
// takes only decimal digits (a '-' only where signed), refuses what does not fit in 64 bits, and
// hands CLI11 the canonical digits; CLI11's own conversion then refuses what does not fit the
// option's narrower type.
template <typename Integer>
std::string plain_integer(std::string& value, Sign sign) {
  Integer parsed{};
  const char* end = value.data() + value.size();
  const auto [stop, ec] = std::from_chars(value.data(), end, parsed, 10);
  const std::string_view range = std::is_signed_v<Integer> ? kSigned64Range : kUnsigned64Range;
  if (value.empty() || stop != end || (ec != std::errc() && ec != std::errc::result_out_of_range)) {
    return "'" + value + "' is not a decimal integer in " + std::string(range);
  }
  if (ec == std::errc::result_out_of_range) return "'" + value + "' is out of the range " + std::string(range);
  if (std::string problem = sign_problem(value, static_cast<double>(parsed), sign); !problem.empty()) return problem;
  value = std::to_string(parsed);
  return {};
}

// CLI11 reads floating values with strtold: "nan", "inf", "0x1p3" and 1e400 (inf) all pass. This
// transform takes only finite decimal numbers and hands CLI11 their shortest exact form.
std::string plain_float(std::string& value, Sign sign) {
  std::string_view text = value;
  if (text.starts_with('+')) text.remove_prefix(1);  // from_chars takes no '+'
  double parsed = 0;
  const auto [stop, ec] = std::from_chars(text.data(), text.data() + text.size(), parsed);
  if (text.empty() || stop != text.data() + text.size() ||
      (ec != std::errc() && ec != std::errc::result_out_of_range)) {
    return "'" + value + "' is not a decimal number";
  }
  if (ec == std::errc::result_out_of_range) return "'" + value + "' is out of the range of a double";
  if (!std::isfinite(parsed)) return "'" + value + "' is not a finite number";
  if (std::string problem = sign_problem(value, parsed, sign); !problem.empty()) return problem;
  value = format_number(parsed);
  return {};
}

// --f32-range bounds: f32 inputs are drawn as floats, so each bound must be finite as a float too
// (1e39 would draw inf, which the run then blames on the graph).
std::string finite_as_float(const std::string& value) {
  double parsed = 0;
  const auto [stop, ec] = std::from_chars(value.data(), value.data() + value.size(), parsed);
  if (ec != std::errc() || stop != value.data() + value.size() || !std::isfinite(static_cast<float>(parsed))) {
    return "'" + value + "' is not finite as a float (f32 inputs are drawn as floats: each bound within +-" +
           format_number(std::numeric_limits<float>::max(), true) + ")";
  }
  return {};
}

void require_plain_numbers_on(CLI::App& app) {
  for (CLI::Option* option : app.get_options()) {
    const std::string full_type = option->get_type_name();
    const std::string type = full_type.substr(0, full_type.find(':'));
    const Sign sign = sign_of(full_type);
    if (type == "INT") {
      option->transform(CLI::Validator([sign](std::string& v) { return plain_integer<std::int64_t>(v, sign); }, ""));
    } else if (type == "UINT") {
      option->transform(CLI::Validator([sign](std::string& v) { return plain_integer<std::uint64_t>(v, sign); }, ""));
    } else if (type == "FLOAT") {
      option->transform(CLI::Validator([sign](std::string& v) { return plain_float(v, sign); }, ""));
    }
  }
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) require_plain_numbers_on(*sub);
}

}  // namespace

void require_plain_numbers(CLI::App& tool) { require_plain_numbers_on(tool); }

std::vector<std::string> backend_names() { return {"vulkan", "interp_f32", "interp_f64"}; }

Backend parse_backend(std::string_view name) {
  if (name == "vulkan") return Backend::vulkan;
  if (name == "interp_f64") return Backend::interp_f64;
  if (name == "interp_f32") return Backend::interp_f32;
  throw ToolError(kUsage, "unknown backend '" + std::string(name) + "' (vulkan, interp_f32 or interp_f64)");
}

void add_input_options(CLI::App& command, InputOptions& options) {
  command.add_option("--inputs", options.file,
                     "safetensors file with some or all graph inputs (each of its graph type); the rest are drawn");
  command.add_option("--seed", options.seed, "seed of the drawn inputs")->capture_default_str();
  command.add_option("--f32-range", options.f32_range, "LO HI: f32 inputs are drawn uniformly from [LO, HI)")
      ->expected(2)
      ->capture_default_str()
      ->check(CLI::Validator(finite_as_float, ""));
}

void add_backend_options(CLI::App& command, BackendOptions& options, bool required) {
  auto* backend = command.add_option("--backend", options.backend, "vulkan, interp_f32 or interp_f64")
                      ->check(CLI::IsMember(backend_names()));
  if (required) {
    backend->required();
  } else {
    options.backend = "interp_f32";
    backend->capture_default_str();
  }
  command.add_option("--device", options.device,
                     "Vulkan device: an index or a name substring from `tg devices` (default: TG_VK_DEVICE, "
                     "else the best device)");
}

PreparedInputs prepare_inputs(const Graph& graph, const InputOptions& options) {
  PreparedInputs prepared;
  if (!options.file.empty()) {
    SafetensorsFile file;
    try {
      file = load_safetensors(options.file);
    } catch (const Error& e) {
      // The library's message names the file and the problem already.
      throw ToolError(kBadInput, std::string("inputs file: ") + e.what());
    }
    for (auto& [name, tensor] : file.tensors) {
      const std::optional<ValueId> value = graph.find_input(name);
      if (!value) {
        std::string names;
        for (const GraphInput& in : graph.inputs()) names += (names.empty() ? "" : ", ") + in.name;
        throw ToolError(kBadInput, "inputs file '" + options.file + "': tensor '" + name +
                                       "' is not an input of graph '" + graph.name() + "' (its inputs: " + names + ")");
      }
      const TensorType& expected = graph.type(*value);
      if (tensor.type != expected) {
        throw ToolError(kBadInput, "inputs file '" + options.file + "': input '" + name + "' is " +
                                       tensor.type.to_string() + " (stored as " + file.stored_dtypes[name] +
                                       "), the graph takes " + expected.to_string());
      }
      prepared.tensors.emplace(name, std::move(tensor));
    }
  }
  const double lo = options.f32_range.at(0), hi = options.f32_range.at(1);
  if (!(lo <= hi) || !std::isfinite(static_cast<float>(lo)) || !std::isfinite(static_cast<float>(hi))) {
    throw ToolError(kUsage, "--f32-range: need LO <= HI, both finite as floats, got " + format_number(lo) + " " +
                                format_number(hi));
  }
  for (const GraphInput& input : graph.inputs()) {
    if (prepared.tensors.contains(input.name)) continue;
    try {
      prepared.tensors.emplace(input.name, draw_input(graph, input, options.seed, lo, hi));
    } catch (const std::bad_alloc&) {
      const TensorType& type = graph.type(input.value);
      const std::uint64_t bytes = static_cast<std::uint64_t>(type.size()) * dtype_bytes(type.dtype);
      throw ToolError(kOutOfMemory, "cannot draw input '" + input.name + "' (" + type.to_string() + "): its " +
                                        std::to_string(type.size()) + " elements need " + bytes_string(bytes) +
                                        ", more than this host could allocate");
    }
    prepared.drawn.push_back(input.name);
  }
  try {
    validate_inputs(graph, prepared.tensors);
  } catch (const Error& e) {
    throw ToolError(kBadInput,
                    (options.file.empty() ? std::string() : "inputs file '" + options.file + "': ") + e.what());
  }
  return prepared;
}

std::shared_ptr<vk::Context> open_vulkan(const std::string& device) {
  try {
    vk::ContextOptions options;
    if (!device.empty()) options.device = device;
    return vk::Context::create(options);
  } catch (const Error& e) {
    throw ToolError(kBackendUnavailable, std::string("backend vulkan unavailable: ") + e.what());
  }
}

Session open_session(const Graph& graph, Backend backend, const std::shared_ptr<vk::Context>& context,
                     bool timestamps) {
  try {
    return Session(graph, {.backend = backend, .vk_context = context, .vk_timestamps = timestamps});
  } catch (const Error& e) {
    throw ToolError(exit_code_for(e), "cannot compile graph '" + graph.name() + "' for " +
                                          std::string(backend_name(backend)) + ": " + e.what());
  }
}

TensorMap run_or_throw(Session& session, const TensorMap& inputs, std::string_view what) {
  RunResult result = session.run(inputs);
  if (result.ok()) return result.outputs();
  const RunFailure& failure = result.failure();
  const ExitCode code = failure.kind == "input"    ? kBadInput
                        : failure.kind == "device" ? kBackendUnavailable
                        : failure.kind == "memory" ? kOutOfMemory
                                                   : kRunFailed;
  const std::string note =
      code == kOutOfMemory ? largest_value_note(session.graph(), session.backend() == Backend::interp_f64 ? 8 : 4) : "";
  throw ToolError(code, std::string(what) + " on " + std::string(backend_name(session.backend())) + " failed (" +
                            failure.kind + "): " + failure.message + note);
}

std::vector<HostTensor> run_oracle(const Graph& graph, const TensorMap& inputs, TensorMap& outputs,
                                   bool keep_all_values) {
  try {
    InterpResult result = interpret(graph, inputs, {.compute = ComputeType::f64, .keep_all_values = keep_all_values});
    outputs = std::move(result.outputs);
    return std::move(result.values);
  } catch (const Error& e) {
    throw ToolError(kRunFailed, "graph '" + graph.name() + "' on the f64 oracle failed: " + e.what());
  } catch (const std::bad_alloc&) {
    throw ToolError(kOutOfMemory, "graph '" + graph.name() + "' on the f64 oracle ran out of host memory" +
                                      largest_value_note(graph, 8));
  }
}

std::string largest_value_note(const Graph& graph, std::size_t bytes_per_element) {
  std::string largest;
  std::int64_t most = -1;
  const auto consider = [&](ValueId value, const std::string& what) {
    const TensorType& type = graph.type(value);
    if (type.size() > most) {
      most = type.size();
      largest = what + " : " + type.to_string();
    }
  };
  for (const GraphInput& in : graph.inputs()) consider(in.value, "input '" + in.name + "'");
  for (std::size_t n = 0; n < graph.nodes().size(); ++n) {
    const Node& node = graph.nodes()[n];
    consider(node.output, "%" + std::to_string(n) + " = " + std::string(op_name(node.op)));
  }
  if (most < 0) return "";
  return " (its largest value, " + largest + ", alone needs " +
         bytes_string(static_cast<std::uint64_t>(most) * bytes_per_element) + " at " +
         std::to_string(bytes_per_element) + " bytes an element)";
}

std::string bytes_string(std::uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024 && unit < 6) {
    value /= 1024;
    ++unit;
  }
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.2f %s (%llu bytes)", value, units[unit],
                static_cast<unsigned long long>(bytes));
  return buffer;
}

ExitCode exit_code_for(const std::exception& error) {
  if (dynamic_cast<const vk::NoDeviceError*>(&error) || dynamic_cast<const vk::DeviceError*>(&error) ||
      dynamic_cast<const vk::LimitError*>(&error) || dynamic_cast<const CompileError*>(&error)) {
    return kBackendUnavailable;
  }
  if (dynamic_cast<const ParseError*>(&error) || dynamic_cast<const VerifyError*>(&error) ||
      dynamic_cast<const ShapeError*>(&error) || dynamic_cast<const SafetensorsError*>(&error)) {
    return kBadInput;
  }
  return kRunFailed;
}

std::string format_number(double value, bool as_float) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  char buffer[64];
  const auto end = as_float ? std::to_chars(buffer, buffer + sizeof buffer, static_cast<float>(value)).ptr
                            : std::to_chars(buffer, buffer + sizeof buffer, value).ptr;
  return std::string(buffer, end);
}

std::string index_string(const Shape& shape, std::int64_t flat) {
  std::vector<std::int64_t> index(shape.size());
  for (std::size_t a = shape.size(); a-- > 0;) {
    const std::int64_t dim = std::max<std::int64_t>(shape[a], 1);
    index[a] = flat % dim;
    flat /= dim;
  }
  std::string out = "[";
  for (std::size_t a = 0; a < index.size(); ++a) out += (a ? "," : "") + std::to_string(index[a]);
  return out + "]";
}

std::string summarize(std::string_view name, const HostTensor& tensor, int shown) {
  const bool as_float = is_float(tensor.type.dtype);
  double low = std::numeric_limits<double>::infinity(), high = -low, sum = 0;
  std::int64_t nonfinite = 0;
  for (std::size_t i = 0; i < tensor.size(); ++i) {
    const double v = tensor.at_unchecked(i);
    if (!std::isfinite(v)) {
      ++nonfinite;
      continue;
    }
    low = std::min(low, v);
    high = std::max(high, v);
    sum += v;
  }
  std::string out = std::string(name) + "  " + tensor.type.to_string();
  const std::int64_t finite = static_cast<std::int64_t>(tensor.size()) - nonfinite;
  if (finite > 0) {
    out += "  min " + format_number(low, as_float) + "  max " + format_number(high, as_float) + "  mean " +
           format_number(sum / static_cast<double>(finite), as_float);
  }
  out += "  non-finite " + std::to_string(nonfinite) + "\n    values [";
  const std::size_t count = std::min<std::size_t>(static_cast<std::size_t>(shown), tensor.size());
  for (std::size_t i = 0; i < count; ++i) out += (i ? ", " : "") + format_number(tensor.at(i), as_float);
  if (count < tensor.size()) out += ", ... (" + std::to_string(tensor.size()) + " elements)";
  return out + "]";
}

}  // namespace tg::cli
