// tg::Session on Vulkan: the scenarios of tests/unit/session_test.cpp (params held on the device,
// writebacks, failed results instead of exceptions), and the same runs on the f32 interpreter and
// Vulkan agreeing step by step.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "support/library.h"
#include "tensorgrad/ir/ops/ids/indexing.h"
#include "vk_test_support.h"

namespace tg::vk {
namespace {

using testing::VkTest;

Graph sgd_graph() {
  GraphBuilder b("sgd");
  TracingScope scope(b);
  Tensor x = b.input("x", {DType::f32, {64}});
  Tensor y = b.input("y", {DType::f32, {64}});
  Tensor w = b.param("w", {DType::f32, {64}});
  Tensor steps = b.input("steps", {DType::f32, {}}, InputKind::state);
  Tensor r = x * w - y;
  b.output("loss", mean(r * r));
  b.output("w.new", w - 0.1f * (2.f * r * x));
  b.output("steps.new", steps + 1.f);
  return b.take();
}

TEST_F(VkTest, SessionTrainsLikeTheInterpreterStepByStep) {
  auto ctx = make_context();
  const Graph g = sgd_graph();
  const std::vector<Writeback> writebacks = {{"w.new", "w"}, {"steps.new", "steps"}};
  Session gpu(g, {.backend = Backend::vulkan, .vk_context = ctx, .writebacks = writebacks});
  Session cpu(g, {.backend = Backend::interp_f32, .writebacks = writebacks});
  EXPECT_EQ(gpu.backend(), Backend::vulkan);
  std::vector<float> x(64), y(64), w0(64, 0.f);
  for (int i = 0; i < 64; ++i) {
    x[i] = std::sin(0.3f * static_cast<float>(i));
    y[i] = 0.5f * x[i] + 0.25f;
  }
  for (Session* s : {&gpu, &cpu}) {
    s->set_param("w", HostTensor::f32({64}, w0));
    s->set_param("steps", HostTensor::f32({}, {0.f}));
  }
  const TensorMap data{{"x", HostTensor::f32({64}, x)}, {"y", HostTensor::f32({64}, y)}};
  for (int step = 0; step < 10; ++step) {
    const RunResult a = gpu.run(data), b = cpu.run(data);
    ASSERT_TRUE(a.ok()) << a.failure().message;
    ASSERT_TRUE(b.ok()) << b.failure().message;
    // Elementwise ops are correctly rounded on both; mean's summation order differs.
    EXPECT_NEAR(a.output("loss").at(0), b.output("loss").at(0), 1e-6 * (1 + b.output("loss").at(0))) << "step " << step;
  }
  EXPECT_EQ(gpu.param("steps").at(0), 10.0);
  EXPECT_EQ(gpu.param("w").to_f64(), cpu.param("w").to_f64()) << "the update is elementwise: the same bits";
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

TEST_F(VkTest, SessionReportsBadInputsAndFailingOpsAsFailedResults) {
  auto ctx = make_context();
  Session s(sgd_graph(), {.backend = Backend::vulkan, .vk_context = ctx, .writebacks = {{"w.new", "w"}}});
  const TensorMap data{{"x", HostTensor::filled({DType::f32, {64}}, 1.0)},
                       {"y", HostTensor::filled({DType::f32, {64}}, 2.0)}};
  RunResult r = s.run(data);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.failure().kind, "input");
  EXPECT_NE(r.failure().message.find("missing param 'w'"), std::string::npos) << r.failure().message;
  s.set_param("w", HostTensor::filled({DType::f32, {64}}, 0.0));
  s.set_param("steps", HostTensor::f32({}, {0.f}));
  r = s.run({{"x", HostTensor::filled({DType::f32, {63}}, 1.0)}, {"y", data.at("y")}});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.failure().message.find("'x'"), std::string::npos) << r.failure().message;
  EXPECT_EQ(s.param("w").to_f64(), std::vector<double>(64, 0.0)) << "a failed run changed a param";
  EXPECT_TRUE(s.run(data).ok());

