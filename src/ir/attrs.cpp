// Attribute maps: kinds, lossless printing, typed access.
#include "tensorgrad/ir/attrs.h"

#include <algorithm>
#include <charconv>
#include <cmath>

#include "tensorgrad/ir/error.h"
#include "text_syntax.h"

namespace tg {

AttrKind attr_kind(const AttrValue& value) { return static_cast<AttrKind>(value.index()); }

std::string_view attr_kind_name(AttrKind kind) {
  switch (kind) {
    case AttrKind::integer:
      return "integer";
    case AttrKind::real:
      return "real";
    case AttrKind::boolean:
      return "boolean";
    case AttrKind::ints:
      return "integer list";
    case AttrKind::dtype:
      return "dtype";
    case AttrKind::string:
      return "string";
  }
  return "?";
}

std::string attr_value_to_string(const AttrValue& value) {
  struct Printer {
    std::string operator()(std::int64_t v) const { return std::to_string(v); }
    std::string operator()(double v) const {
      if (std::isnan(v)) return "nan";
      if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
      // Shortest text that reads back to the same bits (0.1 prints as 0.1, not 0.10000000000000001).
      char buf[64];
      const auto result = std::to_chars(buf, buf + sizeof buf, v);
      std::string s(buf, result.ptr);
      // Keep reals recognisable as reals in the text format.
      if (s.find_first_of(".en") == std::string::npos) s += ".0";
      return s;
    }
    std::string operator()(bool v) const { return v ? "true" : "false"; }
    std::string operator()(const std::vector<std::int64_t>& v) const {
      std::string s = "[";
      for (std::size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
      return s + "]";
    }
    std::string operator()(DType v) const { return std::string(dtype_name(v)); }
    std::string operator()(const std::string& v) const { return text::quote(v); }
  };
  return std::visit(Printer{}, value);
}

Attrs::Attrs(std::initializer_list<Item> items) {
  for (const auto& item : items) set(item.first, item.second);
}

Attrs& Attrs::set(std::string name, AttrValue value) {
  auto it = std::lower_bound(items_.begin(), items_.end(), name,
                             [](const Item& item, const std::string& key) { return item.first < key; });
  if (it != items_.end() && it->first == name) {
    it->second = std::move(value);
  } else {
    items_.insert(it, Item{std::move(name), std::move(value)});
  }
  return *this;
}

const AttrValue* Attrs::find(std::string_view name) const {
  auto it = std::lower_bound(items_.begin(), items_.end(), name,
                             [](const Item& item, std::string_view key) { return item.first < key; });
  if (it != items_.end() && it->first == name) return &it->second;
  return nullptr;
}

namespace {
template <class T>
const T& get_attr(const Attrs& attrs, std::string_view name, AttrKind kind) {
  const AttrValue* v = attrs.find(name);
  if (!v) throw Error("missing attribute '" + std::string(name) + "'");
  if (const T* typed = std::get_if<T>(v)) return *typed;
  throw Error("attribute '" + std::string(name) + "' is a " + std::string(attr_kind_name(attr_kind(*v))) +
              ", expected a " + std::string(attr_kind_name(kind)));
}
}  // namespace

std::int64_t Attrs::integer(std::string_view name) const {
  return get_attr<std::int64_t>(*this, name, AttrKind::integer);
}
double Attrs::real(std::string_view name) const { return get_attr<double>(*this, name, AttrKind::real); }
bool Attrs::boolean(std::string_view name) const { return get_attr<bool>(*this, name, AttrKind::boolean); }
const std::vector<std::int64_t>& Attrs::ints(std::string_view name) const {
  return get_attr<std::vector<std::int64_t>>(*this, name, AttrKind::ints);
}
DType Attrs::dtype(std::string_view name) const { return get_attr<DType>(*this, name, AttrKind::dtype); }
const std::string& Attrs::string(std::string_view name) const {
  return get_attr<std::string>(*this, name, AttrKind::string);
}

std::string Attrs::to_string() const {
  if (items_.empty()) return "";
  std::string s = "{";
  for (std::size_t i = 0; i < items_.size(); ++i) {
    if (i) s += ", ";
    s += items_[i].first + "=" + attr_value_to_string(items_[i].second);
  }
  return s + "}";
}

}  // namespace tg
