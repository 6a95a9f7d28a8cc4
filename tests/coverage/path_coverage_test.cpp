// Launch-path coverage: every path a kernel declares (tensorgrad/ir/launch_paths.h) must be reached
// by the property suites. Each property test wrote the paths its process reached to
// TG_PATH_COVERAGE_DIR (tests/support/path_coverage.h); CTest runs this test after all of them
// (fixture path_coverage) and after a clean start of that folder (fixture path_coverage_clean).
// It prints the coverage table and fails, naming each path, on any path no property test reached.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include "../support/test_scale.h"
#include "support/library.h"
#include "tensorgrad/ir/launch_paths.h"
#include "tensorgrad/vk/device.h"
#include "tensorgrad/vk/executor.h"

namespace tg {
namespace {

// The kernels' files hold the LaunchPath declarations; a static library links a file only when
// something refers to it. Taking these addresses in code that runs (volatile: the compiler may not
// drop them) pulls in the interpreter's and the Vulkan executor's kernel tables, so every declared
// path is known here.
void link_every_kernel() {
  volatile auto interpret_fn = &interpret;
  volatile auto plan_fn = &vk::plan_memory;  // the kernel table
  volatile auto run_fn = &vk::Program::run;  // the executor's recording: its per-shader grid paths
  (void)interpret_fn;
  (void)plan_fn;
  (void)run_fn;
}

// Paths the property suites do not reach yet, each with the reason (tests/coverage/known_gaps.txt:
// "backend/kernel/path  reason" per line, # comments). A listed path that stays unreached is
// reported, not failed; one that is reached is reported for removal; a listed path that is not
// declared fails (the list must not go stale).
std::map<std::string, std::string> known_gaps() {
  std::map<std::string, std::string> gaps;
  std::ifstream in(TG_KNOWN_GAPS_FILE);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    const auto space = line.find_first_of(" \t");
    const std::string name = line.substr(0, space);
    const auto reason = space == std::string::npos ? std::string::npos : line.find_first_not_of(" \t", space);
    gaps[name] = reason == std::string::npos ? "" : line.substr(reason);
  }
  return gaps;
}

struct Reached {
  std::uint64_t hits = 0;
  std::set<std::string> tests;  // the property tests (files) that reached the path
};

// path name -> what the property suites reached; `files` counts the files read.
std::map<std::string, Reached> read_coverage(std::size_t& files) {
  std::map<std::string, Reached> reached;
  files = 0;
  const std::filesystem::path dir(TG_PATH_COVERAGE_DIR);
  if (!std::filesystem::is_directory(dir)) return reached;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".paths") continue;
    ++files;
    std::ifstream in(entry.path());
    std::uint64_t hits = 0;
    std::string name;
    while (in >> hits >> name) {
      reached[name].hits += hits;
      reached[name].tests.insert(entry.path().stem().string());
    }
  }
  return reached;
}

void check_backend(const std::string& backend) {
  link_every_kernel();
  std::size_t files = 0;
  const auto reached = read_coverage(files);
  ASSERT_GT(files, 0u)
      << "no coverage files in " << TG_PATH_COVERAGE_DIR
      << ": run the property suites first (`ctest -R path_coverage` runs them as this test's fixtures)";
  auto gaps = known_gaps();
  std::vector<std::string> missing;
  std::ostringstream table;
  std::size_t declared = 0;
  for (const LaunchPathCount& p : launch_path_counts()) {
    if (p.backend != backend) continue;
    ++declared;
    const auto it = reached.find(p.name());
    const std::uint64_t hits = it == reached.end() ? 0 : it->second.hits;
    const std::size_t tests = it == reached.end() ? 0 : it->second.tests.size();
    const auto gap = gaps.find(p.name());
    const char* note = hits > 0            ? (gap != gaps.end() ? "   (reached: remove from known_gaps.txt)" : "")
                       : gap != gaps.end() ? "   <- known gap"
                                           : "   <- NOT REACHED";
    table << "  " << std::left << std::setw(58) << p.name() << std::right << std::setw(12) << hits << std::setw(6)
          << tests << note << "\n";
    if (hits == 0 && gap == gaps.end()) missing.push_back(p.name());
    if (gap != gaps.end()) gaps.erase(gap);
  }
  for (const auto& [name, reason] : gaps) {
    EXPECT_NE(name.rfind(backend + "/", 0), 0u) << "known_gaps.txt lists " << name << ", which no kernel declares";
  }
  std::cout << backend << " launch paths (" << declared << " declared; hits and property tests reaching each, from "
            << files << " files):\n"
            << table.str();
  ASSERT_GT(declared, 0u) << "no " << backend << " launch paths are declared: the kernels' files were not linked";
  std::string list;
  for (const std::string& name : missing) list += "  " + name + "\n";
  if (!missing.empty() && testing::case_scale() < 1) {
    // A sanitizer run (TG_TEST_SCALE < 1) draws a fraction of the cases, which cannot reach every
    // path; the full-count run (make test, CI) is the one that checks them.
    GTEST_SKIP() << "case counts scaled by " << testing::case_scale()
                 << " (TG_PROPERTY_SCALE x TG_TEST_SCALE): coverage is checked only at full counts; " << missing.size()
                 << " " << backend << " paths not reached in this run:\n"
                 << list;
  }
  EXPECT_TRUE(missing.empty()) << missing.size() << " " << backend
                               << " launch paths were never reached by the property suites:\n"
                               << list;
}

TEST(PathCoverage, PropertySuitesReachEveryInterpreterPath) { check_backend("interp"); }

TEST(PathCoverage, PropertySuitesReachEveryVulkanPath) {
  const auto devices = vk::list_devices();
  if (std::none_of(devices.begin(), devices.end(), [](const vk::DeviceInfo& d) { return d.usable; })) {
    GTEST_SKIP() << "no usable Vulkan device: the vk property tests skipped, so the Vulkan paths were not run";
  }
  check_backend("vulkan");
}

}  // namespace
}  // namespace tg
