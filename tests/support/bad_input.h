#pragma once
// The bad-input catalogue (issue 15): one table per layer (tests/unit/bad_input_*.cpp,
// tests/vk/vk_bad_input_test.cpp), one GoogleTest test per entry. Every entry is a real bad input
// that a user can make; the runner checks that
//   - the call refuses it with exactly the expected tg::Error subclass (not a base class, not a
//     std::out_of_range leaking from a container, not a crash), or, for the calls that report
//     instead of throwing (Session::run, Training::step, Forward::run), with a failed result of the
//     expected kind;
//   - the message holds every fragment that identifies the mistake (the op, the input's name, the
//     shapes, the file, the line and column), so a user can act on it;
//   - whatever state the call could touch (a session's params, a training's params, optimizer state
//     and step counter, the files in a directory) is bit for bit what it was before.
//
// Adding an entry: append a BadInputCase to the layer's table: a name (letters, digits, '_'), a
// setup that builds fresh state and returns the bad call (and a state snapshot where there is
// state), the expected error (throws<E>() or reports("kind")) and the message fragments.
#include <cxxabi.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <bit>
#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <iterator>
#include <memory>
#include <ostream>
#include <set>
#include <sstream>
#include <string>
#include <typeindex>
#include <typeinfo>
#include <utility>
#include <vector>

#include "tensorgrad/interp/host_tensor.h"
#include "tensorgrad/ir/error.h"

namespace tg::testing {

// What a call that reports instead of throwing returned: the runner treats a failed result as if
// this had been thrown. Only the catalogue throws it.
class ReportedFailure : public std::exception {
 public:
  ReportedFailure(std::string kind, std::string message) : kind_(std::move(kind)), message_(std::move(message)) {}
  const char* what() const noexcept override { return message_.c_str(); }
  const std::string& kind() const { return kind_; }

 private:
  std::string kind_;
  std::string message_;
};

// For Session::run, Training::step and Forward::run results: throws ReportedFailure when the call
// failed; returns when it completed (which the runner then reports as "accepted").
template <class Result>
void throw_if_failed(const Result& result) {
  if (result.ok()) return;
  throw ReportedFailure(result.failure().kind, result.failure().message);
}

inline std::string demangled(const std::type_info& type) {
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> name(abi::__cxa_demangle(type.name(), nullptr, nullptr, &status), std::free);
  return status == 0 && name ? std::string(name.get()) : std::string(type.name());
}

// The refusal a case expects: an exception of exactly one class, or a failed result of one kind.
struct Expected {
  std::type_index type = typeid(void);
  std::string type_name;
  std::string kind;  // only for ReportedFailure
  std::string describe() const { return kind.empty() ? type_name : "a failed result of kind \"" + kind + "\""; }
};
template <class E>
Expected throws() {
  static_assert(std::is_base_of_v<Error, E>, "every refusal must be a tg::Error");
  return {typeid(E), demangled(typeid(E)), ""};
}
inline Expected reports(std::string kind) { return {typeid(ReportedFailure), "", std::move(kind)}; }

// The bad call and, where the call can touch state, a snapshot of that state. The runner takes the
// snapshot before and after the call; the two must be equal.
struct BadCall {
  std::function<void()> call;
  std::function<std::string()> state;
};

struct BadInputCase {
  std::string name;                // the test's name: letters, digits and '_'
  std::function<BadCall()> setup;  // builds fresh state for this case (run once per test)
  Expected expected;
  std::vector<std::string> fragments;  // each must appear in the message
  // Optional further checks on the caught exception (a ShapeError's call site, a ParseError's line).
  std::function<void(const std::exception&)> also = {};
};

// A case without state: the setup just returns the call.
inline std::function<BadCall()> stateless(std::function<void()> call) {
  return [call = std::move(call)] { return BadCall{call, {}}; };
}

inline void PrintTo(const BadInputCase& c, std::ostream* os) { *os << c.name << " -> " << c.expected.describe(); }

// ---- state snapshots: exact bits, readable enough to spot the difference ----

inline std::string bits(const HostTensor& t) {
  std::ostringstream out;
  out << t.type.to_string() << " " << t.size() << " values:";
  for (double v : t.to_f64()) out << " " << std::hex << std::bit_cast<std::uint64_t>(v) << std::dec;
  return out.str();
}
inline std::string bits(const TensorMap& tensors) {
  std::string out;
  for (const auto& [name, t] : tensors) out += name + " = " + bits(t) + "\n";
  return out;
}
inline std::string file_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "<no file " + path.string() + ">";
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}
// Every entry of a directory (name and size) and every regular file's bytes.
inline std::string directory_state(const std::filesystem::path& dir) {
  std::set<std::string> names;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) names.insert(entry.path().filename().string());
  std::string out;
  for (const std::string& name : names) {
    const std::filesystem::path p = dir / name;
    out += name + (std::filesystem::is_regular_file(p) ? ": " + file_bytes(p) : std::string(" (not a file)")) + "\n";
  }
  return out;
}

