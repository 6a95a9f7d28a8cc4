// The built-in layers: each forward, bound and traced, run on the f64 interpreter against the layer
// written out as loops here (with random gains and biases, not the ones/zeros defaults, so every
// param matters); the option defaults (param shapes, inits, decay flags); the ShapeErrors that name
// the layer and the caller's line; the call site on traced nodes; and a small model with
// cross_entropy whose loss matches nll_loss(log_softmax) and whose gradient matches a finite
// difference.
#include "tensorgrad/train/nn.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "support/library.h"
#include "support/test_values.h"
#include "tensorgrad/train/init.h"
#include "tensorgrad/train/module.h"

namespace {

using tg::DType;
using tg::HostTensor;
using tg::Shape;
using tg::Tensor;

// Values in [-2, 2] (tests/support/test_values.h), this file's own stream.
std::vector<float> test_values(std::int64_t n, std::uint64_t seed) { return tg::testing::test_values(n, seed, 17); }

HostTensor random_f32(const Shape& shape, std::uint64_t seed) {
  return HostTensor::f32(shape, test_values(tg::num_elements(shape), seed));
}

// Traces `forward` over one data input "x" of type `x_type` with `model` bound, and runs it in f64
// with the model's init values (seed 5) overridden by `overrides`. Returns the output "y".
HostTensor run_layer(const tg::Module& model, const tg::TensorType& x_type, const HostTensor& x,
                     const std::function<Tensor(Tensor)>& forward, const tg::TensorMap& overrides = {}) {
  tg::GraphBuilder b("layer");
  tg::TracingScope scope(b);
  tg::ParamBinding bound(model, b);
  b.output("y", forward(b.input("x", x_type)));
  tg::TensorMap inputs = tg::init_params(model, 5);
  for (const auto& [name, value] : overrides) inputs.insert_or_assign(name, value);
  inputs.emplace("x", x);
  return tg::interpret(b.graph(), inputs).outputs.at("y");
}

void expect_close(const std::vector<double>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], 1e-12 * std::max(1.0, std::abs(want[i]))) << "element " << i;
  }
}

// ---- forwards against loops ----

TEST(LinearLayer, MatchesXTimesWPlusB) {
  struct M : tg::Module {
    tg::Linear l{*this, "l", 3, 5};
  } m;
  for (const Shape& x_shape : {Shape{4, 3}, Shape{2, 2, 3}, Shape{3}}) {
    const HostTensor x = random_f32(x_shape, 1);
    const HostTensor b = random_f32({5}, 2);
    const HostTensor y = run_layer(m, {DType::f32, x_shape}, x, [&](Tensor t) { return m.l(t); }, {{"l.b", b}});
    const auto w = tg::init_params(m, 5).at("l.W").to_f64();
    Shape y_shape = x_shape;
    y_shape.back() = 5;
    EXPECT_EQ(y.type.shape, y_shape);
    std::vector<double> want;
    for (std::size_t row = 0; row < x.size() / 3; ++row) {
      for (std::size_t j = 0; j < 5; ++j) {
        double acc = b.at(j);
        for (std::size_t k = 0; k < 3; ++k) acc += x.at(row * 3 + k) * w[k * 5 + j];
        want.push_back(acc);
      }
    }
    expect_close(y.to_f64(), want);
  }
}

TEST(LinearLayer, WithoutBiasHasNoBParam) {
  struct M : tg::Module {
    tg::Linear l{*this, "l", 2, 2, {.bias = false}};
  } m;
  EXPECT_FALSE(m.l.b.has_value());
  ASSERT_EQ(m.num_params(), 1u);
  const HostTensor x = random_f32({1, 2}, 3);
  const auto w = tg::init_params(m, 5).at("l.W").to_f64();
  const HostTensor y = run_layer(m, {DType::f32, {1, 2}}, x, [&](Tensor t) { return m.l(t); });
  expect_close(y.to_f64(), {x.at(0) * w[0] + x.at(1) * w[2], x.at(0) * w[1] + x.at(1) * w[3]});
}

enum class Norm { layer, rms };

