// patch(): zero ablation, mean ablation and cross-input transplant through Forward::run equal to the
// same forward written by hand with the replacement as an input (bit-identical on both
// interpreters); inactive sites add no node and active ones drop the nodes they make dead; bad
// patches fail with kind "patch" naming the site; training with an active site passes no gradient
// through it (docs/training/compile.md, "Patches").
#include "tensorgrad/train/patch.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "support/library.h"
#include "tensorgrad/train/training.h"

namespace tg {
namespace {

constexpr int kN = 8;
constexpr int kHidden = 4;

struct Net : Module {
  Linear l1{*this, "l1", 2, kHidden};
  Linear l2{*this, "l2", kHidden, 1};
};

// The forward under test: the hidden activation is a patch site, captured after patching.
Tensor patched_forward(const Net& m, const Inputs& in) {
  return m.l2(capture("h", patch("h", relu(m.l1(in.at("x"))))));
}
// The same forward without the site ...
Tensor plain_forward(const Net& m, const Inputs& in) { return m.l2(capture("h", relu(m.l1(in.at("x"))))); }
// ... and written by hand with the hidden activation as an input.
Tensor hand_forward(const Net& m, const Inputs& in) { return m.l2(capture("h", in.at("h"))); }

Tensor patched_loss(const Net& m, const Inputs& in) {
  Tensor r = patched_forward(m, in) - in.at("y");
  return mean(r * r);
}
Tensor hand_loss(const Net& m, const Inputs& in) {
  Tensor r = hand_forward(m, in) - in.at("y");
  return mean(r * r);
}

HostTensor inputs_x(float shift) {
  std::vector<float> x;
  for (int i = 0; i < kN; ++i) x.insert(x.end(), {0.3f * static_cast<float>(i) - 1.f + shift, 0.5f - 0.2f * shift * i});
  return HostTensor::f32({kN, 2}, x);
}
HostTensor targets() {
  std::vector<float> y;
  for (int i = 0; i < kN; ++i) y.push_back(0.25f * static_cast<float>(i) - 0.5f);
  return HostTensor::f32({kN, 1}, y);
}

TrainingSpec<Net> spec_for(const Net& model, Backend backend, std::function<Tensor(const Net&, const Inputs&)> loss,
                           InputSpecs inputs) {
  return {.model = model,
          .loss = std::move(loss),
          .inputs = std::move(inputs),
          .optimizer = {.kind = AdamConfig{}},
          .lr = 0.01,
          .backend = backend,
          .seed = 5};
}

std::vector<std::string> ops_of(const Graph& g) {
  std::vector<std::string> out;
  for (const Node& node : g.nodes()) out.emplace_back(op_def(node.op).name);
  return out;
}

class Patching : public ::testing::TestWithParam<Backend> {
 protected:
  Net model;
  Training train = compile(spec_for(model, GetParam(), patched_loss, {{"x", {{kN, 2}}}, {"y", {{kN, 1}}}}));
  Forward patched = train.attach(ForwardSpec<Net>{.forward = patched_forward, .inputs = {{"x", {{-1, 2}}}}});
  Forward plain = train.attach(ForwardSpec<Net>{.forward = plain_forward, .inputs = {{"x", {{-1, 2}}}}});
  Forward hand =
      train.attach(ForwardSpec<Net>{.forward = hand_forward, .inputs = {{"x", {{-1, 2}}}, {"h", {{-1, kHidden}}}}});

