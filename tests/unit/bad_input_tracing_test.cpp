// Bad-input catalogue, tracing (tests/support/bad_input.h): graph building through the C++ API with
// inputs every op family's shape rule refuses (shapes, ranks, dtypes, axes, attributes). Each is a
// ShapeError naming the op, the input types, the rule and the user's call site (this file); the
// builder's graph is the state: a refused call must leave it as it was (no half-appended nodes).
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "support/bad_input.h"
#include "tensorgrad/ir/ops/api.h"
#include "tensorgrad/ir/text.h"

namespace tg {
namespace {

using testing::BadCall;
using testing::BadInputCase;
using testing::throws;

constexpr std::int64_t kInt64Max = std::numeric_limits<std::int64_t>::max();
const char* const kThisFile = "bad_input_tracing_test.cpp:";

// The inputs every tracing case can use, named by dtype and shape.
struct Traced {
  GraphBuilder builder{"trace"};
  TracingScope scope{builder};
  Tensor s = builder.input("s", {DType::f32, {}});
  Tensor v4 = builder.input("v4", {DType::f32, {4}});
  Tensor x23 = builder.input("x23", {DType::f32, {2, 3}});
  Tensor x32 = builder.input("x32", {DType::f32, {3, 2}});
  Tensor x43 = builder.input("x43", {DType::f32, {4, 3}});
  Tensor x234 = builder.input("x234", {DType::f32, {2, 3, 4}});
  Tensor x534 = builder.input("x534", {DType::f32, {5, 3, 4}});
  Tensor x233 = builder.input("x233", {DType::f32, {2, 3, 3}});
  Tensor x20 = builder.input("x20", {DType::f32, {2, 0}});
  Tensor i2 = builder.input("i2", {DType::i32, {2}});
  Tensor i23 = builder.input("i23", {DType::i32, {2, 3}});
  Tensor i3 = builder.input("i3", {DType::i32, {3}});
  Tensor c23 = builder.input("c23", {DType::boolean, {2, 3}});
  Tensor img = builder.input("img", {DType::f32, {1, 2, 5, 5}});
  Tensor kernel = builder.input("kernel", {DType::f32, {3, 2, 3, 3}});
  Tensor kernel4 = builder.input("kernel4", {DType::f32, {3, 4, 3, 3}});
  Tensor k9 = builder.input("k9", {DType::f32, {1, 2, 9, 9}});
  Tensor x542 = builder.input("x542", {DType::f32, {5, 4, 2}});
  bool has_output = (builder.output("taken", x23), true);  // for the name-taken case
};

using Body = std::function<void(Traced&)>;

// A call through the tracing API that must throw E with every fragment in its message; the graph
// (printed, with locations) must be the same after it.
// A ShapeError from an op names this file as the call site (at_call_site); one from
// GraphBuilder::input has none. check_graph: the graph must be unchanged.
template <class E = ShapeError>
BadInputCase traced(std::string name, Body body, std::vector<std::string> fragments,
                    bool at_call_site = std::is_same_v<E, ShapeError>, bool check_graph = true) {
  if (at_call_site) fragments.push_back(kThisFile);
  BadInputCase c{.name = std::move(name),
                 .setup =
                     [body, check_graph] {
                       auto t = std::make_shared<Traced>();
                       BadCall call{[t, body] { body(*t); }, {}};
                       if (check_graph) call.state = [t] { return print_graph(t->builder.graph()); };
                       return call;
                     },
                 .expected = throws<E>(),
                 .fragments = std::move(fragments)};
  if (at_call_site) {
    c.also = [](const std::exception& e) {
      const SourceLoc& loc = dynamic_cast<const ShapeError&>(e).location();
      EXPECT_NE(loc.file.find("bad_input_tracing_test.cpp"), std::string::npos) << loc.to_string();
      EXPECT_GT(loc.line, 0u);
    };
  }
  return c;
}

using BinaryFn = Tensor (*)(Operand, Operand, CallSite);
struct Binary {
  const char* name;
  BinaryFn fn;
};
const std::vector<Binary> kBinary = {{"add", add},   {"sub", sub},         {"mul", mul},
                                     {"div", div},   {"minimum", minimum}, {"maximum", maximum},
                                     {"less", less}, {"greater", greater}, {"equal", equal}};

using UnaryFn = Tensor (*)(const Tensor&, CallSite);
struct Unary {
  const char* name;
  UnaryFn fn;
};
const std::vector<Unary> kUnary = {{"neg", neg},     {"abs", abs},   {"square", square},   {"sqrt", sqrt},
                                   {"rsqrt", rsqrt}, {"exp", exp},   {"log", log},         {"sin", sin},
                                   {"cos", cos},     {"tanh", tanh}, {"sigmoid", sigmoid}, {"relu", relu},
                                   {"gelu", gelu},   {"silu", silu}};  // stop_gradient takes any dtype

using ReduceFn = Tensor (*)(const Tensor&, Axes, ReduceOptions, CallSite);
struct Reduce {
  const char* name;
  ReduceFn fn;
};
const std::vector<Reduce> kReduce = {{"sum", sum}, {"mean", mean}, {"max", max}, {"min", min}};

// Every elementwise op on inputs that do not broadcast, and on an input of the wrong dtype.
std::vector<BadInputCase> elementwise_cases() {
  std::vector<BadInputCase> out;
  for (const Binary& op : kBinary) {
    out.push_back(traced(std::string(op.name) + "_shapes_do_not_broadcast",
                         [fn = op.fn](Traced& t) { fn(t.x23, t.x43, CallSite::current()); },
                         {std::string(op.name) + "(f32[2,3], f32[4,3])", "do not broadcast", "axis -2"}));
    out.push_back(traced(std::string(op.name) + "_of_an_i32_input",
                         [fn = op.fn](Traced& t) { fn(t.x23, t.i23, CallSite::current()); },
                         {std::string(op.name) + "(f32[2,3], i32[2,3])", "input 1 must be f32, got i32[2,3]"}));
  }
  for (const Unary& op : kUnary) {
    out.push_back(traced(std::string(op.name) + "_of_a_bool_input",
                         [fn = op.fn](Traced& t) { fn(t.c23, CallSite::current()); },
                         {std::string(op.name) + "(bool[2,3])", "must be f32, got bool[2,3]"}));
  }
  out.push_back(traced("where_condition_not_bool", [](Traced& t) { where(t.x23, t.x23, t.x23); },
                       {"where(f32[2,3], f32[2,3], f32[2,3])", "condition (input 0) must be bool, got f32[2,3]"}));
  out.push_back(traced("where_branches_differ_in_dtype", [](Traced& t) { where(t.c23, t.x23, t.i23); },
                       {"where(bool[2,3], f32[2,3], i32[2,3])", "if_true and if_false must have the same dtype"}));
  out.push_back(traced("where_shapes_do_not_broadcast", [](Traced& t) { where(t.c23, t.x43, t.x23); },
                       {"where(bool[2,3], f32[4,3], f32[2,3])", "do not broadcast"}));
  out.push_back(traced("clamp_lo_above_hi", [](Traced& t) { clamp(t.x23, 1.0, -1.0); },
                       {"clamp(f32[2,3])", "lo must be <= hi, got lo=1 and hi=-1"}));
  out.push_back(traced("clamp_nan_bound", [](Traced& t) { clamp(t.x23, 0.0, std::nan("")); },
                       {"clamp(f32[2,3])", "lo must be <= hi"}));
  return out;
}

std::vector<BadInputCase> reduction_cases() {
  std::vector<BadInputCase> out;
  for (const Reduce& op : kReduce) {
    const std::string name = op.name;
    out.push_back(traced(name + "_axis_out_of_range",
                         [fn = op.fn](Traced& t) { fn(t.x23, 2, {}, CallSite::current()); },
                         {name + "(f32[2,3])", "axis 2 is out of range for rank 2"}));
    out.push_back(traced(name + "_axis_named_twice",
                         [fn = op.fn](Traced& t) {
                           fn(t.x234, Axes({1, -2}), {}, CallSite::current());
                         },
                         {name + "(f32[2,3,4])", "name the same axis twice"}));
  }
  out.push_back(traced("max_over_an_empty_axis", [](Traced& t) { max(t.x20, 1); },
                       {"max(f32[2,0])", "cannot reduce over empty axes [1] of shape [2,0]"}));
  out.push_back(traced("argmax_axis_out_of_range", [](Traced& t) { argmax(t.x23, 3); },
                       {"argmax(f32[2,3])", "axis 3 is out of range for rank 2"}));
  out.push_back(traced("argmin_axis_below_minus_rank", [](Traced& t) { argmin(t.x23, -3); },
                       {"argmin(f32[2,3])", "axis -3 is out of range for rank 2"}));
  out.push_back(traced("argmax_over_an_empty_axis", [](Traced& t) { argmax(t.x20, 1); },
                       {"argmax(f32[2,0])", "cannot take an index over the empty axis 1"}));
  out.push_back(traced("softmax_axis_out_of_range", [](Traced& t) { softmax(t.x23, 2); },
                       {"softmax(f32[2,3])", "axis 2 is out of range for rank 2"}));
  out.push_back(traced("log_softmax_of_a_scalar", [](Traced& t) { log_softmax(t.s); },
                       {"log_softmax(f32[])", "axis -1 is out of range for rank 0"}));
  out.push_back(traced("softmax_axis_int64_min",
                       [](Traced& t) { softmax(t.x23, std::numeric_limits<std::int64_t>::min()); },
                       {"softmax(f32[2,3])", "is out of range for rank 2"}));
  return out;
}

std::vector<BadInputCase> matmul_and_layout_cases() {
  return {
      traced("matmul_lhs_rank_0", [](Traced& t) { matmul(t.s, t.x43); },
             {"matmul(f32[], f32[4,3])", "lhs must have rank >= 1 ([K] or [..., M, K]), got a 0-d tensor"}),
      traced("matmul_rhs_rank_0", [](Traced& t) { matmul(t.x23, t.s); },
             {"matmul(f32[2,3], f32[])", "rhs must have rank >= 1"}),
      traced("matmul_vector_k_differs", [](Traced& t) { matmul(t.v4, t.x23); },
             {"matmul(f32[4], f32[2,3])", "inner dimensions differ: lhs [4] has K=4 (dim 0)"}),
      traced("matmul_inner_dims_differ", [](Traced& t) { matmul(t.x23, t.x43); },
             {"matmul(f32[2,3], f32[4,3])", "inner dimensions differ: lhs [2,3] has K=3"}),
      traced("matmul_batch_dims_differ", [](Traced& t) { matmul(t.x234, t.x542); },
             {"matmul(f32[2,3,4], f32[5,4,2])",
              "batch dimensions do not broadcast: lhs [2,3,4] dim 0 has size 2 but rhs [5,4,2] dim 0 has size 5"}),
      traced("matmul_i32_operand", [](Traced& t) { matmul(t.i23, t.x32); }, {"matmul(i32[2,3], f32[3,2])", "f32"}),
      traced("reshape_changes_the_element_count",
             [](Traced& t) {
               reshape(t.x23, {4, 2});
             },
             {"reshape(f32[2,3])", "reshape to [4,2] changes the element count: 6"}),
      traced("reshape_two_wildcards",
             [](Traced& t) {
               reshape(t.x23, {-1, -1});
             },
             {"reshape(f32[2,3])", "shape [-1,-1] has more than one -1"}),
      traced("reshape_negative_dim",
             [](Traced& t) {
               reshape(t.x23, {-2, -3});
             },
             {"reshape(f32[2,3])", "has a negative dimension -2"}),
      traced("reshape_wildcard_cannot_divide",
             [](Traced& t) {
               reshape(t.x23, {4, -1});
             },
             {"reshape(f32[2,3])", "cannot infer the -1 in [4,-1]"}),
      traced("permute_too_few_entries",
             [](Traced& t) {
               permute(t.x234, {1, 0});
             },
             {"permute(f32[2,3,4])", "perm [1,0] has 2 entries for rank 3"}),
      traced("permute_entry_out_of_range",
             [](Traced& t) {
               permute(t.x23, {0, 2});
             },
             {"permute(f32[2,3])", "perm entry 2 is out of range for rank 2"}),
      traced("permute_axis_twice",
             [](Traced& t) {
               permute(t.x234, {0, 1, 1});
             },
             {"permute(f32[2,3,4])", "names axis 1 twice"}),
      traced("swap_axes_out_of_range", [](Traced& t) { swap_axes(t.x23, 0, 5); },
             {"swap_axes(f32[2,3])", "axis 5 is out of range for rank 2"}),
      traced("broadcast_to_incompatible",
             [](Traced& t) {
               broadcast_to(t.x23, {4, 3});
             },
             {"broadcast_to(f32[2,3])", "[2,3] does not broadcast to [4,3]"}),
      traced("broadcast_to_lower_rank", [](Traced& t) { broadcast_to(t.x23, {3}); },
             {"broadcast_to(f32[2,3])", "does not broadcast to [3]"}),
      traced("broadcast_to_negative_dim",
             [](Traced& t) {
               broadcast_to(t.x23, {-2, 3});
             },
             {"broadcast_to(f32[2,3])", "negative dimension -2"}),
      traced("sum_to_shape_incompatible", [](Traced& t) { sum_to_shape(t.x23, {4}); },
             {"sum_to_shape(f32[2,3])", "target [4] does not broadcast to the input shape [2,3]"}),
  };
}

std::vector<BadInputCase> creation_and_structure_cases() {
  return {
      traced("full_negative_dim",
             [](Traced&) {
               full({2, -3}, 1.0);
             },
             {"full()", "shape [2,-3] has a negative dimension -3"}),
      traced("full_i32_fraction", [](Traced&) { full({2}, 0.5, DType::i32); },
             {"full()", "an i32 tensor needs an integer value in the i32 range, got 0.5"}),
      traced("full_i32_above_range", [](Traced&) { full({2}, 3e9, DType::i32); },
             {"full()", "an i32 tensor needs an integer value in the i32 range"}),
      traced("full_bool_two", [](Traced&) { full({2}, 2.0, DType::boolean); },
             {"full()", "a bool tensor needs the value 0 or 1, got 2"}),
      traced("zeros_negative_dim", [](Traced&) { zeros({-1}); }, {"zeros()", "negative dimension -1"}),
      traced("arange_negative", [](Traced&) { arange(-1); }, {"arange()", "n must be >= 0, got -1"}),
      traced("arange_bool", [](Traced&) { arange(3, DType::boolean); },
             {"arange()", "dtype must be a float dtype (f32, f16, bf16) or i32, got bool"}),
      traced("arange_beyond_i32_indices", [](Traced&) { arange(std::int64_t{1} << 40); },
             {"arange()", "is too large for i32 indices"}),
      traced("narrow_past_the_end", [](Traced& t) { narrow(t.x23, 1, 2, 2); },
             {"narrow(f32[2,3])", "start 2 + length 2 = 4"}),
      traced("narrow_negative_start", [](Traced& t) { narrow(t.x23, 1, -1, 1); },
             {"narrow(f32[2,3])", "start -1 is negative"}),
      traced("narrow_zero_length", [](Traced& t) { narrow(t.x23, 0, 0, 0); },
             {"narrow(f32[2,3])", "length 0 is less than 1"}),
      traced("narrow_axis_of_a_scalar", [](Traced& t) { narrow(t.s, 0, 0, 1); },
             {"narrow(f32[])", "a 0-d input has no axis 0"}),
      traced("pad_negative_before", [](Traced& t) { pad(t.x23, 0, -1, 0); },
             {"pad(f32[2,3])", "before -1 is negative"}),
      traced("pad_axis_out_of_range", [](Traced& t) { pad(t.x23, 2, 1, 1); },
             {"pad(f32[2,3])", "axis 2 is out of range for rank 2"}),
      traced("concat_of_nothing", [](Traced&) { concat({}, 0); }, {"concat()", "needs at least one input"}),
      traced("concat_ranks_differ",
             [](Traced& t) {
               concat({t.x23, t.v4}, 0);
             },
             {"concat(f32[2,3], f32[4])", "input 1 has rank 1"}),
      traced("concat_dtypes_differ",
             [](Traced& t) {
               concat({t.x23, t.i23}, 0);
             },
             {"concat(f32[2,3], i32[2,3])", "input 1 is i32[2,3] but input 0 is f32[2,3]"}),
      traced("concat_sizes_differ_off_axis",
             [](Traced& t) {
               concat({t.x23, t.x43}, 1);
             },
             {"concat(f32[2,3], f32[4,3])", "input 1 has size 4"}),
      traced("stack_shapes_differ",
             [](Traced& t) {
               stack({t.x23, t.x32});
             },
             {"stack(f32[2,3], f32[3,2])"}),
      traced("stack_of_nothing", [](Traced&) { stack({}); }, {"stack()", "needs at least one input"}),
      traced("split_sizes_do_not_sum",
             [](Traced& t) {
               split(t.x23, {1, 1}, 1);
             },
             {"split(f32[2,3])", "sizes [1,1] sum to 2 but axis 1"}),
      traced("split_sizes_overflow",
             [](Traced& t) {
               split(t.x23, {kInt64Max, kInt64Max}, 1);
             },
             {"split(f32[2,3])", "sum past int64"}),
      traced("split_zero_size",
             [](Traced& t) {
               split(t.x23, {3, 0}, 1);
             },
             {"split(f32[2,3])", "size 0 in [3,0] is less than 1"}),
      traced("flatten_axis_out_of_range", [](Traced& t) { flatten(t.x23, 2); },
             {"flatten(f32[2,3])", "start_axis 2 is out of range for rank 2"}),
      traced("split_heads_uneven", [](Traced& t) { split_heads(t.x23, 2); }, {"split_heads(f32[2,3])", "3"}),
      traced("merge_heads_rank_2", [](Traced& t) { merge_heads(t.x23); },
             {"merge_heads(f32[2,3])", "needs rank >= 3 ([..., H, T, d]), got rank 2"}),
  };
}

std::vector<BadInputCase> indexing_and_loss_cases() {
  return {
      traced("one_hot_depth_zero", [](Traced& t) { one_hot(t.i2, 0); },
             {"one_hot(i32[2])", "depth must be >= 1, got 0"}),
      traced("one_hot_of_floats", [](Traced& t) { one_hot(t.v4, 3); }, {"one_hot(f32[4])", "must be i32"}),
      traced("embedding_table_rank_1", [](Traced& t) { embedding(t.v4, t.i2); },
             {"embedding(f32[4], i32[2])", "table must be a [V, D] matrix, got rank 1"}),
      traced("embedding_float_indices", [](Traced& t) { embedding(t.x23, t.v4); },
             {"embedding(f32[2,3], f32[4])", "must be i32"}),
      traced("take_along_axis_ranks_differ", [](Traced& t) { take_along_axis(t.x23, t.i2, 1); },
             {"take_along_axis(f32[2,3], i32[2])", "x and indices must have the same rank, got 2 and 1"}),
      traced("take_along_axis_off_axis_size", [](Traced& t) { take_along_axis(t.x43, t.i23, 1); },
             {"take_along_axis(f32[4,3], i32[2,3])", "axis 0 has size 4 in x but"}),
      traced("take_along_axis_axis_out_of_range", [](Traced& t) { take_along_axis(t.x23, t.i23, 2); },
             {"take_along_axis(f32[2,3], i32[2,3])", "axis 2 is out of range for rank 2"}),
      traced("scatter_add_shapes_differ", [](Traced& t) { scatter_add(t.x32, t.i23, 1, 3); },
             {"scatter_add(f32[3,2], i32[2,3])", "updates and indices must have the same shape, got [3,2] and [2,3]"}),
      traced("scatter_add_negative_size", [](Traced& t) { scatter_add(t.x23, t.i23, 1, -1); },
             {"scatter_add(f32[2,3], i32[2,3])", "size must be >= 0, got -1"}),
      traced("softmax_causal_not_square", [](Traced& t) { softmax_causal(t.x23); },
             {"softmax_causal(f32[2,3])", "the last two axes must be equal (a square [..., T, T] matrix), got 2"}),
      traced("where_causal_rank_1", [](Traced& t) { where_causal(t.v4, 0.0); },
             {"where_causal(f32[4])", "needs a [..., T, T] input of rank >= 2, got rank 1"}),
      traced("cross_entropy_targets_shape", [](Traced& t) { cross_entropy(t.x23, t.i3); },
             {"cross_entropy(f32[2,3], i32[3])", "targets must have the input's shape without the class axis"}),
      traced("cross_entropy_float_targets", [](Traced& t) { cross_entropy(t.x23, t.v4); },
             {"cross_entropy(f32[2,3], f32[4])", "i32"}),
      traced("nll_loss_of_a_scalar", [](Traced& t) { nll_loss(t.s, t.i2); },
             {"nll_loss(f32[], i32[2])", "input 0 needs a class axis: rank >= 1, got rank 0"}),
      traced("nll_loss_no_classes", [](Traced& t) { nll_loss(t.x20, t.i2); },
             {"nll_loss(f32[2,0], i32[2])", "the class axis must have at least one class, got 0"}),
  };
}

std::vector<BadInputCase> image_random_norm_cases() {
  return {
      traced("conv2d_input_rank_3", [](Traced& t) { conv2d(t.x234, t.kernel); },
             {"conv2d(f32[2,3,4], f32[3,2,3,3])", "must be 4-D"}),
      traced("conv2d_channels_differ", [](Traced& t) { conv2d(t.img, t.kernel4); },
             {"conv2d(f32[1,2,5,5], f32[3,4,3,3])", "channels differ: input [1,2,5,5] has 2"}),
      traced("conv2d_stride_zero", [](Traced& t) { conv2d(t.img, t.kernel, {.stride = 0}); },
             {"conv2d(f32[1,2,5,5], f32[3,2,3,3])", "stride must be >= 1, got 0"}),
      traced("conv2d_negative_padding", [](Traced& t) { conv2d(t.img, t.kernel, {.padding = -1}); },
             {"conv2d(f32[1,2,5,5], f32[3,2,3,3])", "padding must be >= 0, got -1"}),
      traced("conv2d_kernel_larger_than_image", [](Traced& t) { conv2d(t.img, t.k9); },
             {"conv2d(f32[1,2,5,5], f32[1,2,9,9])", "kernel height 9 exceeds the padded input"}),
      traced("max_pool2d_kernel_zero", [](Traced& t) { max_pool2d(t.img, 0); },
             {"max_pool2d(f32[1,2,5,5])", "kernel must be >= 1, got 0"}),
      traced("max_pool2d_padding_past_half_kernel", [](Traced& t) { max_pool2d(t.img, 2, {.padding = 2}); },
             {"max_pool2d(f32[1,2,5,5])", "padding 2 exceeds half the kernel 2"}),
      traced("max_pool2d_on_a_matrix", [](Traced& t) { max_pool2d(t.x23, 2); },
             {"max_pool2d(f32[2,3])", "must be 4-D"}),
      traced("nearest_upsample2d_factor_zero", [](Traced& t) { nearest_upsample2d(t.img, 0); },
             {"nearest_upsample2d(f32[1,2,5,5])"}),
      traced("dropout_p_one", [](Traced& t) { dropout(t.x23, 1.0); },
             {"dropout(f32[2,3])", "p must be in [0, 1), got 1.0"}),
      traced("dropout_p_negative", [](Traced& t) { dropout(t.x23, -0.25); },
             {"dropout(f32[2,3])", "p must be in [0, 1), got -0.25"}),
      traced("dropout_p_nan", [](Traced& t) { dropout(t.x23, std::nan("")); },
             {"dropout(f32[2,3])", "p must be in [0, 1)"}),
      traced("dropout_of_i32", [](Traced& t) { dropout(t.i23, 0.5); }, {"dropout(i32[2,3], i32[])", "must be f32"}),
      traced("randn_negative_dim",
             [](Traced&) {
               randn({3, -1});
             },
             {"randn", "shape [3,-1] has a negative dimension -1"}),
      traced("layer_norm_gain_wrong_shape", [](Traced& t) { layer_norm(t.x23, t.v4, std::nullopt); },
             {"layer_norm(f32[2,3], f32[4])", "must have shape [3] (the last axis of the input), got"}),
      traced("rms_norm_of_a_scalar", [](Traced& t) { rms_norm(t.s, std::nullopt); },
             {"rms_norm(f32[])", "the input needs at least one axis to normalize over, got a 0-d tensor"}),
  };
}

// Misuse of the builder itself: tg::Error (the builder's documented error), naming the input.
std::vector<BadInputCase> builder_cases() {
  return {
      traced<Error>("input_name_taken",
                    [](Traced& t) {
                      t.builder.input("x23", {DType::f32, {1}});
                    },
                    {"graph 'trace' already has an input named 'x23'"}),
      traced<ShapeError>(
          "input_negative_dim",
          [](Traced& t) {
            t.builder.input("bad", {DType::f32, {2, -1}});
          },
          {"input 'bad'", "shape [2,-1] has a negative dimension -1 (axis 1)"}, false),
      traced<Error>(
          "step_seed_input_of_the_wrong_type",
          [](Traced& t) {
            t.builder.input(kStepSeedInput, {DType::f32, {}});
            t.builder.step_seed();
          },
          {"input 'step_seed' is reserved for the step seed and must be i32[]"}, false,
          /*check_graph=*/false),  // the f32 input itself is accepted; step_seed() refuses it
      traced<Error>("output_name_taken", [](Traced& t) { t.builder.output("taken", t.x32); },
                    {"graph 'trace' already has an output named 'taken'"}),
      traced<Error>("output_of_another_graph",
                    [](Traced& t) {
                      GraphBuilder other("other");
                      t.builder.output("y", other.input("z", {DType::f32, {1}}));
                    },
                    {"output 'y' is a tensor of another graph"}),
      traced<Error>("empty_tensor", [](Traced&) { neg(Tensor()); }, {"use of an empty tg::Tensor"}),
      traced<Error>("dim_out_of_range", [](Traced& t) { (void)t.x23.dim(2); },
                    {"axis 2 is out of range for a tensor of type f32[2,3]"}),
      traced("operand_of_another_graph",
             [](Traced& t) {
               GraphBuilder other("other");
               add(t.x23, other.input("z", {DType::f32, {2, 3}}));
             },
             {"add(", "an input belongs to another graph being traced"}),
  };
}

std::vector<BadInputCase> tracing_table() {
  std::vector<BadInputCase> all;
  for (auto part : {elementwise_cases(), reduction_cases(), matmul_and_layout_cases(), creation_and_structure_cases(),
                    indexing_and_loss_cases(), image_random_norm_cases(), builder_cases()}) {
    for (BadInputCase& c : part) all.push_back(std::move(c));
  }
  return all;
}

TG_BAD_INPUT_SUITE(Tracing, tracing_table);

// Huge attributes whose shape arithmetic overflows int64 (issue 15, class (a)): each must be a
// ShapeError, not a wrapped size or a crash.
std::vector<BadInputCase> overflow_table() {
  const std::int64_t big = std::int64_t{1} << 32;
  return {
      traced("full_of_2_pow_32_squared",
             [big](Traced&) {
               full({big, big}, 0.0);
             },
             {"full()", "[4294967296,4294967296]"}),
      traced("zeros_of_int64_max_times_2",
             [](Traced&) {
               zeros({kInt64Max, 2});
             },
             {"zeros()"}),
      traced("reshape_to_2_pow_32_squared",
             [big](Traced& t) {
               reshape(t.x23, {big, big, 0});
             },
             {"reshape(f32[2,3])"}),
      traced("pad_before_plus_after_overflows", [](Traced& t) { pad(t.x23, 0, kInt64Max, kInt64Max); },
             {"pad(f32[2,3])"}),
      traced("narrow_start_near_int64_max", [](Traced& t) { narrow(t.x23, 1, kInt64Max, 2); }, {"narrow(f32[2,3])"}),
      traced("conv2d_padding_near_int64_max", [](Traced& t) { conv2d(t.img, t.kernel, {.padding = kInt64Max / 2}); },
             {"conv2d(f32[1,2,5,5], f32[3,2,3,3])"}),
      traced("broadcast_to_2_pow_32_squared",
             [big](Traced& t) {
               broadcast_to(t.s, {big, big});
             },
             {"broadcast_to(f32[])"}),
      traced("randn_of_2_pow_32_squared",
             [big](Traced&) {
               randn({big, big});
             },
             {"randn"}),
  };
}

TG_BAD_INPUT_SUITE(TracingOverflow, overflow_table);

}  // namespace
}  // namespace tg
