// The attention family on the interpreters: attention and its gradient against the same math
// composed from existing ops (matmul, softmax, softmax_causal), in both compute types and over the
// boundary cases (T = 1, Tq != Tk, head_dim 1, empty rows, scores of 1e4); the backward ops' parts
// (lse, dq, dk|dv) against autodiff of the composed graph; shape errors naming the call site; and
// the OpDef parts, samples, tolerance classes and finite differences every family gets.
#include "tensorgrad/ir/ops/ids/attention.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "support/library.h"
#include "support/op_family.h"
#include "tensorgrad/ir/ops/attention.h"

namespace {

using tg::ComputeType;
using tg::DType;
using tg::HostTensor;
using tg::OpId;
namespace op = tg::op;
using tg::Shape;
using tg::Tensor;
using tg::TensorType;

constexpr std::string_view kFamily = "attention";

std::vector<float> test_values(std::int64_t n, std::uint64_t seed, double lo = -2, double hi = 2) {
  tg::SampleRng rng(seed);
  std::vector<float> v(static_cast<std::size_t>(n));
  for (auto& x : v) x = static_cast<float>(rng.uniform(lo, hi));
  return v;
}

// softmax(scale * q k^T [masked]) v, from the ops that existed before attention.
Tensor composed_attention(const Tensor& q, const Tensor& k, const Tensor& v, bool causal, double scale) {
  const Tensor scores = tg::matmul(q, tg::swap_axes(k, -1, -2)) * static_cast<float>(scale);
  return tg::matmul(causal ? tg::softmax_causal(scores) : tg::softmax(scores, -1), v);
}

struct Case {
  Shape batch;
  std::int64_t tq, tk, d, dv;
  bool causal;
  double scale;
};

Shape with(Shape batch, std::int64_t rows, std::int64_t cols) {
  batch.push_back(rows);
  batch.push_back(cols);
  return batch;
}

struct Inputs {
  HostTensor q, k, v, w;
};

Inputs inputs_of(const Case& c, std::uint64_t seed) {
  const Shape qs = with(c.batch, c.tq, c.d), ks = with(c.batch, c.tk, c.d), vs = with(c.batch, c.tk, c.dv);
  const Shape os = with(c.batch, c.tq, c.dv);
  return {HostTensor::f32(qs, test_values(tg::num_elements(qs), seed)),
          HostTensor::f32(ks, test_values(tg::num_elements(ks), seed + 1)),
          HostTensor::f32(vs, test_values(tg::num_elements(vs), seed + 2)),
          HostTensor::f32(os, test_values(tg::num_elements(os), seed + 3))};
}

// Outputs "y" (the attention), and with gradients "grad.q", "grad.k", "grad.v" of sum(y * w).
tg::Graph attention_graph(const Case& c, bool fused) {
  tg::GraphBuilder b(fused ? "fused" : "composed");
  tg::TracingScope scope(b);
  const Tensor q = b.input("q", {DType::f32, with(c.batch, c.tq, c.d)});
  const Tensor k = b.input("k", {DType::f32, with(c.batch, c.tk, c.d)});
  const Tensor v = b.input("v", {DType::f32, with(c.batch, c.tk, c.dv)});
  const Tensor w = b.input("w", {DType::f32, with(c.batch, c.tq, c.dv)});
  const Tensor y = fused ? tg::attention(q, k, v, {.causal = c.causal, .scale = c.scale})
                         : composed_attention(q, k, v, c.causal, c.scale);
  b.output("y", y);
  b.output("loss", tg::sum(y * w));
  return tg::differentiate(b.take(), {.loss = "loss", .wrt = {"q", "k", "v"}});
}

tg::TensorMap run(const tg::Graph& g, const Inputs& in, ComputeType compute) {
  const tg::TensorMap feed{{"q", in.q}, {"k", in.k}, {"v", in.v}, {"w", in.w}};
  return tg::interpret(g, feed, {.compute = compute, .check_coverage = true}).outputs;
}

void expect_close(const HostTensor& got, const HostTensor& want, double tolerance, const std::string& what) {
  ASSERT_EQ(got.type, want.type) << what;
  for (std::int64_t i = 0; i < got.type.size(); ++i) {
    const double g = got.at(static_cast<std::size_t>(i)), w = want.at(static_cast<std::size_t>(i));
    ASSERT_NEAR(g, w, tolerance * std::max(1.0, std::abs(w))) << what << " element " << i;
  }
}

const std::vector<Case> kCases = {
    {{}, 1, 1, 1, 1, false, 1.0},      // one query, one key
    {{}, 1, 1, 4, 3, true, 0.5},       // causal T = 1
    {{2}, 5, 7, 3, 2, false, 0.577},   // Tq != Tk
    {{2, 3}, 6, 6, 4, 5, true, 0.5},   // batch and heads, causal, Dv != D
    {{}, 9, 4, 1, 1, false, -1.25},    // head_dim 1, negative scale
    {{1}, 33, 33, 5, 3, true, 0.447},  // T past a power of two
    {{2}, 3, 17, 7, 9, false, 0.378},  // more keys than queries
};

// The fused op is the composed math: in f64 to ~1e-12, in f32 to a few ulp of the scale.
TEST(Attention, MatchesComposedOpsWithGradients) {
  for (const Case& c : kCases) {
    SCOPED_TRACE("Tq " + std::to_string(c.tq) + " Tk " + std::to_string(c.tk) + " D " + std::to_string(c.d) +
                 (c.causal ? " causal" : ""));
    const Inputs in = inputs_of(c, 11 + static_cast<std::uint64_t>(c.tq));
    const tg::Graph fused = attention_graph(c, true), composed = attention_graph(c, false);
    for (ComputeType compute : {ComputeType::f64, ComputeType::f32}) {
      const auto a = run(fused, in, compute);
      const auto b = run(composed, in, compute);
      const double tolerance = compute == ComputeType::f64 ? 1e-12 : 2e-5;
      for (const char* name : {"y", "grad.q", "grad.k", "grad.v"})
        expect_close(a.at(name), b.at(name), tolerance, name);
    }
  }
}

// Zero-size batches and queries run (empty results); Dv = 0 gives empty rows.
TEST(Attention, EmptyShapes) {
  for (const Case& c :
       {Case{{0}, 3, 3, 2, 2, true, 1.0}, Case{{2}, 0, 4, 2, 3, false, 1.0}, Case{{2}, 3, 4, 2, 0, false, 1.0}}) {
    const Inputs in = inputs_of(c, 3);
    const auto out = run(attention_graph(c, true), in, ComputeType::f64);
    EXPECT_EQ(out.at("y").type.shape, with(c.batch, c.tq, c.dv));
    EXPECT_EQ(out.at("grad.k").type.shape, with(c.batch, c.tk, c.d));
  }
}

// Scores of 1e4 (exact in f32: small integers, scale 1): the softmax subtracts the row maximum,
// so nothing overflows, and the result is the composed one.
TEST(Attention, LargeScoresStayFinite) {
  const Case c{{2}, 8, 8, 2, 3, true, 1.0};
  Inputs in = inputs_of(c, 5);
  std::vector<float> q(32), k(32);
  for (std::size_t i = 0; i < q.size(); ++i) {
    q[i] = static_cast<float>(static_cast<int>(i % 7) * 20 - 60);
    k[i] = static_cast<float>(static_cast<int>(i % 5) * 25 - 50);
  }
  in.q = HostTensor::f32(in.q.type.shape, q);
  in.k = HostTensor::f32(in.k.type.shape, k);
  const tg::Graph fused = attention_graph(c, true), composed = attention_graph(c, false);
  for (ComputeType compute : {ComputeType::f64, ComputeType::f32}) {
    const auto a = run(fused, in, compute), b = run(composed, in, compute);
    for (const char* name : {"y", "grad.q", "grad.k", "grad.v"}) {
      for (std::int64_t i = 0; i < a.at(name).type.size(); ++i) {
        ASSERT_TRUE(std::isfinite(a.at(name).at(static_cast<std::size_t>(i)))) << name;
      }
      expect_close(a.at(name), b.at(name), compute == ComputeType::f64 ? 1e-9 : 1e-4, name);
    }
  }
}

// lse is the log-sum-exp of the masked, scaled scores.
TEST(Attention, LseIsTheRowLogSumExp) {
  const Case c{{3}, 5, 5, 4, 1, true, 0.5};
  const Inputs in = inputs_of(c, 21);
  tg::GraphBuilder b("lse");
  tg::TracingScope scope(b);
  const Tensor q = b.input("q", in.q.type), k = b.input("k", in.k.type);
  const Tensor scores = tg::matmul(q, tg::swap_axes(k, -1, -2)) * 0.5f;
  const Tensor masked = tg::where_causal(scores, -std::numeric_limits<double>::infinity());
  const Tensor row_max = tg::max(masked, -1, {.keep_dims = true});
  b.output("fused", tg::attention_lse(q, k, {.causal = true, .scale = 0.5}));
  b.output("composed", tg::log(tg::sum(tg::exp(masked - row_max), -1)) + tg::max(masked, -1));
  const auto out = tg::interpret(b.take(), {{"q", in.q}, {"k", in.k}}).outputs;
  EXPECT_EQ(out.at("fused").type, (TensorType{DType::f32, {3, 5}}));
  expect_close(out.at("fused"), out.at("composed"), 1e-12, "lse");
}

// 16-bit inputs: the op keeps the dtype, lse is f32.
TEST(Attention, SixteenBitDtypes) {
  for (DType dtype : {DType::f16, DType::bf16}) {
    tg::GraphBuilder b("g");
    tg::TracingScope scope(b);
    const Tensor q = b.input("q", {dtype, {2, 4, 8}});
    const Tensor v = b.input("v", {dtype, {2, 6, 3}});
    const Tensor k = b.input("k", {dtype, {2, 6, 8}});
    EXPECT_EQ(tg::attention(q, k, v).dtype(), dtype);
    EXPECT_EQ(tg::attention_lse(q, k).dtype(), DType::f32);
  }
}

void expect_shape_error(const std::function<void()>& trace, const std::string& rule_part) {
  try {
    trace();
    ADD_FAILURE() << "expected a ShapeError: " << rule_part;
  } catch (const tg::ShapeError& e) {
    EXPECT_EQ(e.op(), "attention");
    const std::string what = e.what();
    EXPECT_NE(what.find(rule_part), std::string::npos) << what;
    EXPECT_NE(what.find("attention_test.cpp"), std::string::npos) << what;
  }
}

TEST(Attention, RefusesBadInputNamingTheShapes) {
  tg::GraphBuilder b("g");
  tg::TracingScope scope(b);
  const Tensor q = b.input("q", {DType::f32, {2, 4, 8}});
  const Tensor k = b.input("k", {DType::f32, {2, 6, 8}});
  const Tensor v = b.input("v", {DType::f32, {2, 6, 3}});
  expect_shape_error([&] { (void)tg::attention(q, b.input("k7", {DType::f32, {2, 6, 7}}), v); }, "same head_dim");
  expect_shape_error([&] { (void)tg::attention(q, k, b.input("v5", {DType::f32, {2, 5, 3}})); }, "same number of keys");
  expect_shape_error([&] { (void)tg::attention(q, b.input("k3", {DType::f32, {3, 6, 8}}), v); }, "leading");
  expect_shape_error([&] { (void)tg::attention(b.input("q1", {DType::f32, {8}}), k, v); }, "rank >= 2");
  expect_shape_error([&] { (void)tg::attention(q, k, v, {.causal = true}); }, "Tq = 4 and Tk = 6");
  expect_shape_error([&] { (void)tg::attention(q, k, v, {.scale = INFINITY}); }, "scale must be finite");
  expect_shape_error([&] { (void)tg::attention(q, k, v, {.scale = NAN}); }, "scale must be finite");
  // Finite as a double but not in f32, where every kernel and the gradient ops carry it.
  expect_shape_error([&] { (void)tg::attention(q, k, v, {.scale = -1e300}); }, "scale must be finite in f32");
  expect_shape_error([&] { (void)tg::attention(q, k, b.input("vh", {DType::f16, {2, 6, 3}})); }, "cast");
  expect_shape_error(
      [&] {
        (void)tg::attention(q, b.input("k0", {DType::f32, {2, 0, 8}}), b.input("v0", {DType::f32, {2, 0, 3}}));
      },
      "at least one key");
}

TEST(Attention, DefaultScaleIsOneOverSqrtHeadDim) {
  tg::GraphBuilder b("g");
  tg::TracingScope scope(b);
  const Tensor q = b.input("q", {DType::f32, {3, 5}});
  const Tensor y = tg::attention(q, q, q);
  const tg::Graph g = b.take();
  EXPECT_EQ(g.nodes().back().attrs.real("scale"), static_cast<float>(1 / std::sqrt(5.0)));
  EXPECT_FALSE(g.nodes().back().attrs.boolean("causal"));
  (void)y;
}

// ---- the family contract ----

TEST(AttentionOpDefs, CompleteAndSamplesValid) {
  const std::map<OpId, bool> pinned = {
      {op::Attention, true}, {op::AttentionLse, false}, {op::AttentionGradQ, false}, {op::AttentionGradKv, false}};
  tg::test::expect_ops_in_family(pinned, kFamily);
  for (OpId id : tg::test::expect_family_defs(kFamily, 17, 20)) {
    EXPECT_EQ(tg::op_def(id).differentiable, pinned.at(id)) << tg::op_name(id);
  }
}

TEST(AttentionOpDefs, F32RunsMatchTheOracleWithinTheToleranceClass) {
  tg::test::expect_family_runs_match_oracle(kFamily, 7, 20);
}

TEST(AttentionGrads, GradRulesMatchFiniteDifferences) {
  tg::test::expect_family_grads_match_finite_differences(kFamily, 9, 6);
}

}  // namespace
