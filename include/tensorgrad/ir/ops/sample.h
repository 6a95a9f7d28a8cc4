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

// splitmix64: tiny, fast, and the same sequence on every platform.
class SampleRng {
 public:
  explicit SampleRng(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next();
  std::int64_t uniform_int(std::int64_t lo, std::int64_t hi);  // inclusive both ends
  double uniform(double lo, double hi);
  bool coin(double p_true = 0.5);
  // A shape of rank in [min_rank, max_rank] with dims in [1, max_dim].
  Shape shape(int min_rank, int max_rank, std::int64_t max_dim = 8);

 private:
  std::uint64_t state_;
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
