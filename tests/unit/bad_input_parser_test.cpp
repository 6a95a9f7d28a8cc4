// Bad-input catalogue, text parser (tests/support/bad_input.h): malformed graph texts, each refused
// with a ParseError whose message names the problem and the line and column of the offending token.
// The parser has no state; each case also checks line() and column() against the text.
#include <string>
#include <vector>

#include "support/bad_input.h"
#include "tensorgrad/ir/text.h"

namespace tg {
namespace {

using testing::BadInputCase;
using testing::stateless;
using testing::throws;

// A graph with one input of each dtype, a param and the given body lines.
const std::string kHead = "graph g(%x: f32[2,3], param %w: f32[3,2], %i: i32[2], %c: bool[2,3]) {\n";
std::string with_node(const std::string& line) { return kHead + "  " + line + "\n  return\n}\n"; }

// The 1-based line and column of the first occurrence of `at` in `text` (the end of the text when
// `at` is empty).
std::pair<std::size_t, std::size_t> where(const std::string& text, const std::string& at) {
  const std::size_t offset = at.empty() ? text.size() : text.find(at);
  if (offset == std::string::npos) {
    std::cerr << "bad-input catalogue: marker '" << at << "' is not in the text\n";
    std::abort();
  }
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

// `text` must be refused at the first occurrence of `at` with a message holding `fragment`.
BadInputCase bad_text(std::string name, std::string text, std::string at, std::string fragment) {
  const auto [line, column] = where(text, at);
  const std::string position = "at line " + std::to_string(line) + ", column " + std::to_string(column) + ":";
  return {.name = std::move(name),
          .setup = stateless([text] { (void)parse_graph(text); }),
          .expected = throws<ParseError>(),
          .fragments = {position, std::move(fragment)},
          .also = [line = line, column = column](const std::exception& e) {
            const auto& parse = dynamic_cast<const ParseError&>(e);
            EXPECT_EQ(parse.line(), line);
            EXPECT_EQ(parse.column(), column);
          }};
}

std::vector<BadInputCase> structure_cases() {
  return {
      bad_text("empty_text", "", "", "a graph must start with 'graph <name>(', found the end of the text"),
      bad_text("only_whitespace_and_comments", "  # nothing\n// here\n", "", "a graph must start with 'graph"),
      bad_text("misspelled_keyword", "grph g() {\n  return\n}\n", "grph", "a graph must start with 'graph"),
      bad_text("graph_without_name", "graph (%x: f32[2]) {\n  return\n}\n", "(", "expected a graph name, found '('"),
      bad_text("missing_open_paren", "graph g {\n  return\n}\n", "{", "expected '(' after the graph name"),
      bad_text("missing_open_brace", "graph g() return\n}\n", "return",
               "expected '{' or a params(...)/state(...) list"),
      bad_text("missing_close_brace", "graph g(%x: f32[2]) {\n  return y=%x\n", "",
               "expected '}' to close the graph body"),
      bad_text("close_brace_hidden_in_comment", "graph g(%x: f32[2]) {\n  return y=%x  // }\n", "",
               "expected '}' to close the graph body"),
      bad_text("trailing_text", "graph g(%x: f32[2]) {\n  return y=%x\n}\nextra\n", "extra",
               "unexpected text after the end of the graph"),
      bad_text("second_graph", "graph g() {\n  return\n}\ngraph h() {\n  return\n}\n", "graph h",
               "unexpected text after the end of the graph"),
      bad_text("body_line_not_a_node", kHead + "  neg(%x)\n  return\n}\n", "neg(",
               "expected a node '%0 = ...' or 'return'"),
      bad_text("truncated_in_type", "graph g(%x: f32[2", "", "expected ',' or ']' in the shape, found the end"),
      bad_text("truncated_after_op", kHead + "  %0 = neg(", "", "an operand such as %0 or %x"),
      bad_text("truncated_in_attributes", kHead + "  %0 = softmax(%x) {axis=", "", "expected an attribute value"),
      bad_text("nul_byte_before_type", kHead + "  %0 = neg(%x)" + std::string(1, '\0') + " : f32[2,3]\n  return\n}\n",
               std::string(1, '\0'), "expected ':' and the node's type"),
      bad_text("invalid_utf8_in_op_name", with_node("%0 = ne\xc3\x28g(%x) : f32[2,3]"), "ne\xc3", "unknown op 'ne'"),
      bad_text("invalid_utf8_in_input_name", "graph g(%x\xff: f32[2]) {\n  return\n}\n", "\xff",
               "expected ':' and a type after the input name"),
      bad_text("latin1_keyword", "gr\xe9ph g() {\n  return\n}\n", "gr\xe9", "a graph must start with 'graph"),
  };
}

std::vector<BadInputCase> header_cases() {
  return {
      bad_text("input_without_type", "graph g(%x) {\n  return\n}\n", ")",
               "expected ':' and a type after the input name"),
      bad_text("input_without_percent", "graph g(x: f32[2]) {\n  return\n}\n", "x:", "expected an input such as"),
      bad_text("input_unknown_kind_prefix", "graph g(weight %w: f32[2]) {\n  return\n}\n", "weight",
               "expected an input such as %x: f32[2] or param %w: f32[2]"),
      bad_text("input_named_like_a_node", "graph g(%3: f32[2]) {\n  return\n}\n", "%3",
               "input name %3 would read as a node output"),
      bad_text("input_declared_twice", "graph g(%x: f32[2], %x: f32[3]) {\n  return\n}\n", "%x: f32[3]",
               "redefined value %x"),
      bad_text("param_and_data_with_one_name", "graph g(%x: f32[2], param %x: f32[2]) {\n  return\n}\n", "%x: f32[2])",
               "redefined value %x"),
      bad_text("missing_comma_between_inputs", "graph g(%x: f32[2] %y: f32[2]) {\n  return\n}\n", "%y",
               "expected ',' or ')' after an input"),
      bad_text("unknown_input_group", "graph g() weights(%w: f32[2]) {\n  return\n}\n", "weights",
               "expected '{' or a params(...)/state(...) list"),
      bad_text("kind_prefix_inside_group", "graph g() params(param %w: f32[2]) {\n  return\n}\n", "param %w",
               "inputs inside a params(...) or state(...) list take no kind prefix"),
      bad_text("group_without_paren", "graph g() params %w: f32[2] {\n  return\n}\n", "%w",
               "expected '(' after params"),
      bad_text("after_names_an_input", "graph g(%x: f32[2], %y: f32[2] after %x) {\n  return\n}\n", "%x)",
               "'after' names a node output such as %3"),
      bad_text("after_index_above_2_pow_31", "graph g(%x: f32[2] after %2147483648) {\n  return\n}\n", "%2147483648",
               "node index out of range"),
      bad_text("after_index_overflows_64_bits", "graph g(%x: f32[2] after %99999999999999999999999) {\n  return\n}\n",
               "%9999", "node index out of range"),
      bad_text("after_missing_node", "graph g(%x: f32[2] after %3) {\n  return\n}\n", "%x",
               "is declared after node %3, which does not exist"),
      bad_text("inputs_out_of_value_order", "graph g(%x: f32[2] after %0, %y: f32[2]) {\n  return\n}\n", "%y",
               "comes earlier in value order"),
      bad_text("input_used_before_its_place",
               "graph g(%x: f32[2], %y: f32[2] after %0) {\n  %0 = add(%x, %y) : f32[2]\n  return\n}\n", "%y)",
               "input %y is used before its place (after %0)"),
  };
}

std::vector<BadInputCase> type_cases() {
  const auto input = [](const std::string& type) { return "graph g(%x: " + type + ") {\n  return\n}\n"; };
  return {
      bad_text("dtype_f64", input("f64[2]"), "f64", "unknown dtype 'f64' (expected f32, f16, bf16, i32 or bool)"),
      bad_text("dtype_uppercase", input("F32[2]"), "F32", "unknown dtype 'F32'"),
      bad_text("dtype_missing", input("[2]"), "[2]", "expected a type such as f32[2,3], found '['"),
      bad_text("shape_missing", input("f32"), ")", "expected '[' after the dtype"),
      bad_text("dim_negative", input("f32[2,-3]"), "-3", "dimension -3 is negative"),
      bad_text("dim_not_a_number", input("f32[2,a]"), "a]", "expected a dimension, found 'a'"),
      bad_text("dim_real", input("f32[2.5]"), ".5", "expected ',' or ']' in the shape, found '.'"),
      bad_text("dim_above_int64", input("f32[9223372036854775808]"), "9223372036854775808", "expected a dimension"),
      bad_text("dims_overflow_when_multiplied", input("f32[4294967296,4294967296]"), "4294967296]",
               "shape has too many elements"),
      bad_text("dims_past_the_element_cap", input("f32[65536,65536,65536,2]"), "2]", "shape has too many elements"),
      bad_text("shape_unclosed", input("f32[2,3"), ")", "expected ',' or ']' in the shape, found ')'"),
      bad_text("shape_trailing_comma", input("f32[2,]"), "]", "expected a dimension, found ']'"),
      bad_text("node_type_dtype_differs", with_node("%0 = neg(%x) : i32[2,3]"), ": i32[2,3]",
               "declared type i32[2,3] differs from the type f32[2,3] that neg's shape rule gives"),
      bad_text("node_type_shape_differs", with_node("%0 = matmul(%x, %w) : f32[2,3]"), ": f32[2,3]\n",
               "declared type f32[2,3] differs from the type f32[2,2] that matmul's shape rule gives"),
      bad_text("node_type_missing", kHead + "  %0 = neg(%x)\n  return\n}\n", "return",
               "expected ':' and the node's type, found 'r'"),
  };
}

std::vector<BadInputCase> node_cases() {
  return {
      bad_text("unknown_op", with_node("%0 = frobnicate(%x) : f32[2,3]"), "frobnicate", "unknown op 'frobnicate'"),
      bad_text("op_name_case", with_node("%0 = Neg(%x) : f32[2,3]"), "Neg", "unknown op 'Neg'"),
      bad_text("op_name_missing", with_node("%0 = (%x) : f32[2,3]"), "(%x)", "expected an op name, found '('"),
      bad_text("node_missing_equals", with_node("%0 neg(%x) : f32[2,3]"), "neg", "expected '=' after the node's name"),
      bad_text("op_missing_paren", with_node("%0 = neg %x : f32[2,3]"), "%x :", "expected '(' after the op name"),
      bad_text("first_node_numbered_1", with_node("%1 = neg(%x) : f32[2,3]"), "%1", "expected %0"),
      bad_text("node_named_by_letters", with_node("%y = neg(%x) : f32[2,3]"), "%y",
               "node outputs are numbered in order: expected %0"),
      bad_text("node_redefines_an_input", with_node("%x = neg(%x) : f32[2,3]"), "%x =", "redefined value %x"),
      bad_text("node_defined_twice", kHead + "  %0 = neg(%x) : f32[2,3]\n  %0 = neg(%x) : f32[2,3]\n  return\n}\n",
               "%0 = neg(%x) : f32[2,3]\n  return", "redefined value %0"),
      bad_text("node_number_overflows", with_node("%99999999999999999999999 = neg(%x) : f32[2,3]"), "%9999",
               "expected %0"),
      bad_text("unknown_operand", with_node("%0 = neg(%q) : f32[2,3]"), "%q", "unknown value %q"),
      bad_text("operand_from_a_later_node", with_node("%0 = neg(%4) : f32[2,3]"), "%4",
               "unknown value %4 (no such node yet)"),
      bad_text("operand_is_the_node_itself", with_node("%0 = neg(%0) : f32[2,3]"), "%0)",
               "unknown value %0 (no such node yet)"),
      bad_text("operand_without_percent", with_node("%0 = neg(x) : f32[2,3]"), "x)",
               "expected an operand such as %0 or %x"),
      bad_text("operands_without_comma", with_node("%0 = add(%x %x) : f32[2,3]"),
               "%x) :", "expected ',' or ')' after an operand"),
      bad_text("binary_op_with_one_operand", with_node("%0 = add(%x) : f32[2,3]"), "add",
               "op add takes 2 input(s), got 1"),
      bad_text("unary_op_with_two_operands", with_node("%0 = neg(%x, %x) : f32[2,3]"), "neg",
               "op neg takes 1 input(s), got 2"),
      bad_text("where_with_two_operands", with_node("%0 = where(%c, %x) : f32[2,3]"), "where",
               "op where takes 3 input(s), got 2"),
      bad_text("concat_of_nothing", with_node("%0 = concat() {axis=0} : f32[2,3]"), "concat",
               "op concat refuses its inputs: needs at least one input"),
  };
}

std::vector<BadInputCase> attribute_cases() {
  return {
      bad_text("attribute_unknown", with_node("%0 = neg(%x) {axis=1} : f32[2,3]"),
               "axis=", "op neg has no attribute 'axis'"),
      bad_text("attribute_missing", with_node("%0 = sum(%x) {axes=[0]} : f32[3]"), "sum",
               "op sum needs attribute 'keep_dims'"),
      bad_text("attributes_missing_entirely", with_node("%0 = softmax(%x) : f32[2,3]"), "softmax",
               "op softmax needs attribute 'axis'"),
      bad_text("attribute_given_twice", with_node("%0 = softmax(%x) {axis=1, axis=1} : f32[2,3]"), "axis=1}",
               "attribute 'axis' is given twice"),
      bad_text("attribute_bool_for_list", with_node("%0 = sum(%x) {axes=true, keep_dims=false} : f32[]"), "true",
               "attribute 'axes' of op sum must be an integer list, got a boolean"),
      bad_text("attribute_real_for_integer", with_node("%0 = softmax(%x) {axis=1.0} : f32[2,3]"), "1.0",
               "attribute 'axis' of op softmax must be an integer, got a real"),
      bad_text("attribute_string_for_integer", with_node("%0 = softmax(%x) {axis=\"1\"} : f32[2,3]"), "\"1\"",
               "must be an integer, got a string"),
      bad_text("attribute_list_for_bool", with_node("%0 = sum(%x) {axes=[0], keep_dims=[1]} : f32[3]"), "[1]",
               "attribute 'keep_dims' of op sum must be a boolean, got an integer list"),
      bad_text("attribute_dtype_for_real", with_node("%0 = clamp(%x) {hi=f32, lo=0.0} : f32[2,3]"), "f32,",
               "attribute 'hi' of op clamp must be a real, got a dtype"),
      bad_text("attribute_unknown_word", with_node("%0 = softmax(%x) {axis=last} : f32[2,3]"), "last",
               "unknown attribute value 'last'"),
      bad_text("attribute_missing_equals", with_node("%0 = softmax(%x) {axis 1} : f32[2,3]"), "1}",
               "expected '=' after the attribute name"),
      bad_text("attribute_name_missing", with_node("%0 = softmax(%x) {=1} : f32[2,3]"), "=1}",
               "expected an attribute name, found '='"),
      bad_text("attributes_unclosed", with_node("%0 = softmax(%x) {axis=1 : f32[2,3]"), ": f32[2,3]\n",
               "expected ',' or '}' after an attribute"),
      bad_text("attribute_list_unclosed", with_node("%0 = sum(%x) {axes=[0, keep_dims=false} : f32[3]"), "keep_dims",
               "expected an integer in the list, found 'k'"),
      bad_text("attribute_integer_above_int64", with_node("%0 = softmax(%x) {axis=99999999999999999999} : f32[2,3]"),
               "99999", "expected an attribute value"),
      bad_text("attribute_list_entry_above_int64",
               with_node("%0 = sum(%x) {axes=[18446744073709551616], keep_dims=false} : f32[]"), "18446744073709551616",
               "expected an integer in the list"),
      bad_text("attribute_malformed_real", with_node("%0 = clamp(%x) {hi=1.2.3, lo=0.0} : f32[2,3]"), "1.2.3",
               "malformed number '1.2.3'"),
      bad_text("attribute_malformed_exponent", with_node("%0 = clamp(%x) {hi=1e, lo=0.0} : f32[2,3]"), "1e,",
               "malformed number '1e'"),
  };
}

// Well-formed text whose op refuses its inputs or attributes (reported at the op name).
std::vector<BadInputCase> rule_cases() {
  return {
      bad_text("rule_matmul_inner_dims", with_node("%0 = matmul(%x, %x) : f32[2,3]"), "matmul",
               "op matmul refuses its inputs: inner dimensions differ"),
      bad_text("rule_add_does_not_broadcast", with_node("%0 = add(%x, %w) : f32[2,3]"), "add",
               "op add refuses its inputs: shapes [2,3] and [3,2] do not broadcast"),
      bad_text("rule_neg_of_i32", with_node("%0 = neg(%i) : i32[2]"), "neg", "input must be f32, got i32[2]"),
      bad_text("rule_where_condition_not_bool", with_node("%0 = where(%x, %x, %x) : f32[2,3]"), "where",
               "condition (input 0) must be bool, got f32[2,3]"),
      bad_text("rule_softmax_axis_out_of_range", with_node("%0 = softmax(%x) {axis=5} : f32[2,3]"), "softmax",
               "axis 5 is out of range for rank 2"),
      bad_text("rule_sum_axis_repeated", with_node("%0 = sum(%x) {axes=[1,1], keep_dims=false} : f32[2]"), "sum",
               "must be sorted and distinct"),
      bad_text("rule_reshape_changes_count", with_node("%0 = reshape(%x) {shape=[7]} : f32[7]"), "reshape",
               "reshape to [7] changes the element count"),
      bad_text("rule_permute_repeats_axis", with_node("%0 = permute(%x) {perm=[0,0]} : f32[2,2]"), "permute",
               "names axis 0 twice"),
      bad_text("rule_full_i32_fraction", with_node("%0 = full() {dtype=i32, shape=[2], value=1.5} : i32[2]"), "full",
               "an i32 tensor needs an integer value in the i32 range, got 1.5"),
      bad_text("rule_full_negative_dim", with_node("%0 = full() {dtype=f32, shape=[-1], value=0.0} : f32[2]"), "full",
               "has a negative dimension -1"),
      bad_text("rule_arange_negative", with_node("%0 = arange() {dtype=i32, n=-4} : i32[0]"), "arange",
               "n must be >= 0, got -4"),
      bad_text("rule_clamp_lo_above_hi", with_node("%0 = clamp(%x) {hi=0.0, lo=1.0} : f32[2,3]"), "clamp",
               "lo must be <= hi"),
      bad_text("rule_clamp_nan_bound", with_node("%0 = clamp(%x) {hi=nan, lo=0.0} : f32[2,3]"), "clamp",
               "lo must be <= hi"),
      bad_text("rule_narrow_past_the_end", with_node("%0 = narrow(%x) {axis=1, length=3, start=2} : f32[2,3]"),
               "narrow", "start 2 + length 3 = 5"),
      bad_text("rule_pad_negative", with_node("%0 = pad(%x) {after=-1, axis=0, before=0} : f32[1,3]"), "pad",
               "after -1 is negative"),
      bad_text("rule_one_hot_depth_zero", with_node("%0 = one_hot(%i) {depth=0} : f32[2,0]"), "one_hot",
               "depth must be >= 1, got 0"),
      bad_text("rule_dropout_p_one", with_node("%0 = dropout(%x, %i) {p=1.0, salt=0} : f32[2,3]"), "dropout",
               "op dropout refuses its inputs"),
      bad_text("rule_cross_entropy_reduction", with_node("%0 = cross_entropy(%x, %i) {reduction=\"avg\"} : f32[]"),
               "cross_entropy", "reduction must be \"none\", \"mean\" or \"sum\", got \"avg\""),
      bad_text("rule_max_pool_on_2d", with_node("%0 = max_pool2d(%x) {kernel=2, padding=0, stride=2} : f32[1,1]"),
               "max_pool2d", "must be 4-D"),
  };
}

// conv2d's attributes: stride, padding and dilation as [height, width] lists, groups an integer.
const std::string kImageHead = "graph g(%x: f32[1,4,5,5], param %w: f32[2,2,3,3]) {\n";
std::string with_image_node(const std::string& line) { return kImageHead + "  " + line + "\n  return\n}\n"; }

std::vector<BadInputCase> conv_cases() {
  return {
      bad_text(
          "conv2d_stride_integer_not_list",
          with_image_node("%0 = conv2d(%x, %w) {dilation=[1,1], groups=2, padding=[0,0], stride=1} : f32[1,2,3,3]"),
          "1} :", "attribute 'stride' of op conv2d must be an integer list, got an integer"),
      bad_text("conv2d_missing_dilation",
               with_image_node("%0 = conv2d(%x, %w) {groups=2, padding=[0,0], stride=[1,1]} : f32[1,2,3,3]"), "conv2d",
               "op conv2d needs attribute 'dilation'"),
      bad_text(
          "conv2d_padding_one_value",
          with_image_node("%0 = conv2d(%x, %w) {dilation=[1,1], groups=2, padding=[1], stride=[1,1]} : f32[1,2,3,3]"),
          "conv2d", "padding must hold two values [height, width], got 1"),
      bad_text(
          "conv2d_dilation_zero",
          with_image_node("%0 = conv2d(%x, %w) {dilation=[1,0], groups=2, padding=[0,0], stride=[1,1]} : f32[1,2,3,3]"),
          "conv2d", "dilation must be >= 1, got 0 (width)"),
      bad_text(
          "conv2d_groups_not_dividing",
          with_image_node("%0 = conv2d(%x, %w) {dilation=[1,1], groups=3, padding=[0,0], stride=[1,1]} : f32[1,2,3,3]"),
          "conv2d", "groups 3 does not divide the input channels 4"),
      bad_text(
          "conv2d_weight_channels_not_per_group",
          with_image_node("%0 = conv2d(%x, %w) {dilation=[1,1], groups=1, padding=[0,0], stride=[1,1]} : f32[1,2,3,3]"),
          "conv2d", "channels differ"),
      bad_text("conv2d_weight_grad_groups_not_dividing",
               with_image_node("%0 = conv2d_weight_grad(%x, %x) {dilation=[1,1], groups=3, kernel_h=1, kernel_w=1, "
                               "padding=[0,0], stride=[1,1]} : f32[4,1,1,1]"),
               "conv2d_weight_grad", "groups 3 does not divide the input channels 4"),
  };
}

std::vector<BadInputCase> string_and_output_cases() {
  return {
      bad_text("location_unterminated", with_node("%0 = neg(%x) : f32[2,3] @\"a.cpp:1:2"), "\"a.cpp",
               "unterminated string"),
      bad_text("location_unknown_escape", with_node("%0 = neg(%x) : f32[2,3] @\"a\\q\":1:2"), "\\q",
               "unknown escape '\\q' in string"),
      bad_text("location_bad_hex_escape", with_node("%0 = neg(%x) : f32[2,3] @\"a\\xZZ\":1:2"), "\\xZZ",
               "bad \\x escape in string"),
      bad_text("location_unquoted_file", with_node("%0 = neg(%x) : f32[2,3] @a.cpp:1:2"), "a.cpp",
               "expected a quoted file name after '@'"),
      bad_text("location_without_line", with_node("%0 = neg(%x) : f32[2,3] @\"a.cpp\""), "return",
               "expected ':' and a line number after the file name"),
      bad_text("location_line_above_uint32", with_node("%0 = neg(%x) : f32[2,3] @\"a.cpp\":4294967296:1"), "4294967296",
               "expected a line number"),
      bad_text("location_negative_column", with_node("%0 = neg(%x) : f32[2,3] @\"a.cpp\":1:-2"), "-2",
               "expected a column number"),
      bad_text("quoted_input_name_unterminated", "graph g(%\"x: f32[2]) {\n  return\n}\n", "\"x",
               "unterminated string"),
      bad_text("output_of_unknown_value", kHead + "  return y=%nope\n}\n", "%nope", "unknown value %nope"),
      bad_text("output_of_missing_node", kHead + "  return y=%0\n}\n", "%0", "unknown value %0 (no such node yet)"),
      bad_text("output_named_twice", kHead + "  return y=%x, y=%w\n}\n", "y=%w", "output 'y' is named twice"),
      bad_text("output_missing_equals", kHead + "  return y %x\n}\n", "%x\n", "expected '=' after the output name"),
      bad_text("output_missing_value", kHead + "  return y=\n}\n", "}", "the output's value such as %3"),
      bad_text("output_trailing_comma", kHead + "  return y=%x,\n}\n", "}", "expected an output such as loss=%3"),
  };
}

std::vector<BadInputCase> parser_table() {
  std::vector<BadInputCase> all;
  for (auto part : {structure_cases(), header_cases(), type_cases(), node_cases(), attribute_cases(), rule_cases(),
                    conv_cases(), string_and_output_cases()}) {
    for (BadInputCase& c : part) all.push_back(std::move(c));
  }
  return all;
}

TG_BAD_INPUT_SUITE(Parser, parser_table);

}  // namespace
}  // namespace tg
