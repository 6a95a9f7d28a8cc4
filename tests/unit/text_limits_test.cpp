// The graph text format's numeric limits, each at its boundary and one unit to each side: dims and
// the element limit 2^48 (a 0 dim counted as 1) in input and node types and in a shape attribute,
// dims as int64, integer attributes as int64 (and an op's own range behind them: randn's salt),
// real literals at the edges of double (the largest finite value, where rounding reaches inf, the
// smallest subnormal, where rounding reaches 0), node references and definitions, `after %k`
// (node indices below 2^31), checkpoint segments (0 to 2^31 - 1) and call-site lines and columns
// (uint32). An accepted text is also printed and parsed again to the same graph.
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <typeinfo>
#include <vector>

#include "tensorgrad/ir/error.h"
#include "tensorgrad/ir/graph.h"
#include "tensorgrad/ir/text.h"

namespace tg {
namespace {

// One text at one side of one limit: accepted (refusal empty; then `check`, if any, looks at the
// graph) or refused with a ParseError holding `refusal` at the line and column of the first
// occurrence of `at` in the text.
struct Limit {
  std::string name;  // <limit>_<side>: below, at or past the boundary
  std::string text;
  std::string refusal;
  std::string at = {};
  std::function<void(const Graph&)> check = {};
};

void PrintTo(const Limit& l, std::ostream* os) {
  *os << l.name << (l.refusal.empty() ? " -> accepted" : " -> refused: " + l.refusal);
}

std::string with_input(const std::string& type) { return "graph g(%x: " + type + ") {\n  return y=%x\n}\n"; }
// A graph with %x: f32[2] and %s: i32[] and the given node lines.
std::string with_nodes(const std::vector<std::string>& lines) {
  std::string text = "graph g(%x: f32[2], %s: i32[]) {\n";
  for (const std::string& line : lines) text += "  " + line + "\n";
  return text + "  return\n}\n";
}
std::string full_value(const std::string& literal) {
  return with_nodes({"%0 = full() {dtype=f32, shape=[2], value=" + literal + "} : f32[2]"});
}
std::function<void(const Graph&)> value_is(double expected) {
  return [expected](const Graph& g) { EXPECT_EQ(g.node(0).attrs.real("value"), expected); };
}

const std::string kTooMany = "shape has too many elements: more than 281474976710656 (2^48), the limit of one tensor";

std::vector<Limit> shape_limits() {
  return {
      {"extent_below", with_input("f32[281474976710655]"), ""},
      {"extent_at", with_input("f32[281474976710656]"), ""},
      {"extent_past", with_input("f32[281474976710657]"), kTooMany + ", with dimension 281474976710657",
       "281474976710657"},
      {"extent_product_at", with_input("bool[65536,65536,65536]"), ""},
      {"extent_product_past", with_input("bool[65536,65536,65537]"), kTooMany + ", with dimension 65537", "65537"},
      {"empty_extent_at", with_input("i32[0,281474976710656]"), ""},
      {"empty_extent_past", with_input("i32[0,281474976710657]"), kTooMany, "281474976710657"},
      {"dim_sign_at", with_input("f32[0]"), ""},
      {"dim_sign_past", with_input("f32[-1]"), "dimension -1 is negative", "-1"},
      {"dim_int64_at", with_input("f32[9223372036854775807]"), kTooMany, "9223372036854775807"},
      {"dim_int64_past", with_input("f32[9223372036854775808]"), "expected a dimension", "9223372036854775808"},
      // A node's declared type and its shape attribute.
      {"full_shape_at",
       with_nodes({"%0 = full() {dtype=bool, shape=[281474976710656], value=0.0} : bool[281474976710656]"}), ""},
      {"full_shape_past_in_type",
       with_nodes({"%0 = full() {dtype=bool, shape=[281474976710657], value=0.0} : bool[281474976710657]"}),
       kTooMany + ", with dimension 281474976710657", "281474976710657]\n"},
      {"full_shape_past_in_attribute",
       with_nodes({"%0 = full() {dtype=bool, shape=[281474976710657], value=0.0} : bool[1]"}),
       "op full refuses its inputs: shape [281474976710657] has too many elements", "full"},
  };
}

std::vector<Limit> integer_attribute_limits() {
  const auto salt = [](const std::string& literal) {
    return with_nodes({"%0 = randn(%s) {salt=" + literal + ", shape=[2]} : f32[2]"});
  };
  const auto salt_is = [](std::int64_t expected) {
    return [expected](const Graph& g) { EXPECT_EQ(g.node(0).attrs.integer("salt"), expected); };
  };
  return {
      // randn's own range [0, 2^32 - 1] ...
      {"salt_low_at", salt("0"), "", "", salt_is(0)},
      {"salt_low_past", salt("-1"), "op randn refuses its inputs: salt must be in [0, 4294967295], got -1", "randn"},
      {"salt_high_at", salt("4294967295"), "", "", salt_is(4294967295)},
      {"salt_high_past", salt("4294967296"),
       "op randn refuses its inputs: salt must be in [0, 4294967295], got 4294967296", "randn"},
      // ... behind the lexer's int64: at its ends the op refuses the value, past them the lexer does.
      {"int64_max_at", salt("9223372036854775807"), "got 9223372036854775807", "randn"},
      {"int64_max_past", salt("9223372036854775808"), "expected an attribute value", "9223372036854775808"},
      {"int64_min_at", salt("-9223372036854775808"), "got -9223372036854775808", "randn"},
      {"int64_min_past", salt("-9223372036854775809"), "expected an attribute value", "-9223372036854775809"},
      // An integer literal for a real attribute is read as int64, then converted.
      {"integer_for_real_at", full_value("9223372036854775807"), "", "", value_is(9223372036854775807.0)},
      {"integer_for_real_past", full_value("9223372036854775808"), "expected an attribute value",
       "9223372036854775808"},
  };
}

std::vector<Limit> real_literal_limits() {
  constexpr double kMax = std::numeric_limits<double>::max();
  constexpr double kDenormMin = std::numeric_limits<double>::denorm_min();
  const std::string too_large = "is out of the range of a double";
  return {
      {"largest_at", full_value("1.7976931348623157e308"), "", "", value_is(kMax)},
      // Up to half an ulp above the largest double rounds to it; beyond that it would be inf.
      {"largest_rounds_down", full_value("1.7976931348623158e308"), "", "", value_is(kMax)},
      {"largest_past", full_value("1.7976931348623159e308"), "number '1.7976931348623159e308' " + too_large,
       "1.7976931348623159e308"},
      {"lowest_at", full_value("-1.7976931348623157e308"), "", "", value_is(-kMax)},
      {"lowest_past", full_value("-1.7976931348623159e308"), "number '-1.7976931348623159e308' " + too_large,
       "-1.7976931348623159e308"},
      {"exponent_past", full_value("1e309"), "number '1e309' " + too_large, "1e309"},
      {"infinity_keyword", full_value("-inf"), "", "", value_is(-std::numeric_limits<double>::infinity())},
      // The smallest subnormal, and the halfway point below which a literal would round to 0.
      {"smallest_at", full_value("4.9406564584124654e-324"), "", "", value_is(kDenormMin)},
      {"smallest_rounds_up", full_value("2.4703282292062328e-324"), "", "", value_is(kDenormMin)},
      {"smallest_past", full_value("2.4703282292062327e-324"), "number '2.4703282292062327e-324' " + too_large,
       "2.4703282292062327e-324"},
      {"zero", full_value("0.0"), "", "", value_is(0.0)},
  };
}

std::vector<Limit> value_id_limits() {
  const std::string neg0 = "%0 = neg(%x) : f32[2]";
  const auto after = [](const std::string& index) {
    return "graph g(%x: f32[2], %y: f32[2] after %" + index + ") {\n  %0 = neg(%x) : f32[2]\n  return\n}\n";
  };
  return {
      // A node may use the nodes before it, not itself.
      {"node_ref_below", with_nodes({neg0, "%1 = neg(%0) : f32[2]"}), ""},
      {"node_ref_at", with_nodes({neg0, "%1 = neg(%1) : f32[2]"}), "unknown value %1 (no such node yet)", "%1)"},
      {"node_ref_past_64_bits", with_nodes({neg0, "%1 = neg(%18446744073709551616) : f32[2]"}),
       "unknown value %18446744073709551616 (no such node yet)", "%18446744073709551616"},
      // Node outputs are numbered 0, 1, ... in order.
      {"node_def_below", with_nodes({neg0, "%0 = neg(%x) : f32[2]"}), "redefined value %0",
       "%0 = neg(%x) : f32[2]\n  return"},
      {"node_def_at", with_nodes({neg0, "%1 = neg(%x) : f32[2]"}), ""},
      {"node_def_past", with_nodes({neg0, "%2 = neg(%x) : f32[2]"}), "node outputs are numbered in order: expected %1",
       "%2"},
      // `after %k` names an existing node, and k stays below 2^31.
      {"after_existing_at", after("0"), ""},
      {"after_existing_past", after("1"), "input %y is declared after node %1, which does not exist", "%y"},
      {"after_index_at", after("2147483647"), "input %y is declared after node %2147483647, which does not exist",
       "%y"},
      {"after_index_past", after("2147483648"), "node index out of range", "%2147483648"},
  };
}

std::vector<Limit> annotation_limits() {
  const auto segment = [](const std::string& number) {
    return with_nodes({"%0 = neg(%x) : f32[2] checkpoint " + number});
  };
  const auto segment_is = [](std::int32_t expected) {
    return [expected](const Graph& g) { EXPECT_EQ(g.node(0).checkpoint, expected); };
  };
  const auto located = [](const std::string& line, const std::string& column) {
    return with_nodes({"%0 = neg(%x) : f32[2] @\"a.cpp\":" + line + ":" + column});
  };
  const auto location_is = [](std::uint32_t line, std::uint32_t column) {
    return [line, column](const Graph& g) {
      EXPECT_EQ(g.node(0).loc.line, line);
      EXPECT_EQ(g.node(0).loc.column, column);
    };
  };
  return {
      {"segment_low_past", segment("-1"), "checkpoint segment -1 is out of range (0 to 2^31 - 1)", "-1"},
      {"segment_low_at", segment("0"), "", "", segment_is(0)},
      {"segment_high_at", segment("2147483647"), "", "", segment_is(2147483647)},
      {"segment_high_past", segment("2147483648"), "checkpoint segment 2147483648 is out of range (0 to 2^31 - 1)",
       "2147483648"},
      {"location_low_at", located("0", "0"), "", "", location_is(0, 0)},
      {"location_line_low_past", located("-1", "0"), "expected a line number", "-1"},
      {"location_high_at", located("4294967295", "4294967295"), "", "", location_is(4294967295u, 4294967295u)},
      {"location_line_past", located("4294967296", "1"), "expected a line number", "4294967296"},
      {"location_column_past", located("1", "4294967296"), "expected a column number", "4294967296"},
  };
}

std::vector<Limit> all_limits() {
  std::vector<Limit> all;
  for (auto part :
       {shape_limits(), integer_attribute_limits(), real_literal_limits(), value_id_limits(), annotation_limits()}) {
    for (Limit& l : part) all.push_back(std::move(l));
  }
  return all;
}

std::pair<std::size_t, std::size_t> line_and_column(const std::string& text, std::size_t offset) {
  std::size_t line = 1, column = 1;
  for (std::size_t i = 0; i < offset; ++i) {
    if (text[i] == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
  }
  return {line, column};
}

class TextLimit : public ::testing::TestWithParam<Limit> {};

TEST_P(TextLimit, AcceptedOrRefusedAsTheRuleSays) {
  const Limit& l = GetParam();
  SCOPED_TRACE(l.text);
  if (l.refusal.empty()) {
    Graph g;
    try {
      g = parse_graph(l.text);
    } catch (const std::exception& error) {
      FAIL() << "refused a text the rule accepts: " << error.what();
    }
    if (l.check) l.check(g);
    EXPECT_TRUE(parse_graph(print_graph(g)) == g) << print_graph(g);
    return;
  }
  const std::size_t offset = l.text.find(l.at);
  ASSERT_NE(offset, std::string::npos) << "marker '" << l.at << "' is not in the text";
  const auto [line, column] = line_and_column(l.text, offset);
  try {
    (void)parse_graph(l.text);
  } catch (const std::exception& error) {
    ASSERT_EQ(typeid(error), typeid(ParseError)) << error.what();
    const auto& parse = dynamic_cast<const ParseError&>(error);
    EXPECT_NE(std::string(error.what()).find(l.refusal), std::string::npos)
        << "message: " << error.what() << "\nexpected: " << l.refusal;
    EXPECT_EQ(parse.line(), line) << error.what();
    EXPECT_EQ(parse.column(), column) << error.what();
    return;
  }
  FAIL() << "accepted a text the rule refuses (expected: " << l.refusal << ")";
}

INSTANTIATE_TEST_SUITE_P(Limits, TextLimit, ::testing::ValuesIn(all_limits()),
                         [](const ::testing::TestParamInfo<Limit>& param_info) { return param_info.param.name; });

}  // namespace
}  // namespace tg