  if (!has_kernel(op::Embedding)) GTEST_SKIP() << "embedding has no Vulkan kernel yet";
  GraphBuilder b("embed");
  TracingScope scope(b);
  Tensor table = b.param("table", {DType::f32, {3, 2}});
  Tensor ids = b.input("ids", {DType::i32, {2}});
  b.output("y", embedding(table, ids));
  Session e(b.take(), {.backend = Backend::vulkan, .vk_context = ctx});
  e.set_param("table", HostTensor::f32({3, 2}, {1, 2, 3, 4, 5, 6}));
  r = e.run({{"ids", HostTensor::i32({2}, {0, 2})}});
  ASSERT_TRUE(r.ok()) << r.failure().message;
  EXPECT_EQ(r.output("y").to_f32(), (std::vector<float>{1, 2, 5, 6}));
  r = e.run({{"ids", HostTensor::i32({2}, {0, 7})}});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.failure().kind, "runtime");
  EXPECT_NE(r.failure().message.find("embedding: index 7 is out of range [0, 3) at element 1"), std::string::npos)
      << r.failure().message;
  EXPECT_TRUE(e.run({{"ids", HostTensor::i32({2}, {1, 1})}}).ok()) << "the check resets between runs";
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

TEST_F(VkTest, SessionDiscardsTheUpdatesOfANonFiniteLossOnTheDevice) {
  auto ctx = make_context();
  Session s(sgd_graph(), {.backend = Backend::vulkan,
                          .vk_context = ctx,
                          .writebacks = {{"w.new", "w"}, {"steps.new", "steps"}},
                          .commit_if_finite = "loss"});
  s.set_param("w", HostTensor::filled({DType::f32, {64}}, 1.0));
  s.set_param("steps", HostTensor::f32({}, {0.f}));
  HostTensor x = HostTensor::filled({DType::f32, {64}}, 1.0);
  x.set(7, std::numeric_limits<double>::infinity());
  const HostTensor y = HostTensor::filled({DType::f32, {64}}, 2.0);
  RunResult r = s.run({{"x", x}, {"y", y}});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.failure().kind, "nonfinite");
  EXPECT_EQ(s.param("w").to_f64(), std::vector<double>(64, 1.0)) << "the device kept the discarded update";
  EXPECT_EQ(s.param("steps").at(0), 0.0);
  x.set(7, 1.0);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(s.run({{"x", x}, {"y", y}}).ok());
  EXPECT_EQ(s.param("steps").at(0), 3.0);
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

// Lavapipe cannot lose its device: the path a real VK_ERROR_DEVICE_LOST takes (Context::check marks
// the context unusable) is driven by hand, then the session's next run must fail, not throw.
TEST_F(VkTest, SessionOnALostDeviceFailsItsRunsAndTheContextSaysUnusable) {
  auto ctx = make_context();
  Session s(sgd_graph(), {.backend = Backend::vulkan, .vk_context = ctx, .writebacks = {{"w.new", "w"}}});
  s.set_param("w", HostTensor::filled({DType::f32, {64}}, 0.0));
  s.set_param("steps", HostTensor::f32({}, {0.f}));
  const TensorMap data{{"x", HostTensor::filled({DType::f32, {64}}, 1.0)},
                       {"y", HostTensor::filled({DType::f32, {64}}, 2.0)}};
  ASSERT_TRUE(s.run(data).ok());
  EXPECT_THROW(ctx->check(VK_ERROR_DEVICE_LOST, "a simulated submission"), DeviceError);
  EXPECT_FALSE(ctx->usable());
  const RunResult r = s.run(data);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.failure().kind, "device");
  EXPECT_NE(r.failure().message.find("VK_ERROR_DEVICE_LOST"), std::string::npos) << r.failure().message;
  EXPECT_FALSE(s.run(data).ok()) << "the session stays failed";
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

}  // namespace
}  // namespace tg::vk
