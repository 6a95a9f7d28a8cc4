// The op table built from ops.def (through the generated op_list.inc), name lookup, schema checks
// and tolerance classes.
#include <array>
#include <cmath>
#include <string>
#include <unordered_map>

#include "tensorgrad/ir/error.h"
#include "tensorgrad/ir/ops/ids.h"
#include "tensorgrad/ir/ops/op_def.h"

namespace tg {

namespace {

using DefGetter = const OpDef& (*)();

struct OpEntry {
  OpId id;
  std::string_view name;
  std::string_view family;
  DefGetter def;
};

// The generated list (cmake/generate_ops.cmake): every op of ops.def, in its order.
constexpr OpEntry kOps[] = {
#define TG_OP(id, name, family, ew) {op::id, name, #family, &id##_def},
#include "tensorgrad/ir/ops/op_list.inc"
#undef TG_OP
};

constexpr std::string_view kFamilies[] = {
#define TG_FAMILY(family) #family,
#include "tensorgrad/ir/ops/families.inc"
#undef TG_FAMILY
};

constexpr std::array<OpId, std::size(kOps)> all_op_ids() {
  std::array<OpId, std::size(kOps)> ids{};
  for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = kOps[i].id;
  return ids;
}
constexpr std::array<OpId, std::size(kOps)> kAllOps = all_op_ids();

// OpId values are sparse ((family << 7) | index): a table over the whole value space finds an
// op's entry in one step.
const OpEntry* entry(OpId id) {
  static const auto by_value = [] {
    std::array<const OpEntry*, kOpIdSpace> table{};
    for (const OpEntry& e : kOps) table[static_cast<std::size_t>(e.id)] = &e;
    return table;
  }();
  const auto i = static_cast<std::size_t>(id);
  return i < kOpIdSpace ? by_value[i] : nullptr;
}

// DTypeRule::float_generic: the float inputs' one dtype stands in for f32 (op_def.h).
TensorType float_generic_type(const OpDef& def, const Attrs& attrs, std::span<const TensorType> inputs) {
  std::optional<std::size_t> first_float;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    if (!is_float(inputs[i].dtype)) continue;
    if (!first_float) {
      first_float = i;
      continue;
    }
    const DType want = inputs[*first_float].dtype;
    if (inputs[i].dtype != want) {
      rule_broken("mixes float dtypes: input " + std::to_string(*first_float) + " is " + std::string(dtype_name(want)) +
                  " but input " + std::to_string(i) + " is " + std::string(dtype_name(inputs[i].dtype)) +
                  "; tensorgrad never promotes implicitly, so cast one first, e.g. cast(x, DType::" +
                  std::string(dtype_name(want)) + ")");
    }
  }
  if (!first_float || inputs[*first_float].dtype == DType::f32) return def.shape(attrs, inputs);
  const DType dtype = inputs[*first_float].dtype;
  std::vector<TensorType> as_f32(inputs.begin(), inputs.end());
  for (TensorType& t : as_f32) {
    if (t.dtype == dtype) t.dtype = DType::f32;
  }
  TensorType out = def.shape(attrs, as_f32);
  if (out.dtype == DType::f32) out.dtype = dtype;
  return out;
}

}  // namespace

std::string_view dtype_rule_name(DTypeRule rule) {
  return rule == DTypeRule::float_generic ? "float_generic" : "explicit_dtypes";
}

bool is_registered_op(OpId id) { return entry(id) != nullptr; }

std::string_view op_name(OpId id) {
  const OpEntry* e = entry(id);
  return e ? e->name : std::string_view("<invalid op>");
}

std::string_view op_family(OpId id) {
  const OpEntry* e = entry(id);
  return e ? e->family : std::string_view();
}

const OpDef& op_def(OpId id) {
  const OpEntry* e = entry(id);
  if (!e) throw Error("invalid op id " + std::to_string(static_cast<std::size_t>(id)));
  return e->def();
}

std::optional<OpSample> sample_in_dtype(OpId id, SampleRng& rng, const std::optional<TensorType>& first, DType dtype) {
  const OpDef& def = op_def(id);
  if (def.dtypes != DTypeRule::float_generic) return def.samples(rng, first);
  std::optional<TensorType> first_f32 = first;
  if (first && is_float(first->dtype)) {
    dtype = first->dtype;
    first_f32->dtype = DType::f32;
  }
  std::optional<OpSample> sample = def.samples(rng, first_f32);
  if (!sample || dtype == DType::f32) return sample;
  for (TensorType& t : sample->inputs) {
    if (t.dtype == DType::f32) t.dtype = dtype;
  }
  return sample;
}

std::optional<OpId> find_op(std::string_view name) {
  static const auto by_name = [] {
    std::unordered_map<std::string_view, OpId> map;
    for (const OpEntry& e : kOps) map.emplace(e.name, e.id);
    return map;
  }();
  const auto it = by_name.find(name);
  if (it == by_name.end()) return std::nullopt;
  return it->second;
}

std::span<const OpId> all_ops() { return kAllOps; }

std::span<const std::string_view> op_families() { return kFamilies; }

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
  TensorType out =
      def.dtypes == DTypeRule::float_generic ? float_generic_type(def, attrs, inputs) : def.shape(attrs, inputs);
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
