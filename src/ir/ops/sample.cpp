// The samples' PRNG and value domains.
#include "tensorgrad/ir/ops/sample.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "tensorgrad/ir/launch_paths.h"

namespace tg {

std::uint64_t SampleRng::next() {
  std::uint64_t z = (state_ += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

std::int64_t SampleRng::uniform_int(std::int64_t lo, std::int64_t hi) {
  if (hi <= lo) return lo;
  const auto span = static_cast<std::uint64_t>(hi - lo) + 1;
  return lo + static_cast<std::int64_t>(next() % span);
}

double SampleRng::uniform(double lo, double hi) {
  const double unit = static_cast<double>(next() >> 11) * 0x1.0p-53;
  return lo + (hi - lo) * unit;
}

bool SampleRng::coin(double p_true) { return uniform(0.0, 1.0) < p_true; }

std::vector<std::int64_t> boundary_dims(const SizeProfile& profile) {
  // Built once: every SizeThreshold is declared while the library loads, before any sample.
  static const std::set<std::int64_t> dims = [] {
    std::set<std::int64_t> all{1, 2};
    for (std::int64_t p = 32; p <= 4096; p *= 2) all.insert({p - 1, p, p + 1});
    for (const SizeThresholdInfo& t : size_thresholds()) all.insert({t.value - 1, t.value, t.value + 1});
    return all;
  }();
  std::vector<std::int64_t> out;
  for (std::int64_t d : dims)
    if (d >= std::max<std::int64_t>(1, profile.min_boundary) && d <= profile.max_elements) out.push_back(d);
  return out;
}

std::int64_t SampleRng::dim(std::int64_t max_dim) {
  std::int64_t d = 0;
  if (profile_.boundary && coin(profile_.boundary_chance)) {
    if (boundary_set_.empty()) boundary_set_ = boundary_dims(profile_);  // the profile is fixed per rng
    if (!boundary_set_.empty()) {
      d = boundary_set_[static_cast<std::size_t>(uniform_int(0, static_cast<std::int64_t>(boundary_set_.size()) - 1))];
    }
    if (static_cast<double>(d) > budget_) d = 0;  // over this sample's budget: draw small instead
  }
  if (d == 0) {
    const auto cap =
        profile_.boundary ? std::clamp<std::int64_t>(static_cast<std::int64_t>(budget_), 1, max_dim) : max_dim;
    d = uniform_int(1, cap);
  }
  if (profile_.boundary) budget_ /= static_cast<double>(d);
  return d;
}

Shape SampleRng::shape(int min_rank, int max_rank, std::int64_t max_dim) {
  const auto rank = uniform_int(min_rank, max_rank);
  Shape s(static_cast<std::size_t>(rank));
  for (auto& d : s) d = dim(max_dim);
  if (profile_.boundary) {
    // Each dim divides the budget, so the first tends to be the large one: shuffled, a boundary
    // size lands on any axis (the last one included, where rows and reductions usually run).
    for (std::size_t i = s.size(); i > 1; --i)
      std::swap(s[i - 1], s[static_cast<std::size_t>(uniform_int(0, static_cast<std::int64_t>(i) - 1))]);
  }
  return s;
}

std::vector<double> ValueDomain::draw(SampleRng& rng, std::int64_t count) const {
  std::vector<double> values(static_cast<std::size_t>(count));
  switch (kind) {
    case Kind::real:
      for (auto& v : values) v = rng.uniform(lo, hi);
      break;
    case Kind::away_from_zero:
      for (auto& v : values) v = rng.uniform(lo, hi) * (rng.coin() ? 1.0 : -1.0);
      break;
    case Kind::spaced: {
      // Distinct grid points in [lo, hi], shuffled, jittered by less than gap/4: no two values
      // are closer than gap/2, so ties cannot happen under f32 rounding or small perturbations.
      const double needed = (hi - lo) / static_cast<double>(std::max<std::int64_t>(count, 1));
      double step = std::max(gap, needed);
      double jitter = gap / 4;
      if (rng.profile().boundary && needed < gap) {
        // Thousands of values at `gap` apart would run far past hi; boundary-sized draws pack them
        // tighter, still 1e-3 apart at least: a thousand times a finite-difference step, and far
        // more than f32 spacing at these magnitudes.
        step = std::max(std::min(gap, 1e-3), needed);
        jitter = step / 4;
      }
      for (std::size_t i = 0; i < values.size(); ++i) {
        values[i] = lo + step * static_cast<double>(i) + rng.uniform(-jitter, jitter);
      }
      for (std::size_t i = values.size(); i > 1; --i) {
        std::swap(values[i - 1],
                  values[static_cast<std::size_t>(rng.uniform_int(0, static_cast<std::int64_t>(i) - 1))]);
      }
      break;
    }
    case Kind::small_ints:
    case Kind::index:
      for (auto& v : values)
        v = static_cast<double>(rng.uniform_int(static_cast<std::int64_t>(lo), static_cast<std::int64_t>(hi)));
      break;
    case Kind::boolean:
      for (auto& v : values) v = rng.coin() ? 1.0 : 0.0;
      break;
  }
  return values;
}

bool ValueDomain::accepts(const std::vector<double>& values) const {
  if (fresh_only) return false;
  for (double v : values) {
    if (!std::isfinite(v)) return false;
    if (kind == Kind::real && (v < lo || v > hi)) return false;
    if (kind == Kind::away_from_zero && (std::fabs(v) < lo || std::fabs(v) > hi)) return false;
  }
  return true;
}

}  // namespace tg
