// The indexing family (one_hot, embedding, take_along_axis, scatter_add, softmax_causal,
// where_causal) on the Vulkan executor against the f64 oracle: the ops' own samples, hand-picked
// shapes (rank-0 indices, size-1 axes, extents around the 256-invocation workgroup, empty values,
// more output elements or rows than the 65535 workgroups cover), the gradient graphs of the
// differentiable ops, and out-of-range indices reported as the interpreter's RuntimeError. Data
// movement (one_hot, embedding, take_along_axis, where_causal) must be bit-exact; scatter_add and
// softmax_causal meet graph_tolerance, and scatter_add's serial mode equals the f32 interpreter's
// sums bit for bit (the same summation order). Under the validation layer when TG_VK_VALIDATION=1.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "property/graph_gen.h"
#include "support/library.h"
#include "support/op_seed.h"
#include "support/tolerance.h"
#include "tensorgrad/ir/ops/ids/indexing.h"
#include "tensorgrad/vk/executor.h"
#include "vk_oracle_check.h"
#include "vk_test_support.h"

namespace tg::vk {
namespace {

using testing::VkTest;

using testing::random_f32;
using testing::random_indices;

enum class Compare { exact, tolerance };

// Runs g on Vulkan and on the f64 oracle. `exact`: every output equal to the oracle (data movement
// of f32 values loses nothing); `tolerance`: graph_tolerance relative to max(1, largest |value|)
// as the property suites allow an f32 run, unless the caller gives the bound. With `thorough`, also a run with guard
// regions (no write outside a value) and a replay that must give the same bits.
void check(const std::shared_ptr<Context>& ctx, const Graph& g, const TensorMap& in, Compare compare,
           bool thorough = true, std::optional<double> tolerance = std::nullopt) {
  testing::check_against_oracle(ctx, g, in,
                                {.otherwise = compare == Compare::exact ? std::optional<double>(0.0) : tolerance,
                                 .replay = thorough,
                                 .guards = thorough});
}

constexpr OpId kFamily[] = {op::OneHot,     op::Embedding,     op::TakeAlongAxis,
                            op::ScatterAdd, op::SoftmaxCausal, op::WhereCausal};

bool exact_op(OpId op) { return op_def(op).tolerance == ToleranceClass::exact; }

TEST_F(VkTest, IndexingSamplesMatchTheF64Oracle) {
  auto ctx = make_context();
  for (const OpId op : kFamily) {
    ASSERT_TRUE(has_kernel(op)) << op_name(op);
    for (std::uint64_t seed = 1; seed <= 25; ++seed) {
      SampleRng rng(seed * 7919 + tg::testing::op_seed(op));
      const auto sample = op_def(op).samples(rng, std::nullopt);
      if (!sample) continue;
      const tg::testing::GraphCase c = tg::testing::build_single_op(op, *sample, rng);
      SCOPED_TRACE(std::string(op_name(op)) + " seed " + std::to_string(seed) + tg::testing::describe(c));
      check(ctx, c.graph, c.inputs, exact_op(op) ? Compare::exact : Compare::tolerance, seed <= 3);
    }
  }
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

// Every differentiable op's gradient graph (loss = sum(y * w)) on a few of its samples. The
// gradients use ops of other families; a graph with an op that has no Vulkan kernel yet is skipped
// naming it, after every graph that can run has been checked.
TEST_F(VkTest, IndexingGradientGraphsMatchTheF64Oracle) {
  auto ctx = make_context();
  std::vector<std::string> missing;
  int checked = 0;
  for (const OpId op : kFamily) {
    if (!op_def(op).differentiable) continue;
    for (std::uint64_t seed = 1; seed <= 4; ++seed) {
      SampleRng rng(seed * 104729 + tg::testing::op_seed(op));
      const auto sample = op_def(op).samples(rng, std::nullopt);
      if (!sample) continue;
      tg::testing::GraphCase c = tg::testing::build_single_op(op, *sample, rng);
      const ValueId y = *c.graph.find_output("y");
      const TensorType y_type = c.graph.type(y);
      if (y_type.dtype != DType::f32) continue;  // take_along_axis on i32/bool: nothing to differentiate
      GraphBuilder b(c.graph.name());
      b.mutable_graph() = c.graph;
      {
        TracingScope scope(b);
        b.output("loss", sum(b.wrap(y) * b.input("w", y_type)));
      }
      c.inputs.emplace("w", random_f32(y_type.shape, static_cast<std::uint32_t>(seed)));
      std::vector<std::string> wrt;
      for (const auto& in : c.graph.inputs())
        if (c.graph.type(in.value).dtype == DType::f32) wrt.push_back(in.name);
      const Graph grads = differentiate(b.take(), {.loss = "loss", .wrt = wrt});
      const auto lacking =
          std::find_if(grads.nodes().begin(), grads.nodes().end(), [](const Node& n) { return !has_kernel(n.op); });
      if (lacking != grads.nodes().end()) {
        missing.push_back(std::string(op_name(op)) + "'s gradient needs '" + std::string(op_name(lacking->op)) + "'");
        continue;
      }
      SCOPED_TRACE(std::string(op_name(op)) + " gradient, seed " + std::to_string(seed) + "\n" +
                   print_graph(grads, {.locations = false}));
      check(ctx, grads, c.inputs, Compare::tolerance, false);
      ++checked;
    }
  }
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
  EXPECT_GE(checked + static_cast<int>(missing.size()), 5) << "every differentiable op should have a sample";
  if (!missing.empty()) {
    std::sort(missing.begin(), missing.end());
    missing.erase(std::unique(missing.begin(), missing.end()), missing.end());
    GTEST_SKIP() << checked << " gradient graphs checked; skipped, no Vulkan kernel yet:\n"
                 << testing::join_lines(missing);
  }
}

TEST_F(VkTest, IndexingOneHotAndEmbeddingShapes) {
  auto ctx = make_context();
  GraphBuilder b("one_hot_embedding");
  TracingScope scope(b);
  Tensor scalar = b.input("scalar", {DType::i32, {}});
  Tensor many = b.input("many", {DType::i32, {3, 1, 100}});
  Tensor empty = b.input("empty", {DType::i32, {2, 0}});
  Tensor narrow_table = b.input("narrow_table", {DType::f32, {1, 1}});
  Tensor wide_table = b.input("wide_table", {DType::f32, {9, 257}});
  Tensor no_columns = b.input("no_columns", {DType::f32, {9, 0}});
  Tensor zeros = b.input("zeros", {DType::i32, {5}});
  b.output("scalar_d1", one_hot(scalar, 1));
  b.output("scalar_d300", one_hot(scalar, 300));
  b.output("many_d9", one_hot(many, 9));
  b.output("many_d257", one_hot(many, 257));
  b.output("empty_d4", one_hot(empty, 4));
  b.output("emb_scalar", embedding(wide_table, scalar));
  b.output("emb_many", embedding(wide_table, many));
  b.output("emb_narrow", embedding(narrow_table, zeros));
  b.output("emb_empty", embedding(wide_table, empty));
  b.output("emb_no_columns", embedding(no_columns, many));
  const Graph g = b.take();
  check(ctx, g,
        {{"scalar", HostTensor::i32({}, {0})},
         {"many", random_indices({3, 1, 100}, 9, 1)},
         {"empty", HostTensor::i32({2, 0}, {})},
         {"narrow_table", random_f32({1, 1}, 2)},
         {"wide_table", random_f32({9, 257}, 3)},
         {"no_columns", HostTensor::f32({9, 0}, {})},
         {"zeros", HostTensor::i32({5}, {0, 0, 0, 0, 0})}},
        Compare::exact);
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

// More output elements than 65535 workgroups of 256 invocations cover, so the grid-stride loops
// wrap: one_hot and embedding of 65537 indices x 256 = 16,777,472 outputs, where_causal on
// 16,776,964 elements. take_along_axis cannot wrap this cheaply on lavapipe: its output and
// indices both have the launch's element count, 2 x 64 MiB above the 128 MiB plan limit (the
// same grid-stride loop is covered by the ops here).
TEST_F(VkTest, IndexingGridStrideWrapsPastTheWorkgroupLimit) {
  auto ctx = make_context();
  const HostTensor idx_values = random_indices({65537}, 10, 5);
  {
    GraphBuilder b("wrap_one_hot");
    TracingScope scope(b);
    b.output("y", one_hot(b.input("idx", {DType::i32, {65537}}), 256));
    const Graph g = b.take();
    check(ctx, g, {{"idx", idx_values}}, Compare::exact, false);
  }
  {
    GraphBuilder b("wrap_embedding");
    TracingScope scope(b);
    Tensor table = b.input("table", {DType::f32, {10, 256}});
    b.output("y", embedding(table, b.input("idx", {DType::i32, {65537}})));
    const Graph g = b.take();
    check(ctx, g, {{"idx", idx_values}, {"table", random_f32({10, 256}, 6)}}, Compare::exact, false);
  }
  {
    GraphBuilder b("wrap_where_causal");
    TracingScope scope(b);
    Tensor x = b.input("x", {DType::f32, {4194241, 2, 2}});
    b.output("y", where_causal(x, -7.5));
    const Graph g = b.take();
    check(ctx, g, {{"x", random_f32({4194241, 2, 2}, 7)}}, Compare::exact, false);
  }
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

TEST_F(VkTest, IndexingTakeAlongAxisEveryAxisAndDtype) {
  auto ctx = make_context();
  GraphBuilder b("take_along_axis");
  TracingScope scope(b);
  const Shape shape{3, 5, 1, 70};
  Tensor x = b.input("x", {DType::f32, shape});
  Tensor xi = b.input("xi", {DType::i32, {4, 6}});
  Tensor xb = b.input("xb", {DType::boolean, {4, 6}});
  TensorMap in{{"x", random_f32(shape, 11)}};
  std::mt19937 rng(12);
  std::vector<double> ints(24), bools(24);
  for (double& v : ints) v = static_cast<double>(static_cast<std::int32_t>(rng()));
  for (double& v : bools) v = static_cast<double>(rng() & 1u);
  in.emplace("xi", HostTensor::of({DType::i32, {4, 6}}, ints));
  in.emplace("xb", HostTensor::of({DType::boolean, {4, 6}}, bools));
  for (std::int64_t axis = 0; axis < 4; ++axis) {
    for (const std::int64_t extent : {std::int64_t{1}, std::int64_t{9}}) {  // fewer and more than x's extent
      Shape index_shape = shape;
      index_shape[static_cast<std::size_t>(axis)] = extent;
      const std::string name = "i" + std::to_string(axis) + "_" + std::to_string(extent);
      Tensor idx = b.input(name, {DType::i32, index_shape});
      in.emplace(name, random_indices(index_shape, shape[static_cast<std::size_t>(axis)], 13 + axis));
      b.output("take" + name, take_along_axis(x, idx, axis));
    }
  }
  Tensor ii = b.input("ii", {DType::i32, {4, 300}});
  in.emplace("ii", random_indices({4, 300}, 6, 17));
  b.output("take_i32", take_along_axis(xi, ii, -1));
  b.output("take_bool", take_along_axis(xb, ii, 1));
  const Graph g = b.take();
  check(ctx, g, in, Compare::exact);
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

// Both modes (serial up to 256 terms, a workgroup per output element past that), every axis, an
// empty update axis (all zeros out) and more output elements than workgroups in the group mode.
TEST_F(VkTest, IndexingScatterAddBothModesEveryAxis) {
  auto ctx = make_context();
  GraphBuilder b("scatter_add");
  TracingScope scope(b);
  TensorMap in;
  std::vector<std::string> serial_outputs;
  const auto add_case = [&](const Shape& shape, std::int64_t axis, std::int64_t size) {
    const std::string name = std::to_string(in.size());
    Tensor u = b.input("u" + name, {DType::f32, shape});
    Tensor i = b.input("i" + name, {DType::i32, shape});
    in.emplace("u" + name, random_f32(shape, 20 + static_cast<std::uint32_t>(in.size())));
    in.emplace("i" + name, random_indices(shape, size, 40 + static_cast<std::uint32_t>(in.size())));
    const std::string out = "s" + name + "_axis" + std::to_string(axis);
    b.output(out, scatter_add(u, i, axis, size));
    if (shape[static_cast<std::size_t>(axis)] <= 256) serial_outputs.push_back(out);
  };
  for (std::int64_t axis = 0; axis < 3; ++axis) add_case({6, 5, 7}, axis, 4);
  add_case({1, 256}, 1, 3);     // serial, the longest
  add_case({2, 257, 3}, 1, 5);  // group mode, just past
  add_case({1000, 2}, 0, 1);    // group mode, every update on one element
  add_case({300}, 0, 300);      // more outputs than updates per column
  add_case({4, 1}, 1, 6);       // one update per column
  {
    Tensor u = b.input("u_empty", {DType::f32, {3, 0}});
    Tensor i = b.input("i_empty", {DType::i32, {3, 0}});
    in.emplace("u_empty", HostTensor::f32({3, 0}, {}));
    in.emplace("i_empty", HostTensor::i32({3, 0}, {}));
    b.output("s_empty_axis", scatter_add(u, i, 1, 4));  // [3, 4] of zeros
  }
  const Graph g = b.take();
  check(ctx, g, in, Compare::tolerance);
  // Serial mode adds in the interpreter's order, so it equals the f32 interpreter bit for bit.
  ASSERT_FALSE(serial_outputs.empty());
  Program program(ctx, g);
  const TensorMap got = program.run(in);
  const TensorMap f32 = interpret(g, in, {.compute = ComputeType::f32}).outputs;
  for (const std::string& name : serial_outputs) {
    EXPECT_EQ(f32.at(name).to_f64(), got.at(name).to_f64()) << name << " differs from the f32 interpreter";
  }
  // Group mode with 65600 output elements, so workgroups loop grid-stride; one run (65600
  // workgroups with barriers cost lavapipe about a second each time).
  GraphBuilder wide("scatter_add_wide");
  TracingScope wide_scope(wide);
  wide.output("y", scatter_add(wide.input("u", {DType::f32, {257}}), wide.input("i", {DType::i32, {257}}), 0, 65600));
  const Graph wide_graph = wide.take();
  HostTensor wide_indices = random_indices({257}, 65600, 61);
  for (const std::size_t k : {0, 1, 100, 256}) wide_indices.set(k, 65599 - static_cast<double>(k % 64));  // past 65535
  check(ctx, wide_graph, {{"u", random_f32({257}, 60)}, {"i", wide_indices}}, Compare::tolerance, false);
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

TEST_F(VkTest, IndexingSoftmaxCausalRowLengthsAndStability) {
  auto ctx = make_context();
  for (const std::int64_t t : {1, 5, 32, 33, 255, 256, 257, 600}) {
    SCOPED_TRACE("T = " + std::to_string(t));
    GraphBuilder b("softmax_causal");
    TracingScope scope(b);
    Tensor x = b.input("x", {DType::f32, {2, t, t}});
    b.output("y", softmax_causal(x));
    b.output("masked", where_causal(x, -1e9));
    const Graph g = b.take();
    check(ctx, g, {{"x", random_f32({2, t, t}, 60)}}, Compare::tolerance, t <= 33);
    // Scores around 1000 (exp overflows without subtracting the maximum). x - max is exact there,
    // so the outputs (<= 1) keep the reduction class's bound relative to 1, not to the inputs.
    GraphBuilder bb("softmax_causal_big");
    TracingScope big_scope(bb);
    bb.output("y", softmax_causal(bb.input("x", {DType::f32, {t, t}})));
    const Graph gb = bb.take();
    const double tol = 4.0 * std::numeric_limits<float>::epsilon() * tolerance_ulps(ToleranceClass::reduction, t);
    check(ctx, gb, {{"x", random_f32({t, t}, 61, 990.f, 1010.f)}}, Compare::tolerance, false, tol);
  }
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

// Columns past the row are never read: NaN and +inf there change nothing, and the outputs there
// are exactly 0. -inf fills of where_causal pass through as bits; NaN inputs below the diagonal too.
TEST_F(VkTest, IndexingCausalMaskIgnoresWhatLiesPastTheDiagonal) {
  auto ctx = make_context();
  for (const std::int64_t t : {6, 40}) {  // serial rows, and a workgroup per row
    SCOPED_TRACE("T = " + std::to_string(t));
    HostTensor x = random_f32({3, t, t}, 70);
    for (std::int64_t m = 0; m < 3; ++m)
      for (std::int64_t r = 0; r < t; ++r)
        for (std::int64_t c = r + 1; c < t; ++c)
          x.set(static_cast<std::size_t>((m * t + r) * t + c),
                (c % 2 == 0) ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity());
    x.set(static_cast<std::size_t>(2 * t), std::numeric_limits<double>::quiet_NaN());  // row 2, column 0
    GraphBuilder b("causal_mask");
    TracingScope scope(b);
    Tensor in = b.input("x", {DType::f32, {3, t, t}});
    b.output("y", softmax_causal(in));
    b.output("neg_inf", where_causal(in, -std::numeric_limits<double>::infinity()));
    b.output("zero", where_causal(in, 0.0));
    const Graph g = b.take();
    check(ctx, g, {{"x", x}}, Compare::tolerance);
    const TensorMap got = Program(ctx, g).run({{"x", x}});
    for (std::int64_t m = 0; m < 3; ++m)
      for (std::int64_t r = 0; r < t; ++r)
        for (std::int64_t c = r + 1; c < t; ++c) {
          const auto f = static_cast<std::size_t>((m * t + r) * t + c);
          EXPECT_EQ(got.at("y").at(f), 0.0) << f;
          EXPECT_EQ(got.at("neg_inf").at(f), -std::numeric_limits<double>::infinity()) << f;
        }
  }
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

// softmax_causal with more rows than 65535 workgroups (T = 33: a workgroup per row, grid-stride).
TEST_F(VkTest, IndexingSoftmaxCausalMoreRowsThanWorkgroups) {
  auto ctx = make_context();
  GraphBuilder b("softmax_causal_rows");
  TracingScope scope(b);
  Tensor x = b.input("x", {DType::f32, {1990, 33, 33}});
  b.output("y", softmax_causal(x));
  const Graph g = b.take();
  check(ctx, g, {{"x", random_f32({1990, 33, 33}, 80)}}, Compare::tolerance, false);
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

// A bad index throws the interpreter's RuntimeError naming the op, the first bad element's value
// and position and "out of range", also where the output is empty (embedding with D = 0,
// scatter_add with size = 0, where every index is bad); the same program then runs good indices
// (the status word is reset every run).
TEST_F(VkTest, IndexingOutOfRangeIndicesThrowLikeTheInterpreter) {
  auto ctx = make_context();
  struct Case {
    std::string op;
    Shape data;           // the f32 operand (table, x or updates); unused by one_hot
    std::int64_t extent;  // the valid index range [0, extent)
  };
  const Case cases[] = {{"one_hot", {}, 5},         {"embedding", {7, 3}, 7},
                        {"embedding", {7, 0}, 7},   {"take_along_axis", {4, 6}, 6},
                        {"scatter_add", {4, 6}, 3}, {"scatter_add", {4, 6}, 0}};
  const Shape index_shape{4, 6};
  for (const Case& c : cases) {
    for (const std::int32_t bad : {-1, static_cast<std::int32_t>(c.extent), 1 << 30}) {
      SCOPED_TRACE(c.op + " extent " + std::to_string(c.extent) + " bad " + std::to_string(bad));
      GraphBuilder b("bad_index");
      TracingScope scope(b);
      Tensor idx = b.input("idx", {DType::i32, index_shape});
      TensorMap in;
      if (c.op == "one_hot") {
        b.output("y", one_hot(idx, c.extent));
      } else {
        Tensor data = b.input("data", {DType::f32, c.data});
        in.emplace("data", random_f32(c.data, 91));
        if (c.op == "embedding") b.output("y", embedding(data, idx));
        if (c.op == "take_along_axis") b.output("y", take_along_axis(data, idx, 1));
        if (c.op == "scatter_add") b.output("y", scatter_add(data, idx, 1, c.extent));
      }
      const Graph g = b.take();
      // Elements 9 and 17 are bad: 9 must be reported (with extent 0 every index is, so element 0).
      const HostTensor good = random_indices(index_shape, std::max<std::int64_t>(c.extent, 1), 90);
      HostTensor wrong = good;
      wrong.set(9, bad);
      wrong.set(17, -5);
      const std::size_t first = c.extent == 0 ? 0 : 9;
      const std::string expected = c.op + ": index " + std::to_string(static_cast<std::int32_t>(wrong.at(first))) +
                                   " is out of range [0, " + std::to_string(c.extent) + ") at element " +
                                   std::to_string(first);
      in.insert_or_assign("idx", wrong);
      try {
        interpret(g, in);
        ADD_FAILURE() << "the interpreter accepted the bad index";
      } catch (const RuntimeError& e) {
        EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
      }
      Program program(ctx, g);
      try {
        program.run(in);
        ADD_FAILURE() << "Vulkan accepted the bad index";
      } catch (const RuntimeError& e) {
        EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
      }
      if (c.extent == 0) continue;  // no good index exists
      in.insert_or_assign("idx", good);
      const TensorMap want = interpret(g, in, {.compute = ComputeType::f32}).outputs;
      EXPECT_EQ(program.run(in).at("y").to_f64(), want.at("y").to_f64()) << "after a failed run";
    }
  }
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

}  // namespace
}  // namespace tg::vk
