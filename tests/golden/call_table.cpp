// How golden cases are traced: the explicit entries the calls_<module>.cpp files register, the
// registry fallback that emits an op in its IR form, and the case's forward and gradient graphs.
#include <utility>

#include "golden_calls.h"
#include "tensorgrad/ir/ops/ids/elementwise_binary.h"
#include "tensorgrad/ir/ops/ids/reduce.h"

namespace tg::golden {

namespace {

struct Registration {
  std::string module;
  CallRegistration::AddFn add;
};

// Filled during static initialization, read on first use of call_table(): a function-local static,
// so the registrations of other files need no particular initialization order.
std::vector<Registration>& registrations() {
  static std::vector<Registration> list;
  return list;
}

std::string attr_names(const OpDef& def) {
  std::string names;
  for (const AttrSpec& spec : def.attrs) names += (names.empty() ? "" : ", ") + std::string(spec.name);
  return names.empty() ? "none" : names;
}

// The case's attributes as `op` declares them. Golden files have no dtype literal and write every
// real with a '.', so a dtype arrives as a string and a real may arrive as an integer.
Attrs ir_attrs(OpId op, const Attrs& attrs) {
  const OpDef& def = op_def(op);
  Attrs out;
  for (const auto& [name, value] : attrs.items()) {
    const AttrSpec* spec = nullptr;
    for (const AttrSpec& s : def.attrs) spec = s.name == name ? &s : spec;
    if (!spec) {
      throw Error("golden call '" + std::string(op_name(op)) +
                  "' is traced as the registry op, which has no attribute '" + name +
                  "' (its attributes: " + attr_names(def) +
                  "); give the op's IR attributes, or register an explicit call in tests/golden/calls_" +
                  std::string(op_family(op)) + ".cpp");
    }
    if (spec->kind == AttrKind::real && std::holds_alternative<std::int64_t>(value)) {
      out.set(name, static_cast<double>(std::get<std::int64_t>(value)));
    } else if (spec->kind == AttrKind::dtype && std::holds_alternative<std::string>(value)) {
      const std::string& text = std::get<std::string>(value);
      const auto dtype = parse_dtype(text);
      if (!dtype) throw Error("golden attribute '" + name + "' = \"" + text + "\" is not f32, i32 or bool");
      out.set(name, *dtype);
    } else {
      out.set(name, value);  // a wrong kind is reported by the op's schema check, naming the op
    }
  }
  return out;
}

}  // namespace

CallRegistration::CallRegistration(std::string module, AddFn add) {
  registrations().push_back({std::move(module), add});
}

const CallTable& call_table() {
  static const CallTable table = [] {
    CallTable t;
    for (const Registration& r : registrations()) {
      CallEntries entries;
      r.add(entries);
      for (auto& [name, fn] : entries) {
        const auto [it, fresh] = t.emplace(name, ExplicitCall{std::move(fn), r.module});
        if (!fresh) {
          throw Error("golden call '" + name + "' is registered twice: by tests/golden/calls_" + it->second.module +
                      ".cpp and by tests/golden/calls_" + r.module + ".cpp");
        }
      }
    }
    return t;
  }();
  return table;
}

Tensor emit_op(OpId op, const std::vector<Tensor>& inputs, const Attrs& attrs) {
  GraphBuilder& builder = inputs.empty() ? current_builder() : inputs.front().builder();
  return builder.emit(op, inputs, ir_attrs(op, attrs), SourceLoc::from(CallSite::current()));
}

Tensor trace_call(std::string_view call, const std::vector<Tensor>& inputs, const Attrs& attrs) {
  const CallTable& table = call_table();
  if (const auto entry = table.find(call); entry != table.end()) return entry->second.fn(inputs, attrs);
  if (const auto op = find_op(call)) return emit_op(*op, inputs, attrs);
  throw Error("golden call '" + std::string(call) +
              "' is neither a registry op nor an explicit entry (register it in tests/golden/calls_<module>.cpp)");
}

const CallSite& harness_site() {
  static const CallSite site = CallSite::current();
  return site;
}

Traced trace_case(const GoldenCase& c) {
  GraphBuilder b(c.name);
  TracingScope scope(b);
  std::vector<Tensor> inputs;
  for (const auto& in : c.inputs) inputs.push_back(b.input(in.name, in.value.type));
  const Tensor y = trace_call(c.call, inputs, c.attrs);
  if (!y.valid()) throw Error("call '" + c.call + "' returned no tensor");
  if (y.type() != c.output.value.type) {
    throw Error("call '" + c.call + "' returns " + y.type().to_string() + " but PyTorch's output is " +
                c.output.value.type.to_string());
  }
  b.output("y", y);
  Traced traced{b.graph(), std::nullopt};
  if (c.proj && !c.grads.empty()) {
    const Tensor proj = b.input(kProjInput, c.proj->value.type);
    b.output("loss", sum(mul(y, proj, harness_site()), Axes::all(), {}, harness_site()));
    std::vector<std::string> wrt;
    for (const auto& g : c.grads) wrt.push_back(g.name);
    traced.gradient = differentiate(b.graph(), {.loss = "loss", .wrt = wrt});
  }
  return traced;
}

std::optional<double> optional_number(const Attrs& attrs, std::string_view name) {
  const AttrValue* v = attrs.find(name);
  if (!v) return std::nullopt;
  if (const auto* i = std::get_if<std::int64_t>(v)) return static_cast<double>(*i);
  return attrs.real(name);  // throws naming the attribute when it is not a number
}

double number(const Attrs& attrs, std::string_view name) {
  if (!attrs.has(name)) return attrs.real(name);  // throws "missing attribute"
  return *optional_number(attrs, name);
}

std::optional<std::int64_t> optional_integer(const Attrs& attrs, std::string_view name) {
  if (!attrs.has(name)) return std::nullopt;
  return attrs.integer(name);
}

bool boolean_or(const Attrs& attrs, std::string_view name, bool fallback) {
  return attrs.has(name) ? attrs.boolean(name) : fallback;
}

void require_inputs(const std::vector<Tensor>& inputs, std::size_t count, std::string_view call) {
  if (inputs.size() != count) {
    throw Error("golden call '" + std::string(call) + "' takes " + std::to_string(count) + " input(s), got " +
                std::to_string(inputs.size()));
  }
}

}  // namespace tg::golden
