// The process-wide registry of launch paths: a deque keeps every entry at a fixed address, so a
// LaunchPath holds a plain pointer to its counter and hit() takes no lock.
#include "tensorgrad/ir/launch_paths.h"

#include <algorithm>
#include <deque>
#include <mutex>
#include <tuple>

namespace tg {

namespace {

struct Entry {
  std::string backend;
  std::string kernel;
  std::string path;
  std::string name;
  std::atomic<std::uint64_t> hits{0};
};

struct Registry {
  std::mutex mutex;
  std::deque<Entry> entries;
  std::vector<SizeThresholdInfo> thresholds;
};

// Function-local: LaunchPaths are namespace-scope objects of other files, constructed in an order
// the language leaves open.
Registry& registry() {
  static Registry r;
  return r;
}

}  // namespace

LaunchPath::LaunchPath(std::string_view backend, std::string_view kernel, std::string_view path) {
  Registry& r = registry();
  const std::lock_guard lock(r.mutex);
  const std::string name = std::string(backend) + "/" + std::string(kernel) + "/" + std::string(path);
  auto it = std::find_if(r.entries.begin(), r.entries.end(), [&](const Entry& e) { return e.name == name; });
  if (it == r.entries.end()) {
    Entry& e = r.entries.emplace_back();
    e.backend = backend;
    e.kernel = kernel;
    e.path = path;
    e.name = name;
    it = std::prev(r.entries.end());
  }
  counter_ = &it->hits;
  name_ = &it->name;
}

std::vector<LaunchPathCount> launch_path_counts() {
  Registry& r = registry();
  const std::lock_guard lock(r.mutex);
  std::vector<LaunchPathCount> out;
  for (const Entry& e : r.entries) out.push_back({e.backend, e.kernel, e.path, e.hits.load()});
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.name() < b.name(); });
  return out;
}

void reset_launch_path_counts() {
  Registry& r = registry();
  const std::lock_guard lock(r.mutex);
  for (Entry& e : r.entries) e.hits.store(0);
}

SizeThreshold::SizeThreshold(std::string_view backend, std::string_view kernel, std::string_view what,
                             std::int64_t value)
    : value_(value) {
  Registry& r = registry();
  const std::lock_guard lock(r.mutex);
  r.thresholds.push_back({std::string(backend), std::string(kernel), std::string(what), value});
}

std::vector<SizeThresholdInfo> size_thresholds() {
  Registry& r = registry();
  const std::lock_guard lock(r.mutex);
  std::vector<SizeThresholdInfo> out = r.thresholds;
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    return std::tie(a.value, a.backend, a.kernel, a.what) < std::tie(b.value, b.backend, b.kernel, b.what);
  });
  return out;
}

}  // namespace tg