// Normalizes each row of x ([rows, d]) as LayerNorm or RMSNorm would, in double.
std::vector<double> normalized_rows(Norm norm, const std::vector<double>& x, std::size_t d, double eps,
                                    const std::vector<double>& g, const std::vector<double>* b) {
  std::vector<double> y;
  for (std::size_t row = 0; row < x.size() / d; ++row) {
    double mean = 0;
    if (norm == Norm::layer) {
      for (std::size_t j = 0; j < d; ++j) mean += x[row * d + j] / static_cast<double>(d);
    }
    double second = 0;
    for (std::size_t j = 0; j < d; ++j) second += (x[row * d + j] - mean) * (x[row * d + j] - mean);
    // The composites add eps as a scalar operand, which the front-end rounds to f32.
    const double inv = 1 / std::sqrt(second / static_cast<double>(d) + static_cast<double>(static_cast<float>(eps)));
    for (std::size_t j = 0; j < d; ++j) y.push_back((x[row * d + j] - mean) * inv * g[j] + (b ? (*b)[j] : 0.0));
  }
  return y;
}

TEST(LayerNormLayer, MatchesTheFormulaWithGainBiasAndEps) {
  struct M : tg::Module {
    tg::LayerNorm ln{*this, "ln", 6, {.eps = 1e-3}};
    tg::LayerNorm plain{*this, "plain", 6, {.bias = false}};
  } m;
  EXPECT_EQ(m.plain.eps(), 1e-5);
  const HostTensor x = random_f32({3, 6}, 4);
  const HostTensor g = random_f32({6}, 5);
  const HostTensor b = random_f32({6}, 6);
  const tg::TensorMap params{{"ln.g", g}, {"ln.b", b}, {"plain.g", g}};
  const HostTensor y = run_layer(
      m, {DType::f32, {3, 6}}, x, [&](Tensor t) { return m.ln(t); }, params);
  const std::vector<double> b_values = b.to_f64();
  expect_close(y.to_f64(), normalized_rows(Norm::layer, x.to_f64(), 6, 1e-3, g.to_f64(), &b_values));
  const HostTensor y_plain = run_layer(
      m, {DType::f32, {3, 6}}, x, [&](Tensor t) { return m.plain(t); }, params);
  expect_close(y_plain.to_f64(), normalized_rows(Norm::layer, x.to_f64(), 6, 1e-5, g.to_f64(), nullptr));
}

TEST(RMSNormLayer, MatchesTheFormula) {
  struct M : tg::Module {
    tg::RMSNorm norm{*this, "norm", 4, {.eps = 1e-2}};
  } m;
  const HostTensor x = random_f32({2, 3, 4}, 7);
  const HostTensor g = random_f32({4}, 8);
  const HostTensor y = run_layer(m, {DType::f32, {2, 3, 4}}, x, [&](Tensor t) { return m.norm(t); }, {{"norm.g", g}});
  expect_close(y.to_f64(), normalized_rows(Norm::rms, x.to_f64(), 4, 1e-2, g.to_f64(), nullptr));
}

TEST(EmbeddingLayer, PicksRows) {
  struct M : tg::Module {
    tg::Embedding embed{*this, "embed", 7, 3};
  } m;
  const std::vector<std::int32_t> idx{6, 0, 3, 3, 1, 5};
  const HostTensor y =
      run_layer(m, {DType::i32, {2, 3}}, HostTensor::i32({2, 3}, idx), [&](Tensor t) { return m.embed(t); });
  EXPECT_EQ(y.type.shape, (Shape{2, 3, 3}));
  const auto w = tg::init_params(m, 5).at("embed.W").to_f64();
  std::vector<double> want;
  for (auto i : idx) {
    for (std::size_t j = 0; j < 3; ++j) want.push_back(w[static_cast<std::size_t>(i) * 3 + j]);
  }
  EXPECT_EQ(y.to_f64(), want);
}

