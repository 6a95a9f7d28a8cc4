// The indexing family: one_hot, embedding, take_along_axis, scatter_add, softmax_causal and
// where_causal against loops written here, in both compute types; out-of-range index values (a
// RuntimeError naming the op and the value); shape errors; gradients through tg::differentiate
// against loops and finite differences; thread-count independence; and the OpDef parts.
#include "tensorgrad/ir/ops/ids/indexing.h"

#include <gtest/gtest.h>
#include <tbb/global_control.h>

#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "support/library.h"
#include "support/op_family.h"

namespace {

using tg::ComputeType;
using tg::DType;
using tg::HostTensor;
using tg::OpId;
namespace op = tg::op;
using tg::Shape;
using tg::Tensor;
using tg::TensorType;

constexpr ComputeType kComputeTypes[] = {ComputeType::f64, ComputeType::f32};

using Build = std::function<Tensor(const std::vector<Tensor>&)>;

// Traces build(x0, x1, ...) and runs it with coverage checks on; returns output "y".
HostTensor run(const std::vector<HostTensor>& inputs, const Build& build, ComputeType compute = ComputeType::f64) {
  tg::GraphBuilder b("g");
  tg::TracingScope scope(b);
  std::vector<Tensor> xs;
  tg::TensorMap feed;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    xs.push_back(b.input("x" + std::to_string(i), inputs[i].type));
    feed.emplace("x" + std::to_string(i), inputs[i]);
  }
  b.output("y", build(xs));
  return tg::interpret(b.take(), feed, {.compute = compute, .check_coverage = true}).outputs.at("y");
}

// The gradient of sum(build(x...) * w) with respect to input `wrt`, by tg::differentiate.
HostTensor grad_of(const std::vector<HostTensor>& inputs, const Build& build, std::size_t wrt, const HostTensor& w) {
  tg::GraphBuilder b("g");
  tg::TracingScope scope(b);
  std::vector<Tensor> xs;
  tg::TensorMap feed{{"w", w}};
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    xs.push_back(b.input("x" + std::to_string(i), inputs[i].type));
    feed.emplace("x" + std::to_string(i), inputs[i]);
  }
  b.output("loss", tg::sum(build(xs) * b.input("w", w.type)));
  const tg::Graph grad = tg::differentiate(b.take(), {.wrt = {"x" + std::to_string(wrt)}});
  return tg::interpret(grad, feed).outputs.at("grad.x" + std::to_string(wrt));
}

// Deterministic values in [-2, 2].
std::vector<float> test_values(std::int64_t n, std::uint64_t seed = 1) {
  tg::SampleRng rng(seed);
  std::vector<float> v(static_cast<std::size_t>(n));
  for (auto& x : v) x = static_cast<float>(rng.uniform(-2, 2));
  return v;
}

void expect_message_has(const std::string& what, const std::vector<std::string>& parts) {
  for (const auto& part : parts)
    EXPECT_NE(what.find(part), std::string::npos) << "missing '" << part << "' in: " << what;
}

void expect_runtime_error(const std::function<void()>& body, const std::vector<std::string>& parts) {
  try {
    body();
    ADD_FAILURE() << "expected a RuntimeError";
  } catch (const tg::RuntimeError& e) {
    expect_message_has(e.what(), parts);
  }
}

void expect_shape_error(const std::function<void()>& trace, std::string_view op, const std::string& rule_part) {
  try {
    trace();
    ADD_FAILURE() << "expected a ShapeError from " << op;
  } catch (const tg::ShapeError& e) {
    EXPECT_EQ(e.op(), op);
    expect_message_has(e.what(), {rule_part, "indexing_test.cpp"});
  }
}

// ---- one_hot ----

TEST(OneHot, MatchesLoops) {
  const std::vector<std::int32_t> idx = {0, 3, 1, 2, 2, 0};
  for (ComputeType compute : kComputeTypes) {
    const auto y = run(
        {HostTensor::i32({2, 3}, idx)}, [](auto& x) { return tg::one_hot(x[0], 4); }, compute);
    ASSERT_EQ(y.type, (TensorType{DType::f32, {2, 3, 4}}));
    for (std::size_t i = 0; i < idx.size(); ++i)
      for (int c = 0; c < 4; ++c) EXPECT_EQ(y.at(i * 4 + c), c == idx[i] ? 1.0 : 0.0);
  }
  const auto scalar = run({HostTensor::i32({}, {2})}, [](auto& x) { return tg::one_hot(x[0], 3); });
  EXPECT_EQ(scalar.to_f64(), (std::vector<double>{0, 0, 1}));
}

