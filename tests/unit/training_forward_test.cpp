// Training::attach: forwards that read the training's params (after steps, uploads and resets),
// wildcard batch dims with an LRU cache of compiled graphs, and the failures of run().
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "support/library.h"
#include "tensorgrad/train/training.h"

namespace tg {
namespace {

constexpr int kN = 8;

struct LinReg : Module {
  Linear l{*this, "l", 2, 1};
};

Tensor mse(const LinReg& m, const Inputs& in) {
  Tensor r = m.l(in.at("x")) - in.at("y");
  return mean(r * r);
}

Tensor predict(const LinReg& m, const Inputs& in) { return m.l(in.at("x")); }

TensorMap batch() {
  std::vector<float> x, y;
  for (int i = 0; i < kN; ++i) {
    x.insert(x.end(), {0.1f * static_cast<float>(i), 1.f - 0.2f * static_cast<float>(i)});
    y.push_back(3.f * x[2 * i] - x[2 * i + 1]);
  }
  return {{"x", HostTensor::f32({kN, 2}, x)}, {"y", HostTensor::f32({kN, 1}, y)}};
}

Training compile_lin(const LinReg& model) {
  return compile(TrainingSpec<LinReg>{.model = model,
                                      .loss = mse,
                                      .inputs = {{"x", {{kN, 2}}}, {"y", {{kN, 1}}}},
                                      .lr = 0.05,
                                      .backend = Backend::interp_f64,
                                      .seed = 5});
}

HostTensor rows(std::int64_t b) {
  std::vector<float> x(static_cast<std::size_t>(2 * b), 0.5f);
  for (std::int64_t i = 0; i < b; ++i) x[static_cast<std::size_t>(2 * i)] = static_cast<float>(i);
  return HostTensor::f32({b, 2}, x);
}

// x W + b in double from the training's current params.
std::vector<double> expected_predictions(const Training& train, const HostTensor& x) {
  const TensorMap p = train.download_param_tensors();
  std::vector<double> out;
  for (std::int64_t i = 0; i < x.type.shape[0]; ++i) {
    out.push_back(x.at(2 * i) * p.at("l.W").at(0) + x.at(2 * i + 1) * p.at("l.W").at(1) + p.at("l.b").at(0));
  }
  return out;
}

void expect_predictions(Forward& forward, const Training& train, std::int64_t b) {
  const HostTensor x = rows(b);
  const ForwardResult r = forward.run({{"x", x}});
  ASSERT_TRUE(r.ok()) << r.failure().message;
  EXPECT_EQ(r.output().type, (TensorType{DType::f32, {b, 1}}));
  const std::vector<double> want = expected_predictions(train, x);
  for (std::size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(r.output().at(i), want[i], 1e-15) << "row " << i;
}

TEST(TrainingForward, SeesEveryParamChange) {
  LinReg model;
  Training train = compile_lin(model);
  Forward infer = train.attach(ForwardSpec<LinReg>{.forward = predict, .inputs = {{"x", {{4, 2}}}}});
  EXPECT_EQ(infer.param_names(), train.param_names());
  EXPECT_EQ(infer.cached_shapes(), 1U) << "static shapes compile at attach";
  expect_predictions(infer, train, 4);
  ASSERT_TRUE(train.step(batch()).ok());
  expect_predictions(infer, train, 4);
  train.upload_params({{"l.b", {2.5f}}});
  expect_predictions(infer, train, 4);
  train.reset();
  expect_predictions(infer, train, 4);
}

// The seed's CompiledForward has uploadParams/downloadParams too: they are the training's params.
TEST(TrainingForward, UploadAndDownloadThroughAForwardAreTheTrainings) {
  LinReg model;
  Training train = compile_lin(model);
  Forward infer = train.attach(ForwardSpec<LinReg>{.forward = predict, .inputs = {{"x", {{4, 2}}}}});
  EXPECT_EQ(infer.download_params(), train.download_params());
  infer.upload_params({{"l.W", {1.f, -2.f}}});
  EXPECT_EQ(train.download_params().at("l.W"), (std::vector<float>{1.f, -2.f}));
  expect_predictions(infer, train, 4);
  EXPECT_THROW(infer.upload_params({{"nope", {1.f}}}), Error);
  EXPECT_THROW(infer.upload_params({{"l.W", {1.f}}}), Error);
  EXPECT_EQ(infer.download_params().at("l.W"), (std::vector<float>{1.f, -2.f})) << "a refused upload wrote";
}

TEST(TrainingForward, WildcardBatchCompilesOneGraphPerSizeWithAnLru) {
  LinReg model;
  Training train = compile_lin(model);
  Forward infer =
      train.attach(ForwardSpec<LinReg>{.forward = predict, .inputs = {{"x", {{-1, 2}}}}, .max_cached_shapes = 2});
  EXPECT_EQ(infer.cached_shapes(), 0U) << "wildcards compile lazily";
  expect_predictions(infer, train, 1);
  expect_predictions(infer, train, 5);
  EXPECT_EQ(infer.cached_shapes(), 2U);
  expect_predictions(infer, train, 1);  // a hit: 1 becomes the most recent
  ASSERT_TRUE(train.step(batch()).ok());
  expect_predictions(infer, train, 3);  // evicts 5, the least recently used
  EXPECT_EQ(infer.cached_shapes(), 2U);
  expect_predictions(infer, train, 1);
  expect_predictions(infer, train, 5);  // recompiled
  EXPECT_EQ(infer.graph_for({{"x", rows(7)}}).inputs().back().name, "x");
  const auto x = infer.graph_for({{"x", rows(7)}}).find_input("x");
  ASSERT_TRUE(x.has_value());
  EXPECT_EQ(infer.graph_for({{"x", rows(7)}}).type(*x).shape, (Shape{7, 2}));
}

Tensor two_inputs(const LinReg& m, const Inputs& in) { return m.l(in.at("a")) + m.l(in.at("b")); }

TEST(TrainingForward, RunFailuresNameTheInputs) {
  LinReg model;
  Training train = compile_lin(model);
  Forward infer =
      train.attach(ForwardSpec<LinReg>{.forward = two_inputs, .inputs = {{"a", {{-1, 2}}}, {"b", {{-1, 2}}}}});
  const auto expect_failed = [&](const TensorMap& data, const std::string& kind,
                                 const std::vector<std::string>& needles) {
    const ForwardResult r = infer.run(data);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.failure().kind, kind);
    for (const std::string& n : needles) {
      EXPECT_NE(r.failure().message.find(n), std::string::npos) << n << " not in: " << r.failure().message;
    }
  };
  expect_failed({{"a", rows(2)}, {"b", rows(3)}}, "input", {"disagree", "'a' has 2", "'b' has 3"});
  expect_failed({{"a", rows(2)}}, "input", {"missing input 'b'"});
  expect_failed({{"a", rows(2)}, {"b", rows(2)}, {"c", rows(2)}}, "input", {"unknown input 'c'"});
  expect_failed({{"a", rows(2)}, {"b", HostTensor::f32({2, 3}, std::vector<float>(6, 0.f))}}, "input",
                {"input 'b'", "expected f32[2,2]", "got f32[2,3]"});
  EXPECT_EQ(infer.cached_shapes(), 0U) << "nothing compiled for failed inputs";
  const ForwardResult ok = infer.run({{"a", rows(2)}, {"b", rows(2)}});
  EXPECT_TRUE(ok.ok()) << ok.failure().message;

  // A forward that only traces at some batch sizes fails with kind "compile" at the others.
  Forward fixed = train.attach(ForwardSpec<LinReg>{.forward =
                                                       [](const LinReg& m, const Inputs& in) {
                                                         return reshape(m.l(in.at("x")), {2, 2});
                                                       },
                                                   .inputs = {{"x", {{-1, 2}}}}});
  EXPECT_TRUE(fixed.run({{"x", rows(4)}}).ok());
  const ForwardResult bad = fixed.run({{"x", rows(3)}});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.failure().kind, "compile");
}

TEST(TrainingForward, AttachRefusesBadSpecs) {
  LinReg model;
  Training train = compile_lin(model);
  EXPECT_THROW((void)train.attach(ForwardSpec<LinReg>{.forward = predict, .inputs = {{"x", {{2, -1}}}}}), Error);
  EXPECT_THROW(
      (void)train.attach(ForwardSpec<LinReg>{.forward = predict, .inputs = {{"x", {{-1, 2}}}}, .max_cached_shapes = 0}),
      Error);
  EXPECT_THROW((void)train.attach(ForwardSpec<LinReg>{.forward = predict, .inputs = {{"x", {{2, 3}}}}}), ShapeError)
      << "static shapes trace at attach";
}

}  // namespace
}  // namespace tg
