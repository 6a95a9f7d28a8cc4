// Gradient accumulation (TrainingSpec::micro_batches) on the interpreters: k micro-batches of b
// give one batch of k*b's update (the f64 oracle to rounding, f32 within its class), the same bits
// from run to run, the mean loss and gradients summed in micro-batch order, a random stream per
// micro-batch, and clear errors for what it cannot split. tests/vk/vk_micro_batches_test.cpp
// runs it on Vulkan and checks the memory plan.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "support/library.h"
#include "tensorgrad/train/training.h"

namespace tg {
namespace {

constexpr std::int64_t kBatch = 24;  // 1, 2, 3, 4, 6, 8, 12 and 24 micro-batches divide it
constexpr std::int64_t kIn = 5, kHidden = 16, kClasses = 3;

struct Classifier : Module {
  Linear l1{*this, "l1", kIn, kHidden};
  Linear l2{*this, "l2", kHidden, kClasses};
};

Tensor classifier_loss(const Classifier& m, const Inputs& in) {
  const Tensor h = capture("hidden", tanh(m.l1(in.at("x"))));
  return cross_entropy(m.l2(h), in.at("label"));
}

InputSpecs classifier_inputs() { return {{"x", {{kBatch, kIn}}}, {"label", {{kBatch}, DType::i32}}}; }

TensorMap classifier_batch(int step) {
  std::vector<float> x;
  std::vector<std::int32_t> label;
  for (std::int64_t i = 0; i < kBatch; ++i) {
    for (std::int64_t j = 0; j < kIn; ++j)
      x.push_back(std::sin(0.37f * static_cast<float>(i * kIn + j) + 0.11f * static_cast<float>(step)));
    label.push_back(static_cast<std::int32_t>((i * 7 + step) % kClasses));
  }
  return {{"x", HostTensor::f32({kBatch, kIn}, x)}, {"label", HostTensor::i32({kBatch}, label)}};
}

Training compile_classifier(const Classifier& model, Backend backend, int micro_batches,
                            OptimizerConfig optimizer = {.kind = AdamConfig{}}) {
  return compile(TrainingSpec<Classifier>{.model = model,
                                          .loss = classifier_loss,
                                          .inputs = classifier_inputs(),
                                          .optimizer = std::move(optimizer),
                                          .lr = 0.02,
                                          .backend = backend,
                                          .seed = 5,
                                          .micro_batches = micro_batches});
}

double largest_difference(const ParamValues& a, const ParamValues& b) {
  double worst = 0;
  for (const auto& [name, values] : a) {
    const std::vector<float>& other = b.at(name);
    for (std::size_t i = 0; i < values.size(); ++i) {
      const double d = std::fabs(static_cast<double>(values[i]) - static_cast<double>(other[i]));
      if (std::isnan(d) && !(std::isnan(values[i]) && std::isnan(other[i]))) return INFINITY;  // one NaN
      if (d > worst) worst = d;
    }
  }
  return worst;
}

TEST(MicroBatches, GiveTheFullBatchsUpdateOnTheF64Oracle) {
  const Classifier model;
  for (const int k : {2, 3, 8}) {
    Training full = compile_classifier(model, Backend::interp_f64, 1);
    Training micro = compile_classifier(model, Backend::interp_f64, k);
    for (int step = 0; step < 4; ++step) {
      const StepResult a = full.step(classifier_batch(step));
      const StepResult b = micro.step(classifier_batch(step));
      ASSERT_TRUE(a.ok()) << a.failure().message;
      ASSERT_TRUE(b.ok()) << b.failure().message;
      // A mean loss over the batch is the mean of the micro-batches' means: equal to rounding.
      EXPECT_NEAR(a.loss(), b.loss(), 1e-14) << k << " micro-batches, step " << step;
    }
    const TensorMap ga = full.download_param_grad_tensors(), gb = micro.download_param_grad_tensors();
    for (const auto& [name, grad] : ga) {
      for (std::size_t i = 0; i < grad.size(); ++i)
        EXPECT_NEAR(grad.at(i), gb.at(name).at(i), 1e-14) << name << "[" << i << "], " << k << " micro-batches";
    }
    // Adam divides by sqrt(v): rounding differences of 1e-16 stay far below 1e-12 after 4 steps.
    EXPECT_LT(largest_difference(full.download_params(), micro.download_params()), 1e-6)
        << k << " micro-batches (compared as floats)";
    const TensorMap pa = full.download_param_tensors(), pb = micro.download_param_tensors();
    for (const auto& [name, p] : pa) {
      for (std::size_t i = 0; i < p.size(); ++i)
        EXPECT_NEAR(p.at(i), pb.at(name).at(i), 1e-12) << name << "[" << i << "], " << k << " micro-batches";
    }
  }
}

TEST(MicroBatches, F32FollowsTheFullBatchAndRepeatsBitForBit) {
  const Classifier model;
  Training full = compile_classifier(model, Backend::interp_f32, 1);
  Training first = compile_classifier(model, Backend::interp_f32, 4);
  Training again = compile_classifier(model, Backend::interp_f32, 4);
  for (int step = 0; step < 5; ++step) {
    const TensorMap data = classifier_batch(step);
    const StepResult a = full.step(data), b = first.step(data), c = again.step(data);
    ASSERT_TRUE(a.ok() && b.ok() && c.ok());
    EXPECT_NEAR(a.loss(), b.loss(), 1e-5) << "step " << step;
    EXPECT_EQ(b.loss(), c.loss()) << "step " << step;
  }
  EXPECT_LT(largest_difference(full.download_params(), first.download_params()), 1e-4);
  EXPECT_EQ(largest_difference(first.download_params(), again.download_params()), 0.0);
  EXPECT_EQ(largest_difference(first.download_param_grads(), again.download_param_grads()), 0.0);
}

TEST(MicroBatches, SumInMicroBatchOrderThenDivide) {
  // SGD with lr 1 turns the update into the gradient: p1 = p0 - g. The gradient must be
  // ((g1 + g2) + g3) / 3 of the micro-batch gradients, computed in f64 by three 1-micro-batch runs.
  const Classifier model;
  const OptimizerConfig sgd{.kind = SgdConfig{}};
  Training micro = compile(TrainingSpec<Classifier>{.model = model,
                                                    .loss = classifier_loss,
                                                    .inputs = classifier_inputs(),
                                                    .optimizer = sgd,
                                                    .lr = 1.0,
                                                    .backend = Backend::interp_f64,
                                                    .seed = 5,
                                                    .micro_batches = 3});
  InputSpecs third = classifier_inputs();
  for (auto& [name, spec] : third) spec.shape[0] = kBatch / 3;
  Training single = compile(TrainingSpec<Classifier>{.model = model,
                                                     .loss = classifier_loss,
                                                     .inputs = third,
                                                     .optimizer = sgd,
                                                     .lr = 1.0,
                                                     .backend = Backend::interp_f64,
                                                     .seed = 5});
  const TensorMap data = classifier_batch(0);
  std::vector<TensorMap> grads;
  std::vector<double> losses;
  for (std::int64_t i = 0; i < 3; ++i) {
    TensorMap part;
    for (const auto& [name, t] : data) {
      const std::int64_t row = t.size() / kBatch, rows = kBatch / 3;
      const std::vector<double> all = t.to_f64();
      std::vector<double> values(all.begin() + i * rows * row, all.begin() + (i + 1) * rows * row);
      Shape shape = t.type.shape;
      shape[0] = rows;
      part.emplace(name, HostTensor::of({t.type.dtype, shape}, values));
    }
    single.reset({.params = true, .optimizer = true});
    const StepResult r = single.step(part);
    ASSERT_TRUE(r.ok()) << r.failure().message;
    losses.push_back(r.loss());
    grads.push_back(single.download_param_grad_tensors());
  }
  const StepResult r = micro.step(data);
  ASSERT_TRUE(r.ok()) << r.failure().message;
  EXPECT_EQ(r.loss(), ((losses[0] + losses[1]) + losses[2]) / 3.0);
  const TensorMap got = micro.download_param_grad_tensors();
  for (const auto& [name, g] : got) {
    for (std::size_t e = 0; e < g.size(); ++e) {
      const double want = ((grads[0].at(name).at(e) + grads[1].at(name).at(e)) + grads[2].at(name).at(e)) / 3.0;
      ASSERT_EQ(g.at(e), want) << name << "[" << e << "]";
    }
  }
}

TEST(MicroBatches, CapturesAreTheFirstMicroBatchs) {
  const Classifier model;
  Training micro = compile_classifier(model, Backend::interp_f32, 4);
  const StepResult r = micro.step(classifier_batch(0));
  ASSERT_TRUE(r.ok()) << r.failure().message;
  EXPECT_EQ(r.captures().shape("hidden"), (Shape{kBatch / 4, kHidden}));
}

Tensor dropout_loss(const Classifier& m, const Inputs& in) {
  return cross_entropy(m.l2(dropout(tanh(m.l1(in.at("x"))), 0.5)), in.at("label"));
}

TEST(MicroBatches, RandomOpsDrawAnotherStreamPerMicroBatch) {
  const Classifier model;
  const auto make = [&](const InputSpecs& inputs, int k) {
    return compile(TrainingSpec<Classifier>{
        .model = model, .loss = dropout_loss, .inputs = inputs, .seed = 9, .micro_batches = k});
  };
  // A batch whose two halves are the same rows.
  TensorMap data = classifier_batch(0);
  std::vector<double> x = data.at("x").to_f64(), label = data.at("label").to_f64();
  std::copy(x.begin(), x.begin() + kBatch / 2 * kIn, x.begin() + kBatch / 2 * kIn);
  std::copy(label.begin(), label.begin() + kBatch / 2, label.begin() + kBatch / 2);
  TensorMap half = {{"x", HostTensor::of({DType::f32, {kBatch / 2, kIn}}, {x.begin(), x.begin() + kBatch / 2 * kIn})},
                    {"label", HostTensor::of({DType::i32, {kBatch / 2}}, {label.begin(), label.begin() + kBatch / 2})}};
  data.insert_or_assign("x", HostTensor::of({DType::f32, {kBatch, kIn}}, x));
  data.insert_or_assign("label", HostTensor::of({DType::i32, {kBatch}}, label));

  Training a = make(classifier_inputs(), 2), b = make(classifier_inputs(), 2);
  ASSERT_TRUE(a.graph().find_input(kStepSeedInput));
  ASSERT_TRUE(a.graph().find_input(std::string(kStepSeedInput) + ".1"));
  const StepResult ra = a.step(data), rb = b.step(data);
  ASSERT_TRUE(ra.ok() && rb.ok());
  EXPECT_EQ(ra.loss(), rb.loss()) << "the same seed draws the same masks";
  // Micro-batch 1 draws what one batch of the half draws; had micro-batch 2 drawn the same masks
  // on the same rows, the mean of the two would be that loss again.
  InputSpecs half_inputs = classifier_inputs();
  for (auto& [name, spec] : half_inputs) spec.shape[0] = kBatch / 2;
  Training single = make(half_inputs, 1);
  const StepResult rs = single.step(half);
  ASSERT_TRUE(rs.ok());
  EXPECT_NE(ra.loss(), rs.loss()) << "micro-batch 2 drew micro-batch 1's masks";
}

TEST(MicroBatches, LossScalingSkipsTheUpdateWhenOneMicroBatchOverflows) {
  const Classifier model;
  Training micro = compile(TrainingSpec<Classifier>{.model = model,
                                                    .loss = classifier_loss,
                                                    .inputs = classifier_inputs(),
                                                    .seed = 5,
                                                    .precision = {.compute = DType::f16},
                                                    .micro_batches = 3});
  ASSERT_TRUE(micro.step(classifier_batch(0)).ok());
  EXPECT_FALSE(micro.last_step_skipped());
  const ParamValues before = micro.download_params();
  const double scale = micro.loss_scale();
  // The last row (micro-batch 3) holds one value past f16's range, the rest 0: cast to f16 it is
  // Inf, its products +-Inf, tanh saturates to +-1 and the loss stays finite, while the weight
  // gradient multiplies Inf by tanh's zero slope: NaN.
  TensorMap data = classifier_batch(1);
  std::vector<double> x = data.at("x").to_f64();
  for (std::size_t i = x.size() - kIn; i < x.size(); ++i) x[i] = 0;
  x[x.size() - kIn] = 70000;
  data.insert_or_assign("x", HostTensor::of({DType::f32, {kBatch, kIn}}, x));
  const StepResult r = micro.step(data);
  ASSERT_TRUE(r.ok()) << r.failure().message;
  EXPECT_TRUE(micro.last_step_skipped()) << "an Inf gradient in micro-batch 3 must skip the update";
  EXPECT_EQ(largest_difference(before, micro.download_params()), 0.0);
  EXPECT_LT(micro.loss_scale(), scale);
  EXPECT_EQ(micro.steps(), 1);
}

TEST(MicroBatches, RefusesWhatItCannotSplit) {
  const Classifier model;
  const auto expect_compile_error = [&](int k, const InputSpecs& inputs, const std::string& fragment) {
    try {
      (void)compile(
          TrainingSpec<Classifier>{.model = model, .loss = classifier_loss, .inputs = inputs, .micro_batches = k});
      ADD_FAILURE() << "micro_batches = " << k << " was accepted";
    } catch (const CompileError& e) {
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    }
  };
  expect_compile_error(0, classifier_inputs(), "micro_batches is 0; it must be >= 1");
  expect_compile_error(-2, classifier_inputs(), "micro_batches is -2");
  expect_compile_error(5, classifier_inputs(), "input 'label' has shape [24], whose dim 0 (24) is not a multiple of 5");
  InputSpecs with_scalar = classifier_inputs();
  with_scalar.emplace("temperature", InputSpec{{}});
  expect_compile_error(2, with_scalar, "input 'temperature' is 0-d");

  // Patches replace one batch's activations: the step fails as a compile failure and changes nothing.
  Training micro = compile(TrainingSpec<Classifier>{.model = model,
                                                    .loss =
                                                        [](const Classifier& m, const Inputs& in) {
                                                          const Tensor h = patch("hidden", tanh(m.l1(in.at("x"))));
                                                          return cross_entropy(m.l2(h), in.at("label"));
                                                        },
                                                    .inputs = classifier_inputs(),
                                                    .micro_batches = 2});
  const ParamValues before = micro.download_params();
  const StepResult r = micro.step(classifier_batch(0), Patches().zero("hidden"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.failure().kind, "compile");
  EXPECT_NE(r.failure().message.find("cannot run patch sites"), std::string::npos) << r.failure().message;
  EXPECT_EQ(largest_difference(before, micro.download_params()), 0.0);
  EXPECT_EQ(micro.steps(), 0);
  EXPECT_TRUE(micro.step(classifier_batch(0)).ok()) << "without patches it steps";
}

}  // namespace
}  // namespace tg
