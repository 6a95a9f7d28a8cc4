// Random ops: randn (standard normal draws) and dropout (inverted dropout). Both are counter-based:
// every element's draw is Philox4x32-10 keyed by (the graph's step seed input, a per-call salt) at
// the element's index (src/interp/philox.h), so a result never depends on the thread count and the
// gradient of dropout recomputes the very mask of the forward pass from the same seed and salt.
#include "tensorgrad/ir/ops/ids/random.h"

#include <cmath>
#include <limits>

#include "rules.h"

namespace tg {

namespace {

using rules::kMaxSampleElements;

constexpr std::int64_t kMaxSalt = std::numeric_limits<std::uint32_t>::max();

std::string str(std::int64_t v) { return std::to_string(v); }

// The salt becomes one 32-bit key word: a larger value would silently alias a smaller one.
void require_valid_salt(const Attrs& attrs) {
  const std::int64_t salt = attrs.integer("salt");
  if (salt < 0 || salt > kMaxSalt) rule_broken("salt must be in [0, " + str(kMaxSalt) + "], got " + str(salt));
}

void require_seed(const TensorType& seed) {
  if (seed.dtype != DType::i32 || seed.rank() != 0) {
    rule_broken("the seed must be a 0-d i32 tensor, got " + seed.to_string());
  }
}

// p == 1 would divide by zero and keep nothing; p < 0 means nothing. NaN fails both comparisons.
void require_valid_probability(double p) {
  if (!(p >= 0.0 && p < 1.0)) rule_broken("p must be in [0, 1), got " + attr_value_to_string(p));
}

TensorType randn_rule(const Attrs& attrs, std::span<const TensorType> inputs) {
  require_seed(inputs[0]);
  require_valid_salt(attrs);
  const Shape& shape = attrs.ints("shape");
  for (auto d : shape) {
    if (d < 0) rule_broken("shape " + shape_to_string(shape) + " has a negative dimension " + str(d));
  }
  return TensorType{DType::f32, shape};
}

TensorType dropout_rule(const Attrs& attrs, std::span<const TensorType> inputs) {
  rules::require_dtype(inputs[0], DType::f32, "input 0");
  require_seed(inputs[1]);
  require_valid_probability(attrs.real("p"));
  require_valid_salt(attrs);
  return inputs[0];
}

// Dropout is linear in x with a fixed mask, so its vjp is dropout of the cotangent with the same
// seed, p and salt: the same mask and the same 1/(1-p) scale. The seed gets no gradient.
std::vector<std::optional<Tensor>> dropout_grad(const GradArgs& args) {
  const Tensor inputs[] = {args.cotangent, args.inputs[1]};
  const Tensor grad_x =
      args.cotangent.builder().emit(op::Dropout, inputs, args.attrs, frontend::site(CallSite::current()));
  return {grad_x, std::nullopt};
}

Shape sample_shape(SampleRng& rng) {
  for (;;) {
    Shape s = rng.shape(0, 4);
    if (num_elements(s) <= rules::sample_cap(rng)) return s;
  }
}

// Mostly small salts, as next_salt() hands out, sometimes large ones so the top key bits are used.
std::int64_t sample_salt(SampleRng& rng) {
  return rng.coin(0.2) ? rng.uniform_int(0, kMaxSalt) : rng.uniform_int(0, 64);
}

// Seeds cover negative values (their bits are the key) but stay small: the property tests scale the
// f32 tolerance by the largest input magnitude, seeds included.
ValueDomain seed_domain() { return ValueDomain::indices(-8, 8); }

const TensorType kSeedType{DType::i32, {}};

std::optional<OpSample> randn_samples(SampleRng& rng, const std::optional<TensorType>& first) {
  if (first && *first != kSeedType) return std::nullopt;
  Attrs attrs{{"shape", sample_shape(rng)}, {"salt", sample_salt(rng)}};
  return OpSample{std::move(attrs), {kSeedType}, {seed_domain()}};
}

std::optional<OpSample> dropout_samples(SampleRng& rng, const std::optional<TensorType>& first) {
  if (first && (first->dtype != DType::f32 || first->size() > rules::sample_cap(rng))) return std::nullopt;
  const TensorType x = first ? *first : TensorType{DType::f32, sample_shape(rng)};
  // p == 0 keeps everything; 0.9 drops most and scales by 10: both ends of what the op accepts.
  constexpr double kProbabilities[] = {0.0, 0.1, 0.25, 0.5, 0.9};
  const double p = rng.coin(0.5) ? kProbabilities[rng.uniform_int(0, 4)] : rng.uniform(0.0, 0.95);
  Attrs attrs{{"p", p}, {"salt", sample_salt(rng)}};
  return OpSample{std::move(attrs), {x, kSeedType}, {ValueDomain::real_range(-2, 2), seed_domain()}};
}

}  // namespace

const OpDef& Randn_def() {
  static const OpDef def{.name = op_name(op::Randn),
                         .arity = 1,
                         .attrs = {{"shape", AttrKind::ints}, {"salt", AttrKind::integer}},
                         .shape = randn_rule,
                         .grad = nullptr,
                         .differentiable = false,
                         .samples = randn_samples,
                         .tolerance = ToleranceClass::transcendental};
  return def;
}

const OpDef& Dropout_def() {
  static const OpDef def{.name = op_name(op::Dropout),
                         .arity = 2,
                         .attrs = {{"p", AttrKind::real}, {"salt", AttrKind::integer}},
                         .shape = dropout_rule,
                         .grad = dropout_grad,
                         .samples = dropout_samples,
                         .tolerance = ToleranceClass::elementwise};
  return def;
}

// ---- front-end ----

namespace {
// Runs the op's shape rule with the seed's type before step_seed() adds the seed input and
// next_salt() advances, so a refused call leaves the graph and later draws' salts as they were.
void check_before_seeding(OpId op, const Attrs& attrs, std::vector<TensorType> types, const CallSite& loc) {
  types.push_back(TensorType{DType::i32, {}});
  try {
    (void)infer_type(op, attrs, types);
  } catch (const RuleBroken& broken) {
    throw ShapeError(std::string(op_name(op)), std::move(types), broken.rule, frontend::site(loc));
  }
}
}  // namespace

Tensor randn(Shape shape, CallSite loc) {
  GraphBuilder& builder = current_builder();
  Attrs attrs{{"shape", std::move(shape)}, {"salt", std::int64_t{0}}};
  check_before_seeding(op::Randn, attrs, {}, loc);
  const Tensor seed = builder.step_seed();
  attrs.set("salt", builder.next_salt());
  return frontend::emit(op::Randn, {seed}, std::move(attrs), loc);
}

Tensor dropout(const Tensor& x, double p, CallSite loc) {
  try {
    require_valid_probability(p);
  } catch (const RuleBroken& broken) {
    throw ShapeError(std::string(op_name(op::Dropout)), {x.type()}, broken.rule, frontend::site(loc));
  }
  if (p == 0.0) return x;  // keeps every element with scale 1: no node, no seed input
  GraphBuilder& builder = x.builder();
  Attrs attrs{{"p", p}, {"salt", std::int64_t{0}}};
  check_before_seeding(op::Dropout, attrs, {x.type()}, loc);
  const Tensor seed = builder.step_seed();
  attrs.set("salt", builder.next_salt());
  return frontend::emit(op::Dropout, {x, seed}, std::move(attrs), loc);
}

}  // namespace tg