  // The patched forward's output with `patches` and the hand-written forward's with h = `value`.
  void expect_equal_to_hand(const Patches& patches, const HostTensor& value, const HostTensor& x) {
    const ForwardResult got = patched.run({{"x", x}}, patches);
    ASSERT_TRUE(got.ok()) << got.failure().message;
    const ForwardResult want = hand.run({{"x", x}, {"h", value}});
    ASSERT_TRUE(want.ok()) << want.failure().message;
    EXPECT_EQ(got.output().to_f64(), want.output().to_f64());
    EXPECT_EQ(got.captures().get("h"), value.to_f64()) << "the capture after the site sees the replacement";
  }
};

TEST_P(Patching, InactiveSiteIsTheForwardWithoutIt) {
  const TensorMap data{{"x", inputs_x(0.f)}};
  EXPECT_EQ(ops_of(patched.graph_for(data)), ops_of(plain.graph_for(data)));
  EXPECT_FALSE(patched.graph_for(data).find_input("patch.h"));
  const ForwardResult a = patched.run(data), b = plain.run(data);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a.output().to_f64(), b.output().to_f64());
}

TEST_P(Patching, ActiveSiteIsTheHandWrittenGraph) {
  const TensorMap data{{"x", inputs_x(0.f)}};
  const Graph& active = patched.graph_for(data, Patches().zero("h"));
  ASSERT_TRUE(active.find_input("patch.h"));
  EXPECT_EQ(active.type(*active.find_input("patch.h")).to_string(), "f32[8,4]");
  const HostTensor zeros = HostTensor::filled({DType::f32, {kN, kHidden}}, 0.0);
  const std::vector<std::string> hand_ops = ops_of(hand.graph_for({{"x", inputs_x(0.f)}, {"h", zeros}}));
  EXPECT_EQ(ops_of(active), hand_ops) << "the nodes computing the replaced value are dropped";
  EXPECT_LT(active.nodes().size(), patched.graph_for(data).nodes().size());
}

TEST_P(Patching, ZeroAblation) {
  const HostTensor zeros = HostTensor::filled({DType::f32, {kN, kHidden}}, 0.0);
  expect_equal_to_hand(Patches().zero("h"), zeros, inputs_x(0.f));
}

TEST_P(Patching, MeanAblation) {
  // The mean over a "dataset" of three batches, per hidden unit, computed from captures.
  std::vector<double> sum(kHidden, 0.0);
  int rows = 0;
  for (const float shift : {0.f, 0.4f, -0.7f}) {
    const ForwardResult r = plain.run({{"x", inputs_x(shift)}});
    ASSERT_TRUE(r.ok());
    const std::vector<double> h = r.captures().get("h");
    for (int i = 0; i < kN; ++i)
      for (int j = 0; j < kHidden; ++j) sum[j] += h[i * kHidden + j];
    rows += kN;
  }
  std::vector<float> mean_rows;
  for (int i = 0; i < kN; ++i)
    for (int j = 0; j < kHidden; ++j) mean_rows.push_back(static_cast<float>(sum[j] / rows));
  const HostTensor mean = HostTensor::f32({kN, kHidden}, mean_rows);
  expect_equal_to_hand(Patches().set("h", mean), mean, inputs_x(0.2f));
}

TEST_P(Patching, CrossInputTransplant) {
  const ForwardResult a = patched.run({{"x", inputs_x(0.f)}});
  const ForwardResult b = patched.run({{"x", inputs_x(1.5f)}});
  ASSERT_TRUE(a.ok() && b.ok());
  const HostTensor& h_a = a.captures().tensor("h");
  expect_equal_to_hand(Patches().set("h", h_a), h_a, inputs_x(1.5f));
  // A transplant of every unit of the only path makes B's output A's.
  const ForwardResult b_patched = patched.run({{"x", inputs_x(1.5f)}}, Patches().set("h", h_a));
  ASSERT_TRUE(b_patched.ok());
  EXPECT_EQ(b_patched.output().to_f64(), a.output().to_f64());
  EXPECT_NE(b.output().to_f64(), a.output().to_f64()) << "the two inputs must differ for the test to mean anything";
}

TEST_P(Patching, BadPatchesFailNamingTheSite) {
  const TensorMap data{{"x", inputs_x(0.f)}};
  const ForwardResult unknown = patched.run(data, Patches().zero("hidden"));
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.failure().kind, "patch");
  EXPECT_NE(unknown.failure().message.find("unknown patch site 'hidden'"), std::string::npos)
      << unknown.failure().message;
  EXPECT_NE(unknown.failure().message.find("sites are h"), std::string::npos) << unknown.failure().message;

  const ForwardResult shape = patched.run(data, Patches().set("h", HostTensor::filled({DType::f32, {kN, 5}}, 1.0)));
  ASSERT_FALSE(shape.ok());
  EXPECT_EQ(shape.failure().kind, "patch");
  EXPECT_NE(shape.failure().message.find("patch site 'h' is f32[8,4], got a value of type f32[8,5]"), std::string::npos)
      << shape.failure().message;

  const ForwardResult dtype = patched.run(data, Patches().set("h", HostTensor::filled({DType::i32, {kN, 4}}, 1.0)));
  ASSERT_FALSE(dtype.ok());
  EXPECT_EQ(dtype.failure().kind, "patch");
  EXPECT_NE(dtype.failure().message.find("'h'"), std::string::npos) << dtype.failure().message;

  const StepResult step = train.step({{"x", inputs_x(0.f)}, {"y", targets()}}, Patches().zero("nope"));
  ASSERT_FALSE(step.ok());
  EXPECT_EQ(step.failure().kind, "patch");
  EXPECT_NE(step.failure().message.find("'nope'"), std::string::npos) << step.failure().message;
  EXPECT_EQ(train.steps(), 0);
}

TEST_P(Patching, EachBatchSizeAndActiveSetIsAGraphOfItsOwn) {
  const HostTensor x3 = HostTensor::f32({3, 2}, {0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f});
  const ForwardResult plain3 = patched.run({{"x", x3}});
  ASSERT_TRUE(plain3.ok());
  EXPECT_EQ(patched.cached_shapes(), 1U);
  const ForwardResult zero3 = patched.run({{"x", x3}}, Patches().zero("h"));
  ASSERT_TRUE(zero3.ok()) << zero3.failure().message;
  EXPECT_EQ(zero3.captures().shape("h"), (Shape{3, kHidden})) << "zeros of the site's type at this batch size";
  EXPECT_EQ(patched.cached_shapes(), 2U);
  // A value of batch 8 does not fit the batch-3 site.
  const ForwardResult wrong =
      patched.run({{"x", x3}}, Patches().set("h", HostTensor::filled({DType::f32, {kN, kHidden}}, 0.0)));
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.failure().kind, "patch");
  // An unknown site is refused before any graph is compiled for it.
  ASSERT_FALSE(patched.run({{"x", x3}}, Patches().zero("nope")).ok());
  EXPECT_EQ(patched.cached_shapes(), 2U);
}