TEST(Conv2dLayer, MatchesADirectConvolution) {
  constexpr std::int64_t N = 2, C = 2, O = 3, H = 5, K = 3, S = 2, P = 1;
  struct M : tg::Module {
    tg::Conv2d conv{*this, "conv", C, O, K, {.stride = S, .padding = P}};
  } m;
  EXPECT_EQ(m.conv.W.shape(), (Shape{O, C, K, K}));
  const HostTensor x = random_f32({N, C, H, H}, 9);
  const HostTensor bias = random_f32({O}, 10);
  const HostTensor y =
      run_layer(m, {DType::f32, {N, C, H, H}}, x, [&](Tensor t) { return m.conv(t); }, {{"conv.b", bias}});
  constexpr std::int64_t OH = (H + 2 * P - K) / S + 1;
  ASSERT_EQ(y.type.shape, (Shape{N, O, OH, OH}));
  const auto w = tg::init_params(m, 5).at("conv.W").to_f64();
  auto at = [](const std::vector<double>& v, std::int64_t i) { return v[static_cast<std::size_t>(i)]; };
  std::vector<double> want;
  for (std::int64_t n = 0; n < N; ++n) {
    for (std::int64_t o = 0; o < O; ++o) {
      for (std::int64_t oy = 0; oy < OH; ++oy) {
        for (std::int64_t ox = 0; ox < OH; ++ox) {
          double acc = at(bias.to_f64(), o);
          for (std::int64_t c = 0; c < C; ++c) {
            for (std::int64_t ky = 0; ky < K; ++ky) {
              for (std::int64_t kx = 0; kx < K; ++kx) {
                const std::int64_t iy = oy * S - P + ky, ix = ox * S - P + kx;
                if (iy < 0 || iy >= H || ix < 0 || ix >= H) continue;
                acc += at(x.to_f64(), ((n * C + c) * H + iy) * H + ix) * at(w, ((o * C + c) * K + ky) * K + kx);
              }
            }
          }
          want.push_back(acc);
        }
      }
    }
  }
  expect_close(y.to_f64(), want);
}

// Grouped, dilated, per-axis and padding = same layers: W [out, in / groups, kh, kw], and the forward is
// conv2d with the layer's options plus the bias, the odd padding of an even kernel included.
TEST(Conv2dLayer, PassesGroupsDilationAndPaddingSameToTheOp) {
  struct M : tg::Module {
    tg::Conv2d same{*this, "same", 4, 6, {2, 3}, {.padding = tg::kPaddingSame, .dilation = {1, 2}, .groups = 2}};
    tg::Conv2d strided{*this, "strided", 3, 6, 3, {.stride = {2, 1}, .padding = {1, 0}, .dilation = 2, .groups = 3}};
  } m;
  EXPECT_EQ(m.same.W.shape(), (Shape{6, 2, 2, 3}));
  EXPECT_EQ(m.same.in_channels(), 4);
  EXPECT_EQ(m.strided.W.shape(), (Shape{6, 1, 3, 3}));
  EXPECT_EQ(m.strided.in_channels(), 3);
  EXPECT_EQ(m.strided.conv_options().stride, (tg::Pair2d{2, 1}));
  EXPECT_EQ(m.strided.conv_options().groups, 3);
  const HostTensor bias = random_f32({6}, 11);
  for (const tg::Conv2d* layer : {&m.same, &m.strided}) {
    const std::int64_t c = layer->in_channels();
    const Shape x_shape{2, c, 7, 6};
    const HostTensor x = random_f32(x_shape, 12);
    const std::string b_name = layer->b->name();
    // The layer minus the op it should be: zero everywhere.
    const HostTensor diff = run_layer(m, {DType::f32, x_shape}, x,
                                      [&](Tensor t) {
                                        const Tensor direct =
                                            tg::add(tg::conv2d(t, layer->W.tensor(), layer->conv_options()),
                                                    tg::reshape(layer->b->tensor(), {1, 6, 1, 1}));
                                        return tg::sub((*layer)(t), direct);
                                      },
                                      {{b_name, bias}});
    const Shape want = layer == &m.same ? Shape{2, 6, 7, 6} : Shape{2, 6, 3, 2};  // same keeps H and W
    EXPECT_EQ(diff.type.shape, want) << b_name;
    for (std::size_t i = 0; i < diff.size(); ++i) ASSERT_EQ(diff.at(i), 0.0) << b_name << " element " << i;
  }
}

