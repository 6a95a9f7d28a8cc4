// Modules, params, bindings and init: dotted names through nested modules and ModuleLists,
// registration order, refused names (duplicates, dots, empty) and what a refused constructor leaves
// behind; decay defaults; binding a model to graphs (param inputs, nesting, two graphs in turn, use
// outside a binding, param arithmetic with the caller's site); and init determinism (same seed same
// bits, on one thread too; another seed or name other bits; one param's values independent of the
// others), statistics, and the literal and kaiming fan-in rules.
#include "tensorgrad/train/module.h"

#include <gtest/gtest.h>
#include <tbb/global_control.h>

#include <cmath>
#include <functional>
#include <string>
#include <type_traits>
#include <vector>

#include "support/library.h"
#include "tensorgrad/train/init.h"
#include "tensorgrad/train/nn.h"

namespace {

using tg::DType;
using tg::InitKind;
using tg::Shape;
using tg::Tensor;

std::vector<std::string> names_of(const tg::Module& m) {
  std::vector<std::string> names;
  for (const auto& p : m.params()) names.push_back(p.name);
  return names;
}

// A message check that prints the message when it fails.
void expect_error_mentions(const std::function<void()>& fn, const std::vector<std::string>& needles) {
  try {
    fn();
    ADD_FAILURE() << "expected a tg::Error";
  } catch (const tg::Error& e) {
    for (const auto& needle : needles) EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

struct MLP : tg::Module {
  tg::Linear l1{*this, "l1", 2, 8};
  tg::Linear l2{*this, "l2", 8, 1};
};

struct Attention : tg::Module {
  Attention(tg::Module& parent, std::string name, std::int64_t d)
      : Module(parent, std::move(name)), q(*this, "q", d, d), k(*this, "k", d, d, {.bias = false}) {}
  tg::Linear q;
  tg::Linear k;
};

struct Block : tg::Module {
  Block(tg::Module& parent, std::string name, std::int64_t d)
      : Module(parent, std::move(name)), ln(*this, "ln", d), attn(*this, "attn", d) {}
  tg::LayerNorm ln;
  Attention attn;
};

struct Transformer : tg::Module {
  explicit Transformer(std::int64_t layers) : blocks(*this, "layers", layers, 4) {}
  tg::Embedding embed{*this, "embed", 10, 4};
  tg::ModuleList<Block> blocks;
  tg::Param scale{*this, "scale", {}, {.init = tg::init::ones()}};
};

// ---- names and registration ----

TEST(Module, DottedNamesFollowThePathInRegistrationOrder) {
  MLP mlp;
  EXPECT_EQ(names_of(mlp), (std::vector<std::string>{"l1.W", "l1.b", "l2.W", "l2.b"}));
  EXPECT_EQ(mlp.l1.W.name(), "l1.W");
  EXPECT_EQ(mlp.l1.path(), "l1");
  EXPECT_EQ(mlp.path(), "");
  const auto params = mlp.params();
  EXPECT_EQ(params[0].shape, (Shape{2, 8}));
  EXPECT_EQ(params[1].shape, (Shape{8}));
  EXPECT_EQ(params[0].init, tg::init::randn(0.02));
  EXPECT_EQ(params[1].init, tg::init::zeros());
}

TEST(Module, NestedModulesAndListsGiveIndexedNames) {
  Transformer t(2);
  EXPECT_EQ(names_of(t),
            (std::vector<std::string>{"embed.W", "layers.0.ln.g", "layers.0.ln.b", "layers.0.attn.q.W",
                                      "layers.0.attn.q.b", "layers.0.attn.k.W", "layers.1.ln.g", "layers.1.ln.b",
                                      "layers.1.attn.q.W", "layers.1.attn.q.b", "layers.1.attn.k.W", "scale"}));
  EXPECT_EQ(t.blocks.size(), 2u);
  EXPECT_EQ(t.blocks[1].attn.q.W.name(), "layers.1.attn.q.W");
  // A sub-module lists its own params, still named from the root.
  EXPECT_EQ(names_of(t.blocks[1].attn),
            (std::vector<std::string>{"layers.1.attn.q.W", "layers.1.attn.q.b", "layers.1.attn.k.W"}));
  int visited = 0;
  for (const Block& block : t.blocks) EXPECT_EQ(block.local_name(), std::to_string(visited++));
  EXPECT_EQ(visited, 2);
  t.blocks.emplace_back(4);
  EXPECT_EQ(t.blocks[2].ln.g.name(), "layers.2.ln.g");
  EXPECT_EQ(t.num_params(), 17u);
}

TEST(Module, NeitherCopyableNorMovable) {
  static_assert(!std::is_copy_constructible_v<tg::Module> && !std::is_move_constructible_v<tg::Module>);
  static_assert(!std::is_copy_constructible_v<MLP> && !std::is_move_constructible_v<MLP>);
  static_assert(!std::is_copy_assignable_v<MLP> && !std::is_move_assignable_v<MLP>);
  static_assert(!std::is_copy_constructible_v<tg::Param> && !std::is_move_constructible_v<tg::Param>);
  static_assert(!std::is_move_constructible_v<tg::ModuleList<Block>>);
}

TEST(Module, DuplicateNamesNameTheFullPath) {
  tg::Module root;
  tg::Module block(root, "block");
  tg::Linear first(block, "proj", 2, 2);
  expect_error_mentions([&] { tg::Linear again(block, "proj", 2, 2); }, {"duplicate", "'block.proj'"});
  expect_error_mentions([&] { tg::Param again(block, "proj", {2}); }, {"duplicate", "'block.proj'"});
  expect_error_mentions([&] { tg::Param again(first, "W", {2}); }, {"duplicate", "'block.proj.W'"});
  // The refused registrations left nothing behind.
  EXPECT_EQ(names_of(root), (std::vector<std::string>{"block.proj.W", "block.proj.b"}));
}

TEST(Module, NamesMustBeNonEmptyAndDotFree) {
  tg::Module root;
  expect_error_mentions([&] { tg::Module child(root, "a.b"); }, {"'a.b'", "'.'"});
  expect_error_mentions([&] { tg::Param p(root, "", {1}); }, {"empty"});
  EXPECT_EQ(root.num_params(), 0u);
}

TEST(Module, AThrowingConstructorUnregistersWhatItRegistered) {
  tg::Module root;
  tg::ModuleList<tg::Linear> list(root, "list");
  list.emplace_back(3, 4);
  // Linear registers itself and its W before it refuses out_features = 0.
  expect_error_mentions([&] { list.emplace_back(3, 0); }, {"Linear 'list.1'", "out_features"});
  EXPECT_EQ(list.size(), 1u);
  EXPECT_EQ(names_of(root), (std::vector<std::string>{"list.0.W", "list.0.b"}));
  list.emplace_back(4, 5);  // the index is free again
  EXPECT_EQ(names_of(root).back(), "list.1.b");
}

TEST(Module, ScopedModulesUnregisterOnDestruction) {
  tg::Module root;
  { tg::Linear temporary(root, "tmp", 2, 2); }
  EXPECT_EQ(root.num_params(), 0u);
  tg::Linear again(root, "tmp", 2, 2);  // the name is free again
  EXPECT_EQ(root.num_params(), 2u);
}

TEST(Param, DecayDefaultsFollowTheInit) {
  tg::Module root;
  EXPECT_TRUE(tg::Param(root, "randn", {2}).decay());
  EXPECT_TRUE(tg::Param(root, "kaiming", {2, 2}, {.init = tg::init::kaiming()}).decay());
  EXPECT_TRUE(tg::Param(root, "literal", {2}, {.init = tg::init::literal({1, 2})}).decay());
  EXPECT_FALSE(tg::Param(root, "zeros", {2}, {.init = tg::init::zeros()}).decay());
  EXPECT_FALSE(tg::Param(root, "ones", {2}, {.init = tg::init::ones()}).decay());
  EXPECT_FALSE(tg::Param(root, "randn_off", {2}, {.decay = false}).decay());
  EXPECT_TRUE(tg::Param(root, "zeros_on", {2}, {.init = tg::init::zeros(), .decay = true}).decay());
}

TEST(Param, RefusesInitsThatCannotFillTheShape) {
  tg::Module root;
  tg::Module child(root, "c");
  expect_error_mentions(
      [&] {
        tg::Param p(child, "w", {2, 3}, {.init = tg::init::literal({1, 2, 3})});
      },
      {"'c.w'", "[2,3]", "3 values", "holds 6"});
  expect_error_mentions([&] { tg::Param p(child, "w", {2}, {.init = tg::init::randn(-1)}); }, {"'c.w'", "scale"});
  expect_error_mentions([&] { tg::Param p(child, "w", {2}, {.init = tg::init::kaiming({.fan_in = 0})}); },
                        {"'c.w'", "fan_in"});
  expect_error_mentions([&] { tg::Param p(child, "w", {2, -1}); }, {"'c.w'", "negative"});
  // init_value checks too: a ParamInfo can be built by hand.
  expect_error_mentions([] { tg::init_value({"x", {4}, tg::init::literal({1}), true}, 0); }, {"'x'", "1 values"});
}

// ---- binding ----

TEST(ParamBinding, CreatesOneParamInputPerParam) {
  MLP mlp;
  tg::GraphBuilder b("g");
  tg::TracingScope scope(b);
  tg::ParamBinding bound(mlp, b);
  const tg::Graph& g = b.graph();
  ASSERT_EQ(g.inputs().size(), 4u);
  for (const auto& p : mlp.params()) {
    const auto id = g.find_input(p.name);
    ASSERT_TRUE(id.has_value()) << p.name;
    EXPECT_EQ(g.type(*id), (tg::TensorType{DType::f32, p.shape}));
    EXPECT_EQ(g.input_of_value(*id)->kind, tg::InputKind::param);
  }
  EXPECT_EQ(mlp.l1.W.tensor().id(), *g.find_input("l1.W"));
  const Tensor as_tensor = *mlp.l2.b;  // the implicit conversion
  EXPECT_EQ(as_tensor.id(), *g.find_input("l2.b"));
}

TEST(ParamBinding, UseOutsideABindingNamesTheParam) {
  MLP mlp;
  expect_error_mentions([&] { (void)mlp.l2.W.tensor(); }, {"'l2.W'", "outside a binding"});
  tg::GraphBuilder b("g");
  tg::TracingScope scope(b);
  const Tensor x = b.input("x", {DType::f32, {3, 2}});
  { tg::ParamBinding bound(mlp, b); }  // ended
  expect_error_mentions([&] { (void)mlp.l1(x); }, {"'l1.W'", "outside a binding"});
}

TEST(ParamBinding, OneModelBindsToSeveralGraphsInTurn) {
  MLP mlp;
  auto trace = [&](const std::string& name, std::int64_t batch) {
    tg::GraphBuilder b(name);
    tg::TracingScope scope(b);
    auto bound = tg::bind_params(mlp, b);
    const Tensor x = b.input("x", {DType::f32, {batch, 2}});
    b.output("y", mlp.l2(tg::relu(mlp.l1(x))));
    return b.take();
  };
  const tg::Graph train = trace("train", 8);  // the binding ended with the lambda
  const tg::Graph infer = trace("infer", 1);
  auto run = [&](const tg::Graph& g, std::int64_t batch) {
    tg::TensorMap inputs = tg::init_params(mlp, 7);
    std::vector<float> x(static_cast<std::size_t>(batch * 2));
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = i % 2 ? -0.75f : 1.5f;  // every row [1.5, -0.75]
    inputs.emplace("x", tg::HostTensor::f32({batch, 2}, x));
    return tg::interpret(g, inputs).outputs.at("y");
  };
  const auto y_train = run(train, 8);
  const auto y_infer = run(infer, 1);
  ASSERT_EQ(y_train.type.shape, (Shape{8, 1}));
  ASSERT_EQ(y_infer.type.shape, (Shape{1, 1}));
  for (double v : y_train.to_f64()) EXPECT_EQ(v, y_infer.at(0));
}

TEST(ParamBinding, NestedBindingsResolveToTheInnermostHolder) {
  MLP model;
  MLP other;
  tg::GraphBuilder a("a");
  tg::GraphBuilder b("b");
  tg::ParamBinding outer(model, a);
  tg::ParamBinding other_bound(other, b);
  EXPECT_EQ(&model.l1.W.tensor().builder(), &a);
  {
    tg::GraphBuilder c("c");
    tg::ParamBinding inner(model, c);
    EXPECT_EQ(&model.l1.W.tensor().builder(), &c);
    EXPECT_EQ(&other.l1.W.tensor().builder(), &b);  // inner does not hold `other`: found further out
  }
  EXPECT_EQ(&model.l1.W.tensor().builder(), &a);
}

TEST(ParamBinding, AFailedBindingLeavesTheOthersInPlace) {
  MLP model;
  MLP twin;  // the same names
  tg::GraphBuilder a("a");
  tg::ParamBinding bound(model, a);
  expect_error_mentions([&] { tg::ParamBinding clash(twin, a); }, {"already has an input named 'l1.W'"});
  EXPECT_EQ(&model.l1.W.tensor().builder(), &a);
  expect_error_mentions([&] { (void)twin.l1.W.tensor(); }, {"'l1.W'", "outside a binding"});
}

TEST(ParamBinding, ParamArithmeticReportsTheCallersLine) {
  tg::Module root;
  tg::Param v(root, "v", {3});
  tg::Param w(root, "w", {4});
  tg::GraphBuilder b("g");
  tg::TracingScope scope(b);
  tg::ParamBinding bound(root, b);
  const Tensor x = b.input("x", {DType::f32, {2, 3}});
  const Tensor sums[] = {x + v, v + x, v * v, 2.f * v, v / 2, -v, v - x, tg::add(x, v), tg::mul(v, 3.0)};
  for (const Tensor& t : sums) EXPECT_EQ(t.shape().back(), 3);
  const std::uint32_t line = __LINE__ + 2;
  try {
    (void)(v * w);
    ADD_FAILURE() << "[3] * [4] must not broadcast";
  } catch (const tg::ShapeError& e) {
    EXPECT_EQ(e.location().line, line) << e.what();
  }
}

// ---- init ----

tg::ParamInfo info(std::string name, Shape shape, tg::InitSpec init) {
  return {std::move(name), std::move(shape), std::move(init), true};
}

TEST(ParamInit, SameSeedSameBitsOtherSeedOrNameOtherBits) {
  const auto p = info("l1.W", {64, 32}, tg::init::randn(0.5));
  const auto first = tg::init_value(p, 42);
  EXPECT_EQ(first, tg::init_value(p, 42));
  EXPECT_EQ(first.type, (tg::TensorType{DType::f32, {64, 32}}));
  const auto other_seed = tg::init_value(p, 43);
  const auto other_high_seed = tg::init_value(p, 42 + (std::uint64_t{1} << 32));  // the seed's upper half counts
  const auto other_name = tg::init_value(info("l2.W", {64, 32}, tg::init::randn(0.5)), 42);
  for (const auto* other : {&other_seed, &other_high_seed, &other_name}) {
    int equal = 0;
    for (std::size_t i = 0; i < first.size(); ++i) equal += first.at(i) == other->at(i);
    EXPECT_LT(equal, 5);
  }
  // Every value is an f32 value, so f32 and f64 backends start from the same numbers.
  for (double v : first.to_f64()) EXPECT_EQ(v, static_cast<double>(static_cast<float>(v)));
}

TEST(ParamInit, ThreadCountDoesNotChangeTheBits) {
  const auto p = info("big", {300, 300}, tg::init::kaiming());  // many parallel chunks
  const auto parallel = tg::init_value(p, 3);
  tbb::global_control one_thread(tbb::global_control::max_allowed_parallelism, 1);
  EXPECT_EQ(parallel, tg::init_value(p, 3));
}

TEST(ParamInit, AParamsValuesDoNotDependOnTheOtherParams) {
  struct Small : tg::Module {
    tg::Linear l1{*this, "l1", 3, 4};
  };
  struct Larger : tg::Module {
    tg::Linear l0{*this, "l0", 5, 5};
    tg::Linear l1{*this, "l1", 3, 4};
  };
  Small small;
  Larger larger;
  const auto a = tg::init_params(small, 9);
  const auto b = tg::init_params(larger, 9);
  EXPECT_EQ(a.at("l1.W"), b.at("l1.W"));
  EXPECT_EQ(b.size(), 4u);
  EXPECT_NE(b.at("l0.W").at(0), b.at("l1.W").at(0));
}

// Mean and standard deviation of n draws within 5 standard errors of (0, sigma); the sample std's
// standard error is about sigma / sqrt(2n) for normals.
void expect_normal(const std::vector<double>& v, double sigma) {
  const auto n = static_cast<double>(v.size());
  double sum = 0, sum_sq = 0;
  for (double x : v) sum += x;
  const double mean = sum / n;
  for (double x : v) sum_sq += (x - mean) * (x - mean);
  const double std_dev = std::sqrt(sum_sq / (n - 1));
  EXPECT_LT(std::abs(mean), 5 * sigma / std::sqrt(n)) << "mean " << mean;
  EXPECT_LT(std::abs(std_dev - sigma), 5 * sigma / std::sqrt(2 * n)) << "std " << std_dev << " vs " << sigma;
}

TEST(ParamInit, RandnAndKaimingHaveTheirStandardDeviations) {
  expect_normal(tg::init_value(info("a", {256, 256}, tg::init::randn()), 1).to_f64(), 0.02);
  expect_normal(tg::init_value(info("b", {256, 256}, tg::init::randn(3.0)), 1).to_f64(), 3.0);
  // Linear layout [in, out]: fan_in 128.
  expect_normal(tg::init_value(info("c", {128, 512}, tg::init::kaiming()), 1).to_f64(), std::sqrt(2.0 / 128));
  expect_normal(tg::init_value(info("d", {256, 256}, tg::init::kaiming({.gain = 1})), 1).to_f64(), 1 / 16.0);
  // Conv layout [out, in, kh, kw]: fan_in = in * kh * kw = 36.
  expect_normal(tg::init_value(info("e", {1024, 4, 3, 3}, tg::init::kaiming()), 1).to_f64(), std::sqrt(2.0 / 36));
  expect_normal(tg::init_value(info("f", {256, 256}, tg::init::kaiming({.fan_in = 8})), 1).to_f64(), 0.5);
}

TEST(ParamInit, KaimingFanInFollowsTheLayouts) {
  EXPECT_EQ(tg::kaiming_fan_in({}), 1);
  EXPECT_EQ(tg::kaiming_fan_in({7}), 7);
  EXPECT_EQ(tg::kaiming_fan_in({3, 5}), 3);
  EXPECT_EQ(tg::kaiming_fan_in({8, 4, 3, 3}), 36);
}

TEST(ParamInit, ConstantAndLiteralValues) {
  EXPECT_EQ(tg::init_value(info("z", {2, 3}, tg::init::zeros()), 1).to_f64(), std::vector<double>(6, 0.0));
  EXPECT_EQ(tg::init_value(info("o", {4}, tg::init::ones()), 1).to_f64(), std::vector<double>(4, 1.0));
  const auto lit = tg::init_value(info("l", {2, 2}, tg::init::literal({0.1f, -2, 3.5f, 1e-8f})), 1);
  EXPECT_EQ(lit.to_f32(), (std::vector<float>{0.1f, -2, 3.5f, 1e-8f}));
  EXPECT_EQ(tg::init_value(info("s", {}, tg::init::randn()), 1).size(), 1u);
}

TEST(ParamInit, SpecsPrint) {
  EXPECT_EQ(tg::init::randn().to_string(), "randn(scale=0.02)");
  EXPECT_EQ(tg::init::kaiming({.gain = 1, .fan_in = 3}).to_string(), "kaiming(gain=1, fan_in=3)");
  EXPECT_EQ(tg::init::literal({1, 2}).to_string(), "literal(2 values)");
}

}  // namespace