TEST_P(Patching, InactiveSitesAddNoNodeToTheTrainingStep) {
  Net plain_model;
  const auto plain_loss = [](const Net& m, const Inputs& in) {
    Tensor r = plain_forward(m, in) - in.at("y");
    return mean(r * r);
  };
  Training without = compile(spec_for(plain_model, GetParam(), plain_loss, {{"x", {{kN, 2}}}, {"y", {{kN, 1}}}}));
  EXPECT_EQ(train.kernels(), without.kernels());
  const StepResult a = train.step({{"x", inputs_x(0.f)}, {"y", targets()}});
  const StepResult b = without.step({{"x", inputs_x(0.f)}, {"y", targets()}});
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a.loss(), b.loss());
  EXPECT_EQ(train.download_params(), without.download_params());
  ASSERT_TRUE(train.step({{"x", inputs_x(0.f)}, {"y", targets()}}, Patches().zero("h")).ok());
  EXPECT_LT(train.kernels().size(), without.kernels().size()) << "the active site drops the forward before it";
}

TEST_P(Patching, SiteNamesAreUniquePerForward) {
  const auto twice = [](const Net& m, const Inputs& in) {
    return m.l2(patch("h", patch("h", relu(m.l1(in.at("x"))))));
  };
  EXPECT_THROW(train.attach(ForwardSpec<Net>{.forward = twice, .inputs = {{"x", {{kN, 2}}}}}), CompileError);
  EXPECT_THROW(Patches().zero(""), Error);
}

TEST_P(Patching, TrainingThroughAnActiveSiteEqualsTheHandWrittenStep) {
  Net hand_model;
  Training by_hand = compile(
      spec_for(hand_model, GetParam(), hand_loss, {{"x", {{kN, 2}}}, {"y", {{kN, 1}}}, {"h", {{kN, kHidden}}}}));
  const HostTensor zeros = HostTensor::filled({DType::f32, {kN, kHidden}}, 0.0);
  const ParamValues before = train.download_params();
  ASSERT_EQ(before, by_hand.download_params()) << "same seed, same init";

  const StepResult got = train.step({{"x", inputs_x(0.f)}, {"y", targets()}}, Patches().zero("h"));
  const StepResult want = by_hand.step({{"x", inputs_x(0.f)}, {"y", targets()}, {"h", zeros}});
  ASSERT_TRUE(got.ok()) << got.failure().message;
  ASSERT_TRUE(want.ok()) << want.failure().message;
  EXPECT_EQ(got.loss(), want.loss());
  EXPECT_EQ(train.download_param_grads(), by_hand.download_param_grads());
  EXPECT_EQ(train.download_params(), by_hand.download_params());
  // No gradient flows through the active site: l1 only reaches the loss through it.
  for (const std::string name : {"l1.W", "l1.b"}) {
    const std::vector<float> g = train.download_param_grads().at(name);
    EXPECT_TRUE(std::all_of(g.begin(), g.end(), [](float v) { return v == 0.f; })) << name;
    EXPECT_EQ(train.download_params().at(name), before.at(name)) << name << ": Adam moves nothing with zero moments";
  }
  EXPECT_TRUE(train.graph().find_input("patch.h"));

  // Back to no patches: the step graph switches back, with the params and state carried over.
  const StepResult next = train.step({{"x", inputs_x(0.f)}, {"y", targets()}});
  ASSERT_TRUE(next.ok()) << next.failure().message;
  EXPECT_EQ(train.steps(), 2);
  EXPECT_FALSE(train.graph().find_input("patch.h"));
  const std::vector<float> g = train.download_param_grads().at("l1.W");
  EXPECT_TRUE(std::any_of(g.begin(), g.end(), [](float v) { return v != 0.f; }));
  const std::vector<float> m = train.download_optimizer_state().at("l2.W.adam.m").to_f32();
  EXPECT_TRUE(std::any_of(m.begin(), m.end(), [](float v) { return v != 0.f; }));
  EXPECT_NE(train.download_params().at("l2.W"), before.at("l2.W"));
}

INSTANTIATE_TEST_SUITE_P(Interpreters, Patching, ::testing::Values(Backend::interp_f64, Backend::interp_f32),
                         [](const ::testing::TestParamInfo<Backend>& param_info) {
                           return param_info.param == Backend::interp_f64 ? "f64" : "f32";
                         });

}  // namespace
}  // namespace tg
