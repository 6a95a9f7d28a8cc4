// patch() on Backend::vulkan: zero ablation, mean ablation and cross-input transplant equal the
// forward written by hand on the device and the f64 oracle's patched run (within tolerance), the
// device runs the same kernels as the hand-written graph, and a training step through an active
// site gives the params behind it a zero gradient (tests/unit/patch_test.cpp has the interpreters).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "support/library.h"
#include "tensorgrad/train/patch.h"
#include "tensorgrad/train/training.h"
#include "vk_test_support.h"

namespace tg::vk {
namespace {

using testing::VkTest;

constexpr int kN = 8;
constexpr int kHidden = 16;

struct Net : Module {
  Linear l1{*this, "l1", 3, kHidden};
  Linear l2{*this, "l2", kHidden, 2};
};

Tensor patched_forward(const Net& m, const Inputs& in) {
  return m.l2(capture("h", patch("h", tanh(m.l1(in.at("x"))))));
}
Tensor hand_forward(const Net& m, const Inputs& in) { return m.l2(capture("h", in.at("h"))); }
Tensor patched_loss(const Net& m, const Inputs& in) {
  Tensor r = patched_forward(m, in) - in.at("y");
  return mean(r * r);
}

HostTensor inputs_x(float shift) {
  std::vector<float> x;
  for (int i = 0; i < kN * 3; ++i) x.push_back(std::sin(0.37f * static_cast<float>(i) + shift));
  return HostTensor::f32({kN, 3}, x);
}
HostTensor targets() {
  std::vector<float> y;
  for (int i = 0; i < kN * 2; ++i) y.push_back(std::cos(0.5f * static_cast<float>(i)));
  return HostTensor::f32({kN, 2}, y);
}

Training compile_on(const Net& model, Backend backend, std::shared_ptr<Context> ctx) {
  return compile(TrainingSpec<Net>{.model = model,
                                   .loss = patched_loss,
                                   .inputs = {{"x", {{kN, 3}}}, {"y", {{kN, 2}}}},
                                   .optimizer = {.kind = AdamConfig{}},
                                   .lr = 0.01,
                                   .backend = backend,
                                   .seed = 11,
                                   .vk_context = std::move(ctx)});
}

void expect_near(const std::vector<double>& got, const std::vector<double>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (std::size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[i], 1e-5 * (1.0 + std::abs(want[i]))) << what << " element " << i;
}

std::vector<std::string> ops_of(const Graph& g) {
  std::vector<std::string> out;
  for (const Node& node : g.nodes()) out.emplace_back(op_def(node.op).name);
  return out;
}

TEST_F(VkTest, PatchingMatchesTheHandWrittenForwardAndTheOracle) {
  auto ctx = make_context();
  Net model;
  Training gpu = compile_on(model, Backend::vulkan, ctx), oracle = compile_on(model, Backend::interp_f64, nullptr);
  const ForwardSpec<Net> patched_spec{.forward = patched_forward, .inputs = {{"x", {{-1, 3}}}}};
  Forward patched = gpu.attach(patched_spec), oracle_patched = oracle.attach(patched_spec);
  Forward hand =
      gpu.attach(ForwardSpec<Net>{.forward = hand_forward, .inputs = {{"x", {{-1, 3}}}, {"h", {{-1, kHidden}}}}});

  const ForwardResult a = patched.run({{"x", inputs_x(0.f)}});
  ASSERT_TRUE(a.ok()) << a.failure().message;
  const HostTensor h_a = a.captures().tensor("h");
  std::vector<float> means(kN * kHidden);
  const std::vector<double> h = h_a.to_f64();
  for (int j = 0; j < kHidden; ++j) {
    double sum = 0;
    for (int i = 0; i < kN; ++i) sum += h[i * kHidden + j];
    for (int i = 0; i < kN; ++i) means[i * kHidden + j] = static_cast<float>(sum / kN);
  }
  const HostTensor mean = HostTensor::f32({kN, kHidden}, means);
  const HostTensor zeros = HostTensor::filled({DType::f32, {kN, kHidden}}, 0.0);

  const TensorMap b{{"x", inputs_x(2.f)}};
  const ForwardResult b_plain = patched.run(b);
  ASSERT_TRUE(b_plain.ok()) << b_plain.failure().message;
  for (const auto& [what, patches, value] :
       {std::tuple{"zero", Patches().zero("h"), zeros}, std::tuple{"mean", Patches().set("h", mean), mean},
        std::tuple{"transplant", Patches().set("h", h_a), h_a}}) {
    const ForwardResult got = patched.run(b, patches);
    ASSERT_TRUE(got.ok()) << what << ": " << got.failure().message;
    TensorMap hand_data = b;
    hand_data.emplace("h", value);
    const ForwardResult want = hand.run(hand_data);
    ASSERT_TRUE(want.ok()) << what << ": " << want.failure().message;
    const ForwardResult ref = oracle_patched.run(b, patches);
    ASSERT_TRUE(ref.ok()) << what << ": " << ref.failure().message;
    expect_near(got.output().to_f64(), want.output().to_f64(), std::string(what) + " vs hand-written");
    expect_near(got.output().to_f64(), ref.output().to_f64(), std::string(what) + " vs oracle");
    EXPECT_NE(got.output().to_f64(), b_plain.output().to_f64()) << what << ": the patch must change the output";
    EXPECT_EQ(ops_of(patched.graph_for(b, patches)), ops_of(hand.graph_for(hand_data))) << what;
  }
  // The transplant carries A's whole hidden layer: B's output becomes A's.
  const ForwardResult transplanted = patched.run(b, Patches().set("h", h_a));
  ASSERT_TRUE(transplanted.ok());
  expect_near(transplanted.output().to_f64(), a.output().to_f64(), "transplant vs A");
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

TEST_F(VkTest, TrainingThroughAnActivePatchGivesTheCutParamsNoGradient) {
  auto ctx = make_context();
  Net model;
  Training gpu = compile_on(model, Backend::vulkan, ctx), oracle = compile_on(model, Backend::interp_f64, nullptr);
  const TensorMap data{{"x", inputs_x(0.f)}, {"y", targets()}};
  const ParamValues before = gpu.download_params();
  for (int step = 0; step < 3; ++step) {
    const StepResult got = gpu.step(data, Patches().zero("h"));
    const StepResult want = oracle.step(data, Patches().zero("h"));
    ASSERT_TRUE(got.ok()) << got.failure().message;
    ASSERT_TRUE(want.ok()) << want.failure().message;
    EXPECT_NEAR(got.loss(), want.loss(), 1e-5 * want.loss()) << "step " << step;
  }
  for (const std::string name : {"l1.W", "l1.b"}) {
    const std::vector<float> g = gpu.download_param_grads().at(name);
    EXPECT_TRUE(std::all_of(g.begin(), g.end(), [](float v) { return v == 0.f; })) << name;
    EXPECT_EQ(gpu.download_params().at(name), before.at(name)) << name;
  }
  // Unpatched again: the device step graph switches back with the state carried over.
  const StepResult got = gpu.step(data), want = oracle.step(data);
  ASSERT_TRUE(got.ok() && want.ok());
  EXPECT_NEAR(got.loss(), want.loss(), 1e-5 * want.loss());
  EXPECT_EQ(gpu.steps(), 4);
  const std::vector<float> g = gpu.download_param_grads().at("l1.W");
  EXPECT_TRUE(std::any_of(g.begin(), g.end(), [](float v) { return v != 0.f; }));
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

}  // namespace
}  // namespace tg::vk
