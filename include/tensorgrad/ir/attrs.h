#pragma once
// Node attributes: a small sorted name -> value map. Each op declares the attributes it takes (names
// and kinds) in the registry; the builder, the verifier and the parser check against that schema,
// so one printer and one parser serve every op.
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "tensorgrad/ir/dtype.h"

namespace tg {

enum class AttrKind : std::uint8_t { integer, real, boolean, ints, dtype, string };
// The variant's alternatives are in AttrKind's order.
using AttrValue = std::variant<std::int64_t, double, bool, std::vector<std::int64_t>, DType, std::string>;

AttrKind attr_kind(const AttrValue& value);
std::string_view attr_kind_name(AttrKind kind);
std::string attr_value_to_string(
    const AttrValue& value);  // lossless: reals print in the shortest form that reads back to the same bits

struct AttrSpec {
  std::string_view name;
  AttrKind kind;
};

class Attrs {
 public:
  using Item = std::pair<std::string, AttrValue>;

  Attrs() = default;
  Attrs(std::initializer_list<Item> items);

  Attrs& set(std::string name, AttrValue value);  // replaces an existing value
  const AttrValue* find(std::string_view name) const;
  bool has(std::string_view name) const { return find(name) != nullptr; }

  // Typed getters throw tg::Error naming the attribute when it is missing or of another kind.
  std::int64_t integer(std::string_view name) const;
  double real(std::string_view name) const;
  bool boolean(std::string_view name) const;
  const std::vector<std::int64_t>& ints(std::string_view name) const;
  DType dtype(std::string_view name) const;
  const std::string& string(std::string_view name) const;

  const std::vector<Item>& items() const { return items_; }
  bool empty() const { return items_.empty(); }
  std::string to_string() const;  // "{axis=1, keep_dims=true}" or "" when empty
  friend bool operator==(const Attrs&, const Attrs&) = default;

 private:
  std::vector<Item> items_;  // sorted by name
};

}  // namespace tg
