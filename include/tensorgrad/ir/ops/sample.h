#pragma once
// What an op's sample generator returns, and the small deterministic PRNG it draws with. Value
// domains keep property tests away from kinks and poles (log and sqrt positive, denominators away
// from zero, relu/abs/max away from ties), as an OpInfo does in other frameworks.
#include <cstdint>
#include <optional>
#include <vector>

#include "tensorgrad/ir/attrs.h"
#include "tensorgrad/ir/shape.h"

namespace tg {

// How large sampled dims get. The default draws every dim in [1, 8] (max_dim of the call).
// `boundary` also draws dims, with probability boundary_chance each, from the boundary set: 1, 2,
// the edges around powers of two from 32 to 4096 (31-33, ..., 4095-4097) and value - 1, value,
// value + 1 of every SizeThreshold the kernels declare (tensorgrad/ir/launch_paths.h). A sample's
// dims together stay under max_elements: each dim divides a budget, and a boundary dim that would
// exceed it is drawn small instead.
struct SizeProfile {
  bool boundary = false;
  double boundary_chance = 0.3;
  std::int64_t max_elements = std::int64_t{1} << 17;
  // Boundary draws only from sizes of at least this (a sweep aiming at long rows and large tiles).
  std::int64_t min_boundary = 1;
};

// The boundary set of `profile`'s draws, sorted (every value at most max_elements).
std::vector<std::int64_t> boundary_dims(const SizeProfile& profile);

// splitmix64: tiny, fast, and the same sequence on every platform.
class SampleRng {
 public:
  explicit SampleRng(std::uint64_t seed, SizeProfile profile = {})
      : state_(seed), profile_(profile), budget_(static_cast<double>(profile.max_elements)) {}
  std::uint64_t next();
  std::int64_t uniform_int(std::int64_t lo, std::int64_t hi);  // inclusive both ends
  double uniform(double lo, double hi);
  bool coin(double p_true = 0.5);
  // A shape of rank in [min_rank, max_rank] with dims from dim(max_dim).
  Shape shape(int min_rank, int max_rank, std::int64_t max_dim = 8);
  // One dim: in [1, max_dim] by default; under a boundary profile sometimes a boundary size (see
  // SizeProfile). Every sample draws its dims through here (or shape()), so the profile reaches
  // every op.
  std::int64_t dim(std::int64_t max_dim = 8);
  const SizeProfile& profile() const { return profile_; }

 private:
  std::uint64_t state_;
  SizeProfile profile_;
  double budget_;                           // elements left for further dims of this sample (boundary profile)
  std::vector<std::int64_t> boundary_set_;  // boundary_dims(profile_), on the first boundary draw
};

struct ValueDomain {
  enum class Kind : std::uint8_t {
    real,            // uniform in [lo, hi]
    away_from_zero,  // |v| in [lo, hi], random sign (denominators)
    spaced,          // values in [lo, hi] at least gap/2 apart from each other (no ties)
    small_ints,      // integers in [lo, hi] stored as floats (so equal() sees equal values)
    boolean,         // 0 or 1
    index,           // integers in [lo, hi] (i32 indices)
  };
  Kind kind = Kind::real;
  double lo = -2.0;
  double hi = 2.0;
  double gap = 0.05;
  // True when this input must be a fresh graph input drawn from the domain: a computed value could
  // land on a kink or a tie, where f32 and f64 (or finite differences) disagree for no fault.
  bool fresh_only = false;

  static ValueDomain real_range(double lo, double hi) { return {Kind::real, lo, hi, 0, false}; }
  static ValueDomain positive(double lo, double hi) { return {Kind::real, lo, hi, 0, false}; }
  static ValueDomain nonzero(double lo, double hi) { return {Kind::away_from_zero, lo, hi, 0, false}; }
  static ValueDomain untied(double lo = -2.0, double hi = 2.0, double gap = 0.05) {
    return {Kind::spaced, lo, hi, gap, true};
  }
  static ValueDomain small_integers(double lo, double hi) { return {Kind::small_ints, lo, hi, 0, true}; }
  static ValueDomain booleans() { return {Kind::boolean, 0, 1, 0, true}; }
  static ValueDomain indices(double lo, double hi) { return {Kind::index, lo, hi, 0, true}; }

  std::vector<double> draw(SampleRng& rng, std::int64_t count) const;
  // Whether computed values may be used for this input (the domain is an interval they all lie in).
  bool accepts(const std::vector<double>& values) const;
};

struct OpSample {
  Attrs attrs;
  std::vector<TensorType> inputs;
  std::vector<ValueDomain> domains;  // one per input
};

}  // namespace tg