TEST(OneHot, RefusesBadIndicesAndDepth) {
  const auto bad = [](std::int32_t v) {
    return [v] { run({HostTensor::i32({3}, {0, v, 1})}, [](auto& x) { return tg::one_hot(x[0], 4); }); };
  };
  expect_runtime_error(bad(4), {"one_hot", "index 4", "[0, 4)", "element 1", "indexing_test.cpp"});
  expect_runtime_error(bad(-1), {"one_hot", "index -1"});
  tg::GraphBuilder b("g");
  tg::TracingScope scope(b);
  const Tensor i = b.input("i", {DType::i32, {3}});
  expect_shape_error([&] { (void)tg::one_hot(i, 0); }, "one_hot", "depth must be >= 1, got 0");
  const Tensor f = b.input("f", {DType::f32, {3}});
  expect_shape_error([&] { (void)tg::one_hot(f, 3); }, "one_hot", "indices must be i32");
}

// ---- embedding ----

TEST(Embedding, LooksUpRows) {
  const auto table = test_values(5 * 3);
  const std::vector<std::int32_t> idx = {4, 0, 4, 2};
  for (ComputeType compute : kComputeTypes) {
    const auto y = run(
        {HostTensor::f32({5, 3}, table), HostTensor::i32({2, 2}, idx)},
        [](auto& x) { return tg::embedding(x[0], x[1]); }, compute);
    ASSERT_EQ(y.type, (TensorType{DType::f32, {2, 2, 3}}));
    for (std::size_t n = 0; n < idx.size(); ++n)
      for (std::size_t d = 0; d < 3; ++d) EXPECT_EQ(y.at(n * 3 + d), table[static_cast<std::size_t>(idx[n]) * 3 + d]);
  }
}

TEST(Embedding, GradientAddsRepeatedLookups) {
  const std::vector<std::int32_t> idx = {4, 0, 4, 2, 4};
  const auto w = test_values(5 * 2, 7);
  const auto g = grad_of(
      {HostTensor::f32({5, 2}, test_values(10)), HostTensor::i32({5}, idx)},
      [](auto& x) { return tg::embedding(x[0], x[1]); }, 0, HostTensor::f32({5, 2}, w));
  std::vector<double> expected(10, 0.0);
  for (std::size_t n = 0; n < idx.size(); ++n)
    for (std::size_t d = 0; d < 2; ++d) expected[static_cast<std::size_t>(idx[n]) * 2 + d] += w[n * 2 + d];
  ASSERT_EQ(g.size(), expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) EXPECT_NEAR(g.at(i), expected[i], 1e-12);
}

TEST(Embedding, RefusesBadInput) {
  expect_runtime_error(
      [] {
        run({HostTensor::f32({3, 2}, test_values(6)), HostTensor::i32({2}, {1, 3})},
            [](auto& x) { return tg::embedding(x[0], x[1]); });
      },
      {"embedding", "index 3", "[0, 3)", "element 1"});
  tg::GraphBuilder b("g");
  tg::TracingScope scope(b);
  const Tensor idx = b.input("i", {DType::i32, {4}});
  const Tensor vec = b.input("v", {DType::f32, {6}});
  expect_shape_error([&] { (void)tg::embedding(vec, idx); }, "embedding", "[V, D] matrix, got rank 1");
  expect_shape_error(
      [&] {
        (void)tg::embedding(b.input("t", {DType::f32, {3, 2}}), vec);
      },
      "embedding", "indices must be i32");
}

// ---- take_along_axis and scatter_add ----

// out[o, k, i] = x[o, idx[o, k, i], i] with [outer, extent, inner] views around `axis`.
std::vector<double> reference_take(const Shape& x_shape, const std::vector<double>& x, const Shape& idx_shape,
                                   const std::vector<std::int32_t>& idx, std::size_t axis) {
  std::int64_t outer = 1, inner = 1;
  for (std::size_t a = 0; a < axis; ++a) outer *= x_shape[a];
  for (std::size_t a = axis + 1; a < x_shape.size(); ++a) inner *= x_shape[a];
  std::vector<double> out;
  for (std::int64_t o = 0; o < outer; ++o)
    for (std::int64_t k = 0; k < idx_shape[axis]; ++k)
      for (std::int64_t i = 0; i < inner; ++i) {
        const auto pick = idx[static_cast<std::size_t>((o * idx_shape[axis] + k) * inner + i)];
        out.push_back(x[static_cast<std::size_t>((o * x_shape[axis] + pick) * inner + i)]);
      }
  return out;
}

