// Replays the fuzz targets' inputs in the g++ build through the same code libFuzzer runs
// (fuzz/fuzz_entry.h): every recorded crash in fuzz/regressions/<target>/ and every seed in
// fuzz/corpus/<target>/. An input passes when the target returns normally: the library either
// accepted it and every check of the target held, or refused it with a tg::Error. A FuzzBug (a
// broken check), any other exception or a crash fails.
#include <gtest/gtest.h>

#include <algorithm>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "fuzz_entry.h"

namespace {

namespace fs = std::filesystem;
using Entry = int (*)(const std::uint8_t*, std::size_t);

std::vector<fs::path> inputs_in(const fs::path& dir) {
  std::vector<fs::path> files;
  if (!fs::is_directory(dir)) return files;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.is_regular_file() && !entry.path().filename().string().starts_with("README")) {
      files.push_back(entry.path());
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

std::vector<std::uint8_t> read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Runs `entry` on each file; returns how many files it ran.
std::size_t replay(Entry entry, const fs::path& dir) {
  const std::vector<fs::path> files = inputs_in(dir);
  for (const fs::path& file : files) {
    const std::vector<std::uint8_t> bytes = read_bytes(file);
    try {
      EXPECT_EQ(entry(bytes.data(), bytes.size()), 0) << file;
    } catch (const std::exception& e) {
      ADD_FAILURE() << file << ": " << e.what();
    }
  }
  return files.size();
}

const fs::path kFuzzDir = fs::path(TG_SOURCE_DIR) / "fuzz";

struct Target {
  const char* name;
  Entry entry;
};
const Target kTargets[] = {{"parse_graph", tg::fuzz::fuzz_parse_graph},
                           {"safetensors", tg::fuzz::fuzz_safetensors},
                           {"build_graph", tg::fuzz::fuzz_build_graph}};

TEST(FuzzRegressions, RecordedCrashesPass) {
  for (const Target& target : kTargets) {
    SCOPED_TRACE(target.name);
    replay(target.entry, kFuzzDir / "regressions" / target.name);
  }
}

TEST(FuzzRegressions, SeedCorporaPass) {
  for (const Target& target : kTargets) {
    SCOPED_TRACE(target.name);
    EXPECT_GT(replay(target.entry, kFuzzDir / "corpus" / target.name), 0u) << "no seeds for " << target.name;
  }
}

// The first false report the parse target made: Graph's == compares real attributes with ==, so a
// graph with a NaN attribute never equals its reparsed self; the round-trip check must compare NaN
// as NaN. Bad text is refused with a ParseError, which the target swallows.
TEST(FuzzRegressions, ParseTargetToleratesNanAttributesAndBadText) {
  const std::string text =
      "graph g(%x: f32[2]) {\n  %0 = full() {dtype=f32, shape=[2], value=nan} : f32[2]\n"
      "  %1 = add(%x, %0) : f32[2]\n  return y=%1\n}\n";
  const auto* bytes = reinterpret_cast<const std::uint8_t*>(text.data());
  EXPECT_NO_THROW(tg::fuzz::fuzz_parse_graph(bytes, text.size()));
  const std::string garbage = "graph g(%x: f32[2]) { %0 = nonsense(%x) : f32[2] }";
  EXPECT_NO_THROW(tg::fuzz::fuzz_parse_graph(reinterpret_cast<const std::uint8_t*>(garbage.data()), garbage.size()));
}

}  // namespace