// ---- options and defaults ----

TEST(Layers, ParamDefaultsAndDecayOptions) {
  struct M : tg::Module {
    tg::Linear lin{*this, "lin", 2, 3};
    tg::Linear lin_off{*this, "lin_off", 2, 3, {.init = tg::init::kaiming(), .decay = false}};
    tg::LayerNorm ln{*this, "ln", 3};
    tg::LayerNorm ln_on{*this, "ln_on", 3, {.decay = true}};
    tg::RMSNorm rms{*this, "rms", 3};
    tg::RMSNorm rms_on{*this, "rms_on", 3, {.decay = true}};
    tg::Embedding emb{*this, "emb", 5, 3};
    tg::Embedding emb_off{*this, "emb_off", 5, 3, {.decay = false}};
    tg::Conv2d conv{*this, "conv", 1, 2, 3};
    tg::Conv2d conv_off{*this, "conv_off", 1, 2, 3, {.bias = false, .decay = false}};
  } m;
  struct Want {
    tg::InitKind init;
    bool decay;
  };
  const std::map<std::string, Want> want{
      {"lin.W", {tg::InitKind::randn, true}},        {"lin.b", {tg::InitKind::zeros, false}},
      {"lin_off.W", {tg::InitKind::kaiming, false}}, {"lin_off.b", {tg::InitKind::zeros, false}},
      {"ln.g", {tg::InitKind::ones, false}},         {"ln.b", {tg::InitKind::zeros, false}},
      {"ln_on.g", {tg::InitKind::ones, true}},       {"ln_on.b", {tg::InitKind::zeros, true}},
      {"rms.g", {tg::InitKind::ones, false}},        {"rms_on.g", {tg::InitKind::ones, true}},
      {"emb.W", {tg::InitKind::randn, true}},        {"emb_off.W", {tg::InitKind::randn, false}},
      {"conv.W", {tg::InitKind::randn, true}},       {"conv.b", {tg::InitKind::zeros, false}},
      {"conv_off.W", {tg::InitKind::randn, false}},
  };
  const auto params = m.params();
  ASSERT_EQ(params.size(), want.size());
  for (const auto& p : params) {
    ASSERT_TRUE(want.contains(p.name)) << p.name;
    EXPECT_EQ(p.init.kind, want.at(p.name).init) << p.name;
    EXPECT_EQ(p.decay, want.at(p.name).decay) << p.name;
  }
  EXPECT_EQ(m.lin.W.init().scale, 0.02);
  EXPECT_EQ(m.conv.b->shape(), (Shape{2}));
}

TEST(Layers, RefuseBadSizes) {
  tg::Module root;
  EXPECT_THROW(tg::Linear(root, "a", 0, 3), tg::Error);
  EXPECT_THROW(tg::Embedding(root, "b", 4, 0), tg::Error);
  EXPECT_THROW(tg::Conv2d(root, "c", 1, 1, 3, {.stride = 0}), tg::Error);
  EXPECT_THROW(tg::Conv2d(root, "d", 1, 1, 3, {.padding = -1}), tg::Error);
  EXPECT_EQ(root.num_params(), 0u);
}

// Expects `make` to throw a tg::Error whose message holds every one of `parts`.
void expect_error(const std::function<void()>& make, std::initializer_list<std::string_view> parts) {
  try {
    make();
    ADD_FAILURE() << "expected a tg::Error";
  } catch (const tg::Error& e) {
    const std::string what = e.what();
    for (auto part : parts) EXPECT_NE(what.find(part), std::string::npos) << "missing '" << part << "' in: " << what;
  }
}