// The same views, summing each update into its slot.
std::vector<double> reference_scatter(const Shape& shape, const std::vector<float>& updates,
                                      const std::vector<std::int32_t>& idx, std::size_t axis, std::int64_t size) {
  std::int64_t outer = 1, inner = 1;
  for (std::size_t a = 0; a < axis; ++a) outer *= shape[a];
  for (std::size_t a = axis + 1; a < shape.size(); ++a) inner *= shape[a];
  std::vector<double> out(static_cast<std::size_t>(outer * size * inner), 0.0);
  for (std::int64_t o = 0; o < outer; ++o)
    for (std::int64_t k = 0; k < shape[axis]; ++k)
      for (std::int64_t i = 0; i < inner; ++i) {
        const auto src = static_cast<std::size_t>((o * shape[axis] + k) * inner + i);
        out[static_cast<std::size_t>((o * size + idx[src]) * inner + i)] += updates[src];
      }
  return out;
}

std::vector<std::int32_t> indices_below(std::int64_t n, std::int32_t extent, std::uint64_t seed) {
  tg::SampleRng rng(seed);
  std::vector<std::int32_t> v(static_cast<std::size_t>(n));
  for (auto& i : v) i = static_cast<std::int32_t>(rng.uniform_int(0, extent - 1));
  return v;
}

TEST(TakeAlongAxis, GathersAlongEveryAxisForEveryDtype) {
  const Shape x_shape = {2, 3, 4};
  for (std::size_t axis = 0; axis < 3; ++axis) {
    Shape idx_shape = x_shape;
    idx_shape[axis] = 5;  // more picks than the axis has: repeats
    const auto idx = indices_below(tg::num_elements(idx_shape), static_cast<std::int32_t>(x_shape[axis]), axis + 1);
    for (DType dtype : {DType::f32, DType::i32, DType::boolean}) {
      std::vector<double> x(24);
      for (std::size_t i = 0; i < x.size(); ++i) x[i] = dtype == DType::boolean ? (i % 3 == 0) : double(i) - 7;
      for (ComputeType compute : kComputeTypes) {
        SCOPED_TRACE("axis " + std::to_string(axis) + " " + std::string(tg::dtype_name(dtype)));
        const auto y = run(
            {HostTensor::of({dtype, x_shape}, x), HostTensor::i32(idx_shape, idx)},
            [&](auto& in) {
              return tg::take_along_axis(in[0], in[1], axis == 2 ? std::int64_t{-1} : static_cast<std::int64_t>(axis));
            },
            compute);
        ASSERT_EQ(y.type, (TensorType{dtype, idx_shape}));
        EXPECT_EQ(y.to_f64(), reference_take(x_shape, x, idx_shape, idx, axis));
      }
    }
  }
}

TEST(TakeAlongAxis, GradientIsScatterAdd) {
  const Shape x_shape = {3, 4};
  const Shape idx_shape = {3, 6};
  const auto idx = indices_below(18, 4, 11);
  const auto w = test_values(18, 3);
  const auto g = grad_of(
      {HostTensor::f32(x_shape, test_values(12)), HostTensor::i32(idx_shape, idx)},
      [](auto& x) { return tg::take_along_axis(x[0], x[1], 1); }, 0, HostTensor::f32(idx_shape, w));
  const auto expected = reference_scatter(idx_shape, w, idx, 1, 4);
  ASSERT_EQ(g.size(), expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) EXPECT_NEAR(g.at(i), expected[i], 1e-12);
}

