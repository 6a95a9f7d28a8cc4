// tg::MultiHeadAttention: its params (names, shapes, bias option), its forward against the same
// layer written with per-head loops here (self- and cross-attention, causal and not), and the
// errors that name the layer and the caller's line.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "support/library.h"
#include "support/test_values.h"
#include "tensorgrad/train/init.h"
#include "tensorgrad/train/module.h"
#include "tensorgrad/train/nn.h"

namespace {

using tg::DType;
using tg::HostTensor;
using tg::Shape;
using tg::Tensor;

constexpr std::int64_t kWidth = 6, kHeads = 2, kHeadWidth = kWidth / kHeads;

struct Model : tg::Module {
  explicit Model(bool causal) : attn(*this, "attn", kWidth, kHeads, {.causal = causal}) {}
  tg::MultiHeadAttention attn;
};

// x [T, width] times W [width, width] plus b.
std::vector<double> project(const std::vector<double>& x, std::int64_t rows, const tg::TensorMap& params,
                            const std::string& name) {
  const auto w = params.at(name + ".W").to_f64();
  const auto b = params.at(name + ".b").to_f64();
  std::vector<double> y(static_cast<std::size_t>(rows * kWidth));
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t j = 0; j < kWidth; ++j) {
      double acc = b[static_cast<std::size_t>(j)];
      for (std::int64_t c = 0; c < kWidth; ++c) {
        acc += x[static_cast<std::size_t>(r * kWidth + c)] * w[static_cast<std::size_t>(c * kWidth + j)];
      }
      y[static_cast<std::size_t>(r * kWidth + j)] = acc;
    }
  }
  return y;
}

// The layer by hand, for one batch element: per head, softmax(q k^T / sqrt(head width)) v.
std::vector<double> by_hand(const std::vector<double>& x, std::int64_t tq, const std::vector<double>& ctx,
                            std::int64_t tk, bool causal, const tg::TensorMap& params) {
  const auto q = project(x, tq, params, "attn.q"), k = project(ctx, tk, params, "attn.k"),
             v = project(ctx, tk, params, "attn.v");
  std::vector<double> merged(static_cast<std::size_t>(tq * kWidth), 0.0);
  for (std::int64_t h = 0; h < kHeads; ++h) {
    for (std::int64_t i = 0; i < tq; ++i) {
      std::vector<double> p(static_cast<std::size_t>(tk), 0.0);
      double total = 0, top = -INFINITY;
      const std::int64_t visible = causal ? i + 1 : tk;
      for (std::int64_t j = 0; j < visible; ++j) {
        double s = 0;
        for (std::int64_t c = 0; c < kHeadWidth; ++c) {
          s += q[static_cast<std::size_t>(i * kWidth + h * kHeadWidth + c)] *
               k[static_cast<std::size_t>(j * kWidth + h * kHeadWidth + c)];
        }
        // The layer's scale, 1/sqrt(head width), is rounded to f32 once (tg::attention).
        p[static_cast<std::size_t>(j)] = s * static_cast<float>(1 / std::sqrt(static_cast<double>(kHeadWidth)));
        top = std::max(top, p[static_cast<std::size_t>(j)]);
      }
      for (std::int64_t j = 0; j < visible; ++j) {
        p[static_cast<std::size_t>(j)] = std::exp(p[static_cast<std::size_t>(j)] - top);
        total += p[static_cast<std::size_t>(j)];
      }
      for (std::int64_t c = 0; c < kHeadWidth; ++c) {
        double acc = 0;
        for (std::int64_t j = 0; j < visible; ++j) {
          acc += p[static_cast<std::size_t>(j)] * v[static_cast<std::size_t>(j * kWidth + h * kHeadWidth + c)];
        }
        merged[static_cast<std::size_t>(i * kWidth + h * kHeadWidth + c)] = acc / total;
      }
    }
  }
  return project(merged, tq, params, "attn.proj");
}

std::vector<double> slice(const std::vector<double>& all, std::int64_t begin, std::int64_t count) {
  return {all.begin() + begin, all.begin() + begin + count};
}