TEST(Layers, Conv2dRefusesBadGroupsDilationAndPadding) {
  tg::Module root;
  expect_error([&] { tg::Conv2d(root, "in", 3, 4, 3, {.groups = 2}); },
               {"Conv2d 'in'", "groups 2 must divide in_channels 3 and out_channels 4"});
  expect_error([&] { tg::Conv2d(root, "out", 4, 3, 3, {.groups = 2}); },
               {"Conv2d 'out'", "groups 2 must divide in_channels 4 and out_channels 3"});
  expect_error([&] { tg::Conv2d(root, "g0", 2, 2, 3, {.groups = 0}); }, {"Conv2d 'g0'", "groups must be >= 1, got 0"});
  expect_error([&] { tg::Conv2d(root, "same", 2, 2, 3, {.stride = 2, .padding = tg::kPaddingSame}); },
               {"Conv2d 'same'", "padding = same needs stride 1", "PyTorch"});
  expect_error(
      [&] {
        tg::Conv2d(root, "same_w", 2, 2, 3, {.stride = {1, 2}, .padding = tg::kPaddingSame});
      },
      {"Conv2d 'same_w'", "padding = same needs stride 1"});
  expect_error(
      [&] {
        tg::Conv2d(root, "dil", 2, 2, 3, {.dilation = {1, 0}});
      },
      {"Conv2d 'dil'", "dilation width must be >= 1, got 0"});
  expect_error(
      [&] {
        tg::Conv2d(root, "stride", 2, 2, 3, {.stride = {0, 1}});
      },
      {"Conv2d 'stride'", "stride height must be >= 1, got 0"});
  expect_error(
      [&] {
        tg::Conv2d(root, "pad", 2, 2, 3, {.padding = {0, -1}});
      },
      {"Conv2d 'pad'", "padding must be >= 0, got [0, -1]"});
  expect_error([&] { tg::Conv2d(root, "kernel", 2, 2, {3, 0}); }, {"Conv2d 'kernel'", "kernel width must be >= 1"});
  EXPECT_EQ(root.num_params(), 0u);
}

// ---- errors and call sites ----

struct Zoo : tg::Module {
  tg::Linear lin{*this, "lin", 4, 2};
  tg::LayerNorm ln{*this, "ln", 4};
  tg::RMSNorm rms{*this, "rms", 4};
  tg::Embedding emb{*this, "emb", 5, 4};
  tg::Conv2d conv{*this, "conv", 3, 2, 3};
};