// A scratch directory per test under the system's temp directory, removed afterwards.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& tag) {
    const auto* test = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string name = "tg_bad_input_" + tag + "_" + std::to_string(::getpid());
    if (test) name += "_" + std::string(test->name());
    for (char& c : name)
      if (c == '/') c = '_';
    path_ = std::filesystem::temp_directory_path() / name;
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

// ---- the runner ----

inline void check_refusal(const BadInputCase& c, const std::exception& e) {
  const std::type_index got = typeid(e);
  const std::string message = e.what();
  if (got != c.expected.type) {
    ADD_FAILURE() << "refused with " << demangled(typeid(e)) << ", expected " << c.expected.describe()
                  << "; message: " << message;
    return;
  }
  if (const auto* reported = dynamic_cast<const ReportedFailure*>(&e);
      reported && reported->kind() != c.expected.kind) {
    ADD_FAILURE() << "failed with kind \"" << reported->kind() << "\", expected " << c.expected.describe()
                  << "; message: " << message;
  }
  for (const std::string& fragment : c.fragments) {
    EXPECT_NE(message.find(fragment), std::string::npos) << "the message lacks \"" << fragment << "\": " << message;
  }
  if (c.also) c.also(e);
}

inline void run_bad_input(const BadInputCase& c) {
  ASSERT_TRUE(c.setup) << c.name << " has no setup";
  const BadCall bad = c.setup();
  const std::string before = bad.state ? bad.state() : std::string();
  try {
    bad.call();
    ADD_FAILURE() << "the bad input was accepted; expected " << c.expected.describe();
  } catch (const std::exception& e) {
    check_refusal(c, e);
  } catch (...) {
    ADD_FAILURE() << "threw something that is not a std::exception; expected " << c.expected.describe();
  }
  if (bad.state) {
    const std::string after = bad.state();
    if (after != before) {
      std::size_t at = 0;
      while (at < before.size() && at < after.size() && before[at] == after[at]) ++at;
      ADD_FAILURE() << "the refused call changed state (first difference at byte " << at << ")\nbefore:\n"
                    << before.substr(0, 2000) << "\nafter:\n"
                    << after.substr(0, 2000);
    }
  }
}

inline std::string case_name(const ::testing::TestParamInfo<BadInputCase>& info) { return info.param.name; }

// Names must be unique within a table (GoogleTest refuses duplicates when it registers them).
inline std::vector<BadInputCase> checked_table(std::vector<BadInputCase> cases) {
  std::set<std::string> seen;
  for (const BadInputCase& c : cases) {
    bool ok = !c.name.empty() && seen.insert(c.name).second;
    for (char ch : c.name) ok = ok && (std::isalnum(static_cast<unsigned char>(ch)) || ch == '_');
    if (!ok) {
      std::cerr << "bad-input catalogue: case name '" << c.name << "' is empty, repeated or not an identifier\n";
      std::abort();
    }
  }
  return cases;
}

}  // namespace tg::testing

// One parameterized suite per table: BadInput/<Suite>.IsRefused/<case name>.
#define TG_BAD_INPUT_SUITE(Suite, table_fn)                                                                \
  class Suite : public ::testing::TestWithParam<::tg::testing::BadInputCase> {};                           \
  TEST_P(Suite, IsRefused) { ::tg::testing::run_bad_input(GetParam()); }                                   \
  INSTANTIATE_TEST_SUITE_P(BadInput, Suite, ::testing::ValuesIn(::tg::testing::checked_table(table_fn())), \
                           ::tg::testing::case_name)
