#pragma once
// Graph equality for the round-trip checks of the fuzz targets: Graph's operator== compares real
// attributes with ==, so a graph holding a NaN attribute (full's value=nan) never equals itself.
// Here two NaNs are equal (the text format keeps NaN, not its payload bits); everything else must
// be equal as operator== says, and both graphs must print the same text.
#include <cmath>
#include <cstddef>
#include <variant>

#include "tensorgrad/ir/graph.h"
#include "tensorgrad/ir/text.h"

namespace tg::fuzz {

inline bool same_attr(const AttrValue& a, const AttrValue& b) {
  if (const double* x = std::get_if<double>(&a)) {
    const double* y = std::get_if<double>(&b);
    return y && (*x == *y ? std::signbit(*x) == std::signbit(*y) : std::isnan(*x) && std::isnan(*y));
  }
  return a == b;
}

inline bool same_node(const Node& a, const Node& b) {
  if (a.op != b.op || a.inputs != b.inputs || a.output != b.output || !(a.loc == b.loc) || a.checkpoint != b.checkpoint)
    return false;
  const auto& x = a.attrs.items();
  const auto& y = b.attrs.items();
  if (x.size() != y.size()) return false;
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (x[i].first != y[i].first || !same_attr(x[i].second, y[i].second)) return false;
  }
  return true;
}

inline bool same_graph(const Graph& a, const Graph& b) {
  if (a == b) return true;
  if (a.name() != b.name() || a.values() != b.values() || a.inputs() != b.inputs() || a.outputs() != b.outputs() ||
      a.nodes().size() != b.nodes().size()) {
    return false;
  }
  for (std::size_t i = 0; i < a.nodes().size(); ++i) {
    if (!same_node(a.nodes()[i], b.nodes()[i])) return false;
  }
  return print_graph(a) == print_graph(b);
}

}  // namespace tg::fuzz