// Expects `call` (made on line `line`) to throw a ShapeError naming `op` at that line.
void expect_shape_error(const std::function<void()>& call, const std::string& op, std::uint32_t line,
                        const std::string& mention) {
  try {
    call();
    ADD_FAILURE() << "expected a ShapeError from " << op;
  } catch (const tg::ShapeError& e) {
    EXPECT_EQ(e.op(), op) << e.what();
    EXPECT_EQ(e.location().line, line) << e.what();
    EXPECT_NE(e.location().file.find("nn_test.cpp"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(mention), std::string::npos) << e.what();
  }
}

TEST(Layers, WrongInputsThrowShapeErrorsAtTheCallersLine) {
  Zoo zoo;
  tg::GraphBuilder b("g");
  tg::TracingScope scope(b);
  tg::ParamBinding bound(zoo, b);
  const Tensor x3 = b.input("x3", {DType::f32, {2, 3}});
  const Tensor idx = b.input("idx", {DType::i32, {2}});
  const Tensor img = b.input("img", {DType::f32, {1, 3, 2, 2}});
  // clang-format off
  expect_shape_error([&] { (void)zoo.lin(x3); }, "Linear 'lin'", __LINE__, "length 4 (in_features)");
  expect_shape_error([&] { (void)zoo.lin(idx); }, "Linear 'lin'", __LINE__, "must be f32");
  expect_shape_error([&] { (void)zoo.ln(x3); }, "LayerNorm 'ln'", __LINE__, "length 4");
  expect_shape_error([&] { (void)zoo.rms(x3); }, "RMSNorm 'rms'", __LINE__, "length 4");
  expect_shape_error([&] { (void)zoo.emb(x3); }, "Embedding 'emb'", __LINE__, "must be i32");
  expect_shape_error([&] { (void)zoo.conv(x3); }, "Conv2d 'conv'", __LINE__, "in_channels 3");
  expect_shape_error([&] { (void)zoo.conv(img); }, "conv2d", __LINE__, "kernel");  // the op's own rule
  // clang-format on
}

TEST(Layers, GroupedAndDilatedConv2dWrongInputsNameTheCallersLine) {
  struct M : tg::Module {
    tg::Conv2d grouped{*this, "grouped", 4, 2, 3, {.groups = 2}};
    tg::Conv2d dilated{*this, "dilated", 1, 1, 3, {.dilation = {3, 1}}};
  } m;
  tg::GraphBuilder b("g");
  tg::TracingScope scope(b);
  tg::ParamBinding bound(m, b);
  const Tensor two = b.input("two", {DType::f32, {1, 2, 8, 8}});
  const Tensor small = b.input("small", {DType::f32, {1, 1, 6, 6}});
  // clang-format off
  expect_shape_error([&] { (void)m.grouped(two); }, "Conv2d 'grouped'", __LINE__, "in_channels 4");
  expect_shape_error([&] { (void)m.dilated(small); }, "conv2d", __LINE__, "(dilation 3: spans 7) exceeds the padded input height 6");
  // clang-format on
}

TEST(Layers, TracedNodesCarryTheCallersLine) {
  Zoo zoo;
  tg::GraphBuilder b("g");
  tg::TracingScope scope(b);
  tg::ParamBinding bound(zoo, b);
  const Tensor x = b.input("x", {DType::f32, {2, 4}});
  const std::uint32_t line = __LINE__ + 1;
  b.output("y", zoo.lin(zoo.rms(zoo.ln(x))));
  ASSERT_FALSE(b.graph().nodes().empty());
  for (const tg::Node& node : b.graph().nodes()) {
    EXPECT_EQ(node.loc.line, line) << tg::op_name(node.op);
    EXPECT_NE(node.loc.file.find("nn_test.cpp"), std::string::npos);
  }
}

// ---- a small model with a loss ----

struct TinyLM : tg::Module {
  tg::Embedding embed{*this, "embed", 6, 4};
  tg::LayerNorm ln{*this, "ln", 4};
  tg::Linear head{*this, "head", 4, 6};
};

Tensor logits_of(const TinyLM& m, const Tensor& tokens) { return m.head(m.ln(m.embed(tokens))); }

TEST(LayerLosses, CrossEntropyOfALayerModelMatchesNllAndFiniteDifferences) {
  TinyLM m;
  tg::GraphBuilder b("lm");
  tg::TracingScope scope(b);
  tg::ParamBinding bound(m, b);
  const Tensor tokens = b.input("tokens", {DType::i32, {2, 3}});
  const Tensor targets = b.input("targets", {DType::i32, {2, 3}});
  const Tensor logits = logits_of(m, tokens);
  b.output("loss", tg::cross_entropy(logits, targets));
  b.output("nll", tg::nll_loss(tg::log_softmax(logits), targets));
  const tg::Graph step = tg::differentiate(b.graph());  // every param input by default

  tg::TensorMap inputs = tg::init_params(m, 11);
  inputs.insert_or_assign("head.W", random_f32({4, 6}, 12));  // larger than 0.02 so the loss moves
  inputs.emplace("tokens", HostTensor::i32({2, 3}, {0, 5, 2, 2, 4, 1}));
  inputs.emplace("targets", HostTensor::i32({2, 3}, {1, 1, 3, 0, 5, 2}));
  const auto out = tg::interpret(step, inputs).outputs;
  EXPECT_NEAR(out.at("loss").at(0), out.at("nll").at(0), 1e-13);
  for (const auto& p : m.params()) EXPECT_TRUE(out.contains("grad." + p.name)) << p.name;

  // d loss / d head.W[1, 2] by central differences (the value perturbed in double: the f64 oracle
  // takes inputs as given).
  const double h = 1e-6;
  auto loss_at = [&](double delta) {
    tg::TensorMap shifted = inputs;
    shifted.at("head.W").mutable_wide()[1 * 6 + 2] += delta;
    return tg::interpret(step, shifted).outputs.at("loss").at(0);
  };
  const double fd = (loss_at(h) - loss_at(-h)) / (2 * h);
  EXPECT_NEAR(out.at("grad.head.W").at(1 * 6 + 2), fd, 1e-7);
  EXPECT_GT(std::abs(fd), 1e-4);  // a gradient that could be wrong
}

}  // namespace
