// A Training on Vulkan and its Forward called from several threads at once (docs/training.md,
// "Threads"): the training and its forwards share one vk::Context, which is not thread-safe, and
// their shared mutex serialises every call, so concurrent steps and forwards leave the params of the
// same number of serial steps, bit for bit, with no validation message.
// tests/unit/concurrency_test.cpp checks the same on the interpreters (and runs under TSan).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "support/library.h"
#include "tensorgrad/train/training.h"
#include "vk_test_support.h"

namespace tg::vk {
namespace {

using testing::VkTest;

constexpr int kN = 8;
constexpr int kThreads = 4;
constexpr int kStepsPerThread = 5;

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

Training compile_on(const LinReg& model, std::shared_ptr<Context> ctx) {
  return compile(TrainingSpec<LinReg>{.model = model,
                                      .loss = mse,
                                      .inputs = {{"x", {{kN, 2}}}, {"y", {{kN, 1}}}},
                                      .optimizer = {.kind = AdamConfig{}},
                                      .lr = 0.05,
                                      .backend = Backend::vulkan,
                                      .seed = 11,
                                      .vk_context = std::move(ctx)});
}

TensorMap probe() { return {{"x", HostTensor::f32({3, 2}, {0.5f, -1, 2, 0.25f, -0.75f, 1.5f})}}; }

TEST_F(VkTest, TrainingStepsAndForwardsFromManyThreadsEqualTheSerialCalls) {
  constexpr int kSteppers = kThreads / 2;
  constexpr int kSteps = kSteppers * kStepsPerThread;
  auto ctx = make_context();
  const LinReg model;
  Training serial = compile_on(model, ctx);
  Forward serial_forward = serial.attach(ForwardSpec<LinReg>{.forward = predict, .inputs = {{"x", {{3, 2}}}}});
  std::multiset<double> serial_losses;
  std::vector<std::vector<double>> serial_outputs{serial_forward.run(probe()).output().to_f64()};
  for (int i = 0; i < kSteps; ++i) {
    const StepResult r = serial.step(batch());
    ASSERT_TRUE(r.ok()) << r.failure().message;
    serial_losses.insert(r.loss());
    serial_outputs.push_back(serial_forward.run(probe()).output().to_f64());
  }

  // Its own context: the serial training's is not used from the threads.
  auto shared_ctx = make_context();
  Training train = compile_on(model, shared_ctx);
  Forward forward = train.attach(ForwardSpec<LinReg>{.forward = predict, .inputs = {{"x", {{3, 2}}}}});
  std::mutex seen_mutex;
  std::multiset<double> losses;
  std::vector<std::vector<double>> outputs;
  std::vector<std::string> failures;
  std::atomic<int> ready{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      ++ready;
      while (ready.load() < kThreads) std::this_thread::yield();
      for (int i = 0; i < kStepsPerThread; ++i) {
        if (t < kSteppers) {
          const StepResult r = train.step(batch());
          const std::lock_guard lock(seen_mutex);
          if (r.ok()) losses.insert(r.loss());
          if (!r.ok()) failures.push_back(r.failure().kind + ": " + r.failure().message);
        } else {
          const ForwardResult r = forward.run(probe());
          const std::lock_guard lock(seen_mutex);
          if (r.ok()) outputs.push_back(r.output().to_f64());
          if (!r.ok()) failures.push_back(r.failure().kind + ": " + r.failure().message);
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (const std::string& failure : failures) ADD_FAILURE() << failure;
  EXPECT_EQ(train.steps(), kSteps);
  EXPECT_EQ(losses, serial_losses) << "each step's loss is one of the serial steps' losses, each once";
  EXPECT_EQ(train.download_param_tensors(), serial.download_param_tensors());
  for (const std::vector<double>& out : outputs) {
    EXPECT_NE(std::find(serial_outputs.begin(), serial_outputs.end(), out), serial_outputs.end())
        << "a forward ran on params that no number of serial steps produces";
  }
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
  EXPECT_NO_VALIDATION_MESSAGES(shared_ctx);
}

}  // namespace
}  // namespace tg::vk