TEST(MultiHeadAttentionLayer, MatchesPerHeadLoops) {
  for (bool causal : {false, true}) {
    for (bool cross : {false, true}) {
      if (causal && cross) continue;
      SCOPED_TRACE(std::string(causal ? "causal" : "full") + (cross ? " cross" : " self"));
      Model m(causal);
      const std::int64_t batch = 2, tq = 4, tk = cross ? 5 : 4;
      tg::TensorMap feed = tg::init_params(m, 5);
      // Random biases, so every param matters.
      for (const char* name : {"attn.q.b", "attn.k.b", "attn.v.b", "attn.proj.b"}) {
        feed.insert_or_assign(name, HostTensor::f32({kWidth}, tg::testing::test_values(kWidth, 3, 29)));
      }
      const HostTensor x = HostTensor::f32({batch, tq, kWidth}, tg::testing::test_values(batch * tq * kWidth, 1, 29));
      const HostTensor ctx = HostTensor::f32({batch, tk, kWidth}, tg::testing::test_values(batch * tk * kWidth, 2, 29));
      tg::GraphBuilder b("mha");
      tg::TracingScope scope(b);
      tg::ParamBinding bound(m, b);
      const Tensor xt = b.input("x", x.type);
      b.output("y", cross ? m.attn(xt, b.input("ctx", ctx.type)) : m.attn(xt));
      feed.emplace("x", x);
      if (cross) feed.emplace("ctx", ctx);
      const auto y = tg::interpret(b.graph(), feed).outputs.at("y").to_f64();
      const auto xs = x.to_f64(), cs = cross ? ctx.to_f64() : x.to_f64();
      for (std::int64_t n = 0; n < batch; ++n) {
        const auto want = by_hand(slice(xs, n * tq * kWidth, tq * kWidth), tq, slice(cs, n * tk * kWidth, tk * kWidth),
                                  tk, causal, feed);
        for (std::size_t i = 0; i < want.size(); ++i) {
          EXPECT_NEAR(y[static_cast<std::size_t>(n * tq * kWidth) + i], want[i], 1e-12) << "batch " << n << " " << i;
        }
      }
    }
  }
}

TEST(MultiHeadAttentionLayer, ParamsAndOptions) {
  struct M : tg::Module {
    tg::MultiHeadAttention a{*this, "a", 8, 4, {.bias = false}};
  } m;
  const auto params = tg::init_params(m, 1);
  EXPECT_EQ(params.size(), 4u);
  for (const char* name : {"a.q.W", "a.k.W", "a.v.W", "a.proj.W"}) EXPECT_EQ(params.at(name).type.shape, (Shape{8, 8}));
  EXPECT_EQ(m.a.heads(), 4);
  EXPECT_EQ(m.a.width(), 8);
  EXPECT_FALSE(m.a.causal());
}

TEST(MultiHeadAttentionLayer, RefusesBadSizesAndInputs) {
  tg::Module root;
  try {
    tg::MultiHeadAttention bad(root, "bad", 6, 4);
    ADD_FAILURE() << "width 6 with 4 heads was accepted";
  } catch (const tg::Error& e) {
    EXPECT_NE(std::string(e.what()).find("multiple of heads 4"), std::string::npos) << e.what();
  }
  Model m(true);
  tg::GraphBuilder b("mha");
  tg::TracingScope scope(b);
  tg::ParamBinding bound(m, b);
  const Tensor narrow_input = b.input("x", {DType::f32, {2, 3, 5}});
  try {
    (void)m.attn(narrow_input);
    ADD_FAILURE() << "width 5 was accepted";
  } catch (const tg::ShapeError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("MultiHeadAttention 'attn'"), std::string::npos) << what;
    EXPECT_NE(what.find("attention_layer_test.cpp"), std::string::npos) << what;
  }
  try {
    (void)m.attn(b.input("q", {DType::f32, {2, 3, kWidth}}), b.input("c", {DType::f32, {2, 4, kWidth}}));
    ADD_FAILURE() << "causal cross-attention with Tq != Tk was accepted";
  } catch (const tg::ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("as many queries as keys"), std::string::npos) << e.what();
  }
}

}  // namespace
