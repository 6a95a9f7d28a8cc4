#pragma once
// The property suites' side of the launch-path coverage check (docs/testing.md, "Launch paths").
// Under CTest every test runs in its own process, so a property test writes the launch paths its
// process reached to <TG_PATH_COVERAGE_DIR>/<suite>.<test>.paths ("<hits> <backend/kernel/path>"
// per line); the path-coverage test (tests/coverage) reads every such file after the property
// suites ran and fails, naming the path, on any declared path none of them reached.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "tensorgrad/ir/launch_paths.h"

namespace tg::testing {

inline void write_path_coverage() {
#ifdef TG_PATH_COVERAGE_DIR
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  if (info == nullptr) return;
  std::string file = std::string(info->test_suite_name()) + "." + info->name() + ".paths";
  for (char& ch : file)
    if (ch == '/') ch = '_';
  const std::filesystem::path dir(TG_PATH_COVERAGE_DIR);
  std::filesystem::create_directories(dir);
  std::ofstream out(dir / file, std::ios::trunc);
  for (const LaunchPathCount& p : launch_path_counts())
    if (p.hits > 0) out << p.hits << ' ' << p.name() << '\n';
#endif
}

}  // namespace tg::testing
