// The op table built from ops.def, name lookup, schema checks and tolerance classes.
#include <array>
#include <cmath>
#include <string>

#include "tensorgrad/ir/error.h"
#include "tensorgrad/ir/ops/op_def.h"

namespace tg {

namespace {

constexpr std::array<std::string_view, kNumOps> kOpNames = {
#define TG_OP(id, name) name,
#include "tensorgrad/ir/ops/ops.def"
#undef TG_OP
};

constexpr std::array<OpId, kNumOps> kAllOps = {
#define TG_OP(id, name) OpId::id,
#include "tensorgrad/ir/ops/ops.def"
#undef TG_OP
};

using DefGetter = const OpDef& (*)();
constexpr std::array<DefGetter, kNumOps> kDefGetters = {
#define TG_OP(id, name) &id##_def,
#include "tensorgrad/ir/ops/ops.def"
#undef TG_OP
};

}  // namespace

std::string_view op_name(OpId id) {
  auto i = static_cast<std::size_t>(id);
  return i < kNumOps ? kOpNames[i] : std::string_view("<invalid op>");
}

const OpDef& op_def(OpId id) {
  auto i = static_cast<std::size_t>(id);
  if (i >= kNumOps) throw Error("invalid op id " + std::to_string(i));
  return kDefGetters[i]();
}

std::optional<OpId> find_op(std::string_view name) {
  for (std::size_t i = 0; i < kNumOps; ++i)
    if (kOpNames[i] == name) return kAllOps[i];
  return std::nullopt;
}

std::span<const OpId> all_ops() { return kAllOps; }

TensorType infer_type(OpId id, const Attrs& attrs, std::span<const TensorType> inputs) {
  const OpDef& def = op_def(id);
  if (def.arity != kVariadic && inputs.size() != static_cast<std::size_t>(def.arity)) {
    rule_broken("takes " + std::to_string(def.arity) + " input(s), got " + std::to_string(inputs.size()));
  }
  for (const AttrSpec& spec : def.attrs) {
    const AttrValue* v = attrs.find(spec.name);
    if (!v) rule_broken("missing attribute '" + std::string(spec.name) + "'");
    if (attr_kind(*v) != spec.kind) {
      rule_broken("attribute '" + std::string(spec.name) + "' must be a " + std::string(attr_kind_name(spec.kind)) +
                  ", got a " + std::string(attr_kind_name(attr_kind(*v))));
    }
  }
  for (const auto& [name, value] : attrs.items()) {
    bool known = false;
    for (const AttrSpec& spec : def.attrs) known = known || spec.name == name;
    if (!known) rule_broken("unknown attribute '" + name + "'");
  }
  // Inputs come from a graph, so they are within the size limits (shape.h); a rule's result, built
  // from attributes or from several inputs' dims, may not be. Refuse it here, before any node
  // exists, for the builder, the parser and the verifier alike.
  TensorType out = def.shape(attrs, inputs);
  if (std::string problem = shape_limit_problem(out.shape); !problem.empty()) {
    rule_broken("its result is past the size limits: " + problem);
  }
  return out;
}

std::string_view tolerance_class_name(ToleranceClass cls) {
  switch (cls) {
    case ToleranceClass::exact:
      return "exact";
    case ToleranceClass::elementwise:
      return "elementwise";
    case ToleranceClass::transcendental:
      return "transcendental";
    case ToleranceClass::reduction:
      return "reduction";
    case ToleranceClass::matmul:
      return "matmul";
  }
  return "?";
}

double tolerance_ulps(ToleranceClass cls, std::int64_t n) {
  // Rounding error of a sum of n terms grows like sqrt(n) in practice (random-walk rounding) and
  // like n only in the worst case; 4 + 8*sqrt(n) ulp sits well above what real sums show.
  const double length = static_cast<double>(std::max<std::int64_t>(n, 1));
  switch (cls) {
    case ToleranceClass::exact:
      return 0.0;
    case ToleranceClass::elementwise:
      return 4.0;
    case ToleranceClass::transcendental:
      return 16.0;
    case ToleranceClass::reduction:
    case ToleranceClass::matmul:
      return 4.0 + 2.0 * std::sqrt(length) * 4.0;
  }
  return 0.0;
}

}  // namespace tg