TEST(TakeAlongAxis, RefusesBadInput) {
  expect_runtime_error(
      [] {
        run({HostTensor::f32({2, 3}, test_values(6)), HostTensor::i32({2, 1}, {2, 3})},
            [](auto& x) { return tg::take_along_axis(x[0], x[1], 1); });
      },
      {"take_along_axis", "index 3", "[0, 3)", "element 1"});
  tg::GraphBuilder b("g");
  tg::TracingScope scope(b);
  const Tensor x = b.input("x", {DType::f32, {2, 3}});
  const std::string op = "take_along_axis";
  expect_shape_error(
      [&] {
        (void)tg::take_along_axis(x, b.input("a", {DType::i32, {2, 3, 1}}), 1);
      },
      op, "same rank, got 2 and 3");
  expect_shape_error(
      [&] {
        (void)tg::take_along_axis(x, b.input("c", {DType::i32, {4, 5}}), 1);
      },
      op, "axis 0 has size 2 in x but 4 in indices (only axis 1 may differ)");
  expect_shape_error(
      [&] {
        (void)tg::take_along_axis(x, b.input("d", {DType::i32, {2, 5}}), 2);
      },
      op, "axis 2 is out of range for rank 2");
  expect_shape_error(
      [&] {
        (void)tg::take_along_axis(x, b.input("e", {DType::i32, {2, 5}}), -3);
      },
      op, "axis -3 is out of range for rank 2");
  expect_shape_error(
      [&] {
        (void)tg::take_along_axis(x, b.input("f", {DType::f32, {2, 5}}), 1);
      },
      op, "indices must be i32");
}

TEST(ScatterAdd, SumsDuplicatesAlongEveryAxis) {
  const Shape shape = {3, 5, 2};
  const auto updates = test_values(30, 5);
  for (std::size_t axis = 0; axis < 3; ++axis) {
    const std::int64_t size = 4;
    const auto idx = indices_below(30, 4, 20 + axis);
    for (ComputeType compute : kComputeTypes) {
      SCOPED_TRACE("axis " + std::to_string(axis));
      const auto y = run(
          {HostTensor::f32(shape, updates), HostTensor::i32(shape, idx)},
          [&](auto& x) { return tg::scatter_add(x[0], x[1], axis, size); }, compute);
      Shape out_shape = shape;
      out_shape[axis] = size;
      ASSERT_EQ(y.type, (TensorType{DType::f32, out_shape}));
      const auto expected = reference_scatter(shape, updates, idx, axis, size);
      for (std::size_t i = 0; i < expected.size(); ++i) EXPECT_NEAR(y.at(i), expected[i], 1e-5) << i;
    }
  }
}

// Many updates pile onto few slots; the sum order is fixed, so the bits match with one thread.
TEST(ScatterAdd, SameBitsForAnyThreadCount) {
  const Shape shape = {4, 3000, 70};
  const auto n = tg::num_elements(shape);
  const std::vector<HostTensor> inputs = {HostTensor::f32(shape, test_values(n, 9)),
                                          HostTensor::i32(shape, indices_below(n, 3, 10))};
  const Build build = [](auto& x) { return tg::scatter_add(x[0], x[1], 1, 3); };
  for (ComputeType compute : kComputeTypes) {
    const auto many = run(inputs, build, compute);
    tbb::global_control one(tbb::global_control::max_allowed_parallelism, 1);
    EXPECT_EQ(run(inputs, build, compute).to_f64(), many.to_f64());
  }
}

TEST(ScatterAdd, RefusesBadInput) {
  expect_runtime_error(
      [] {
        run({HostTensor::f32({3}, test_values(3)), HostTensor::i32({3}, {0, 1, 5})},
            [](auto& x) { return tg::scatter_add(x[0], x[1], 0, 2); });
      },
      {"scatter_add", "index 5", "[0, 2)", "element 2"});
  tg::GraphBuilder b("g");
  tg::TracingScope scope(b);
  const Tensor u = b.input("u", {DType::f32, {2, 3}});
  const Tensor i = b.input("i", {DType::i32, {2, 3}});
  expect_shape_error(
      [&] {
        (void)tg::scatter_add(u, b.input("j", {DType::i32, {2, 4}}), 1, 3);
      },
      "scatter_add", "same shape, got [2,3] and [2,4]");
  expect_shape_error([&] { (void)tg::scatter_add(u, i, 1, -1); }, "scatter_add", "size must be >= 0, got -1");
  expect_shape_error([&] { (void)tg::scatter_add(u, i, 2, 3); }, "scatter_add", "axis 2 is out of range for rank 2");
  expect_shape_error([&] { (void)tg::scatter_add(i, i, 1, 3); }, "scatter_add", "updates must be f32");
}

// ---- softmax_causal and where_causal ----

