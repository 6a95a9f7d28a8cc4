#include "regression_writer.h"

#include <gtest/gtest.h>

#include <charconv>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>

namespace tg::testing {

namespace {

namespace fs = std::filesystem;

constexpr std::size_t kWrapColumns = 100;

std::string shortest(double v) {
  char buffer[32];
  const auto [end, ec] = std::to_chars(buffer, buffer + sizeof buffer, v);
  return ec == std::errc() ? std::string(buffer, end) : "nan";
}

// `keyword name dtype [shape] values`, wrapped onto indented continuation lines like the golden files.
std::string tensor_line(const std::string& keyword, const std::string& name, const HostTensor& t) {
  std::string out =
      keyword + " " + name + " " + std::string(dtype_name(t.type.dtype)) + " " + shape_to_string(t.type.shape);
  std::size_t column = out.size();
  for (double v : t.to_f64()) {
    const std::string token = is_float(t.type.dtype) ? shortest(v) : std::to_string(static_cast<std::int64_t>(v));
    if (column + 1 + token.size() > kWrapColumns) {
      out += "\n ";
      column = 1;
    }
    out += " " + token;
    column += 1 + token.size();
  }
  return out + "\n";
}

// Names go into the value lines as single words.
bool plain_name(const std::string& name) {
  if (name.empty() || name.front() == '#') return false;
  for (char ch : name) {
    if (ch == ' ' || ch == '\t' || ch == '=' || ch == '"' || ch == '[' || ch == '\n') return false;
  }
  return true;
}

std::uint64_t fnv1a(const std::string& text) {
  std::uint64_t h = 1469598103934665603ull;
  for (unsigned char ch : text) h = (h ^ ch) * 1099511628211ull;
  return h;
}

std::string current_test_name() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  return info ? std::string(info->test_suite_name()) + "." + info->name() : "property";
}

}  // namespace

void maybe_write_regression(const GraphCase& c) {
  const char* dir_env = std::getenv("TG_WRITE_REGRESSIONS");
  if (!dir_env || !*dir_env) return;
  std::string text = "# A failing case of " + current_test_name() + " (tests/property), shrunk by RapidCheck.\n" +
                     "# After ---: its inputs, the inputs gradient checks hold fixed, and the f64 oracle's\n"
                     "# outputs when it was written.\n" +
                     print_graph(c.graph) + "---\n";
  for (const auto& in : c.graph.inputs()) {
    if (!plain_name(in.name) || !c.inputs.contains(in.name)) return;  // not expressible; never happens for x<k>
    text += tensor_line("input", in.name, c.inputs.at(in.name));
  }
  // Inputs the gradient check must hold fixed (equal()'s operands): the runner re-checks gradients.
  for (const auto& name : c.frozen) text += "frozen " + name + "\n";
  try {
    const auto outputs = interpret(c.graph, c.inputs, {.compute = ComputeType::f64}).outputs;
    for (const auto& out : c.graph.outputs()) {
      if (plain_name(out.name)) text += tensor_line("expect", out.name, outputs.at(out.name));
    }
  } catch (const Error& e) {
    text += "# the f64 oracle failed, so no expected values: " + std::string(e.what()) + "\n";
  }

  char hash[17];
  std::snprintf(hash, sizeof hash, "%016llx", static_cast<unsigned long long>(fnv1a(text)));
  std::string stem = current_test_name();
  for (char& ch : stem) ch = (ch == '.' || ch == '/') ? '-' : ch;
  const fs::path dir(dir_env);
  const fs::path path = dir / (stem + "-" + hash + ".graph");
  std::error_code ec;
  fs::create_directories(dir, ec);
  std::ofstream(path) << text;

  // The previous (larger) counterexample of this test is superseded by this one.
  static std::map<std::string, fs::path> written;
  auto [it, first] = written.emplace(current_test_name(), path);
  if (first) {
    std::fprintf(stderr, "writing the shrunk counterexample of %s to %s\n", current_test_name().c_str(),
                 dir.string().c_str());
  } else if (it->second != path) {
    fs::remove(it->second, ec);
    it->second = path;
  }
}

}  // namespace tg::testing
