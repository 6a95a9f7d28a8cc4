#pragma once
// Launch paths as data. A kernel whose launch logic branches on sizes (tiles, split-K, row modes,
// staged sums, grid strides, blocked loops, fusion windows) names each branch as a LaunchPath and
// marks the one each launch takes. Every path is declared when the library loads (a LaunchPath is a
// namespace-scope object of the kernel's file), so tests can enumerate all of them and fail, by
// name, on a path the property suites never reached (docs/testing.md, "Launch paths").
//
// A hit is one relaxed atomic increment per launch (per node run by the interpreter, per dispatch
// recorded by the Vulkan executor): cheap enough to stay on in every build.
#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tg {

class LaunchPath {
 public:
  // Declares backend/kernel/path ("vulkan", "matmul", "split_k"). Declaring the same triple twice
  // gives the same counter.
  LaunchPath(std::string_view backend, std::string_view kernel, std::string_view path);
  LaunchPath(const LaunchPath&) = delete;
  LaunchPath& operator=(const LaunchPath&) = delete;

  void hit() const noexcept { counter_->fetch_add(1, std::memory_order_relaxed); }
  std::uint64_t hits() const noexcept { return counter_->load(std::memory_order_relaxed); }
  // "backend/kernel/path"
  const std::string& name() const { return *name_; }

 private:
  std::atomic<std::uint64_t>* counter_;
  const std::string* name_;
};

struct LaunchPathCount {
  std::string backend;
  std::string kernel;
  std::string path;
  std::uint64_t hits = 0;
  std::string name() const { return backend + "/" + kernel + "/" + path; }
};

// Every declared path with its hits since the process started (or the last reset), sorted by name.
std::vector<LaunchPathCount> launch_path_counts();
void reset_launch_path_counts();

}  // namespace tg

namespace tg {

// A size at which a kernel's launch logic changes (a tile edge, a row-mode limit, a block length,
// a split threshold), declared like a LaunchPath at namespace scope of the kernel's file. The
// random-graph generator draws dims at value - 1, value and value + 1 of every declared threshold
// (SampleRng's boundary profile), so the property suites cross each one from both sides.
class SizeThreshold {
 public:
  SizeThreshold(std::string_view backend, std::string_view kernel, std::string_view what, std::int64_t value);
  SizeThreshold(const SizeThreshold&) = delete;
  SizeThreshold& operator=(const SizeThreshold&) = delete;
  std::int64_t value() const { return value_; }

 private:
  std::int64_t value_;
};

struct SizeThresholdInfo {
  std::string backend;
  std::string kernel;
  std::string what;
  std::int64_t value = 0;
};

// Every declared threshold, sorted by value then name.
std::vector<SizeThresholdInfo> size_thresholds();

}  // namespace tg