TEST(SoftmaxCausal, MatchesMaskedSoftmaxLoops) {
  const std::int64_t t = 5;
  const auto x = test_values(2 * t * t, 4);
  for (ComputeType compute : kComputeTypes) {
    const auto y = run(
        {HostTensor::f32({2, t, t}, x)}, [](auto& in) { return tg::softmax_causal(in[0]); }, compute);
    ASSERT_EQ(y.type, (TensorType{DType::f32, {2, t, t}}));
    for (std::int64_t row = 0; row < 2 * t; ++row) {
      const std::int64_t i = row % t;
      double total = 0;
      for (std::int64_t j = 0; j <= i; ++j) total += std::exp(double(x[static_cast<std::size_t>(row * t + j)]));
      for (std::int64_t j = 0; j < t; ++j) {
        const auto at = static_cast<std::size_t>(row * t + j);
        const double expected = j > i ? 0.0 : std::exp(double(x[at])) / total;
        EXPECT_NEAR(y.at(at), expected, compute == ComputeType::f64 ? 1e-14 : 1e-6) << row << "," << j;
      }
    }
  }
}

TEST(WhereCausal, FillsAboveTheDiagonal) {
  const auto x = test_values(3 * 4 * 4, 6);
  for (double fill : {-std::numeric_limits<double>::infinity(), 0.1, 2.0}) {
    for (ComputeType compute : kComputeTypes) {
      const auto y = run(
          {HostTensor::f32({3, 4, 4}, x)}, [&](auto& in) { return tg::where_causal(in[0], fill); }, compute);
      for (std::size_t f = 0; f < x.size(); ++f) {
        const std::size_t col = f % 4, row = (f / 4) % 4;
        // The fill is an f32 element: 0.1 arrives rounded to float in both compute types.
        EXPECT_EQ(y.at(f), col > row ? double(static_cast<float>(fill)) : double(x[f]));
      }
    }
  }
}

TEST(WhereCausal, GradientSkipsTheFilledEntries) {
  const auto w = test_values(9, 2);
  const auto g = grad_of(
      {HostTensor::f32({3, 3}, test_values(9))}, [](auto& x) { return tg::where_causal(x[0], -5); }, 0,
      HostTensor::f32({3, 3}, w));
  for (std::size_t f = 0; f < 9; ++f) EXPECT_EQ(g.at(f), f % 3 > f / 3 ? 0.0 : double(w[f]));
}

TEST(WhereCausal, MinusInfinityPrintsAndParsesBack) {
  tg::GraphBuilder b("g");
  tg::TracingScope scope(b);
  b.output("y", tg::softmax(tg::where_causal(b.input("x", {DType::f32, {2, 2}}), -INFINITY)));
  const tg::Graph g = b.take();
  const std::string text = tg::print_graph(g);
  EXPECT_NE(text.find("-inf"), std::string::npos) << text;
  EXPECT_TRUE(tg::parse_graph(text) == g);
}

TEST(Causal, RefusesNonSquareInput) {
  tg::GraphBuilder b("g");
  tg::TracingScope scope(b);
  const Tensor x = b.input("x", {DType::f32, {2, 3, 4}});
  expect_shape_error([&] { (void)tg::softmax_causal(x); }, "softmax_causal", "last two axes must be equal");
  expect_shape_error([&] { (void)tg::where_causal(x, 0); }, "where_causal", "got 3 and 4");
  expect_shape_error(
      [&] {
        (void)tg::softmax_causal(b.input("v", {DType::f32, {4}}));
      },
      "softmax_causal", "rank >= 2, got rank 1");
  expect_shape_error(
      [&] {
        (void)tg::where_causal(b.input("i", {DType::i32, {2, 2}}), 0);
      },
      "where_causal", "input must be f32");
}

// ---- registry entries ----

constexpr std::string_view kFamily = "indexing";

// Facts pinned per op (optional: a new op is checked by the generic tests without joining).
const std::map<OpId, bool> kPinnedDifferentiable = {{op::OneHot, false},       {op::Embedding, true},
                                                    {op::TakeAlongAxis, true}, {op::ScatterAdd, true},
                                                    {op::SoftmaxCausal, true}, {op::WhereCausal, true}};

