// The table of golden calls (every family's entries) and the attribute helpers entries use.
#include "golden_calls.h"

namespace tg::golden {

const CallTable& call_table() {
  static const CallTable table = [] {
    CallTable t;
    register_core_calls(t);
    register_structure_calls(t);
    register_indexing_calls(t);
    register_losses_calls(t);
    register_image_calls(t);
    register_random_calls(t);
    register_normalization_calls(t);
    return t;
  }();
  return table;
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

DType dtype_or(const Attrs& attrs, std::string_view name, DType fallback) {
  if (!attrs.has(name)) return fallback;
  const std::string& text = attrs.string(name);
  const auto dtype = parse_dtype(text);
  if (!dtype) throw Error("attribute '" + std::string(name) + "' = \"" + text + "\" is not f32, i32 or bool");
  return *dtype;
}

void require_inputs(const std::vector<Tensor>& inputs, std::size_t count, std::string_view call) {
  if (inputs.size() != count) {
    throw Error("golden call '" + std::string(call) + "' takes " + std::to_string(count) + " input(s), got " +
                std::to_string(inputs.size()));
  }
}

}  // namespace tg::golden