// Every op of the family (from the registry) has its parts and valid samples.
TEST(IndexingOpDefs, CompleteAndSamplesValid) {
  tg::test::expect_ops_in_family(kPinnedDifferentiable, kFamily);
  for (OpId op : tg::test::expect_family_defs(kFamily, 17, 20)) {
    const tg::OpDef& def = tg::op_def(op);
    SCOPED_TRACE(std::string(def.name));
    if (const auto it = kPinnedDifferentiable.find(op); it != kPinnedDifferentiable.end()) {
      EXPECT_EQ(def.differentiable, it->second);
    }
    tg::SampleRng rng(17);
    for (int i = 0; i < 200; ++i) {
      const auto sample = def.samples(rng, std::nullopt);
      ASSERT_TRUE(sample.has_value());
      ASSERT_EQ(static_cast<int>(sample->inputs.size()), def.arity);
      ASSERT_EQ(sample->domains.size(), sample->inputs.size());
      const TensorType out = tg::infer_type(op, sample->attrs, sample->inputs);
      EXPECT_LE(out.size(), 512);
      for (std::size_t k = 0; k < sample->inputs.size(); ++k) {
        EXPECT_LE(sample->inputs[k].size(), 512);
        // Index inputs are fresh and drawn from valid values only: a run never fails on them.
        if (sample->inputs[k].dtype == DType::i32 && k + 1 == sample->inputs.size()) {
          EXPECT_EQ(sample->domains[k].kind, tg::ValueDomain::Kind::index);
          EXPECT_TRUE(sample->domains[k].fresh_only);
          EXPECT_GE(sample->domains[k].lo, 0);
        }
      }
      const auto again = def.samples(rng, sample->inputs[0]);
      ASSERT_TRUE(again.has_value());
      EXPECT_EQ(again->inputs[0], sample->inputs[0]);
    }
  }
  EXPECT_EQ(tg::op_def(op::SoftmaxCausal).tolerance, tg::ToleranceClass::reduction);
  EXPECT_EQ(tg::op_def(op::WhereCausal).tolerance, tg::ToleranceClass::exact);
  const TensorType square{DType::f32, {2, 7, 7}};
  EXPECT_EQ(tg::op_def(op::SoftmaxCausal).reduction_length({}, {&square, 1}), 7);
}

TEST(IndexingOpDefs, F32RunsMatchTheOracleWithinTheToleranceClass) {
  tg::test::expect_family_runs_match_oracle(kFamily, 7, 20);
}

// Every grad rule on its own samples, for every f32 input: the rule against central differences.
TEST(IndexingGrads, GradRulesMatchFiniteDifferences) {
  tg::test::expect_family_grads_match_finite_differences(kFamily, 9, 6);
}

// Every grad rule on its own samples: autodiff of sum(w * op(x...)) against central differences.
TEST(IndexingGrads, MatchFiniteDifferences) {
  tg::SampleRng rng(123);
  for (OpId op : tg::test::family_ops(kFamily)) {
    const tg::OpDef& def = tg::op_def(op);
    if (!def.differentiable) continue;
    for (int trial = 0; trial < 8; ++trial) {
      auto sample = def.samples(rng, std::nullopt);
      ASSERT_TRUE(sample.has_value());
      if (sample->inputs[0].dtype != DType::f32) continue;
      SCOPED_TRACE(std::string(def.name) + " " + sample->inputs[0].to_string() + " " + sample->attrs.to_string());
      std::vector<HostTensor> inputs;
      for (std::size_t k = 0; k < sample->inputs.size(); ++k) {
        inputs.push_back(HostTensor::of(sample->inputs[k], sample->domains[k].draw(rng, sample->inputs[k].size())));
      }
      const Build build = [&](const std::vector<Tensor>& x) {
        return x[0].builder().emit(op, x, sample->attrs, tg::SourceLoc{});
      };
      const TensorType out_type = tg::infer_type(op, sample->attrs, sample->inputs);
      std::vector<double> w(static_cast<std::size_t>(out_type.size()));
      for (auto& v : w) v = rng.uniform(-1, 1);
      const HostTensor w_tensor = HostTensor::of(out_type, w);
      const HostTensor g = grad_of(inputs, build, 0, w_tensor);
      const auto weighted = [&](const std::vector<HostTensor>& at) {
        const auto y = run(at, build);
        double total = 0;
        for (std::size_t j = 0; j < w.size(); ++j) total += w[j] * y.at(j);
        return total;
      };
      constexpr double kStep = 1e-6;
      for (std::size_t e = 0; e < g.size(); e += std::max<std::size_t>(1, g.size() / 10)) {
        auto moved = inputs;
        moved[0].mutable_wide()[e] += kStep;
        const double up = weighted(moved);
        moved[0].mutable_wide()[e] -= 2 * kStep;
        const double numeric = (up - weighted(moved)) / (2 * kStep);
        EXPECT_NEAR(g.at(e), numeric, 1e-6 * (1 + std::fabs(numeric))) << "element " << e;
      }
    }
  }
}

}  // namespace
