// Pipelines shared through the Context (Context::pipeline): a second Program of a graph compiles
// nothing, a launch with other specialization constants compiles its own pipeline, results do not
// depend on whether a pipeline was reused, the held set stays within max_cached_pipelines without
// dropping one in use, and the Context may go before or after its Programs (the validation layer
// reports any pipeline left alive when the device is destroyed).
#include <gtest/gtest.h>

#include <atomic>
#include <bit>
#include <cmath>
#include <thread>
#include <vector>

#include "support/library.h"
#include "tensorgrad/vk/executor.h"
#include "vk/compute.h"
#include "vk_oracle_check.h"
#include "vk_test_support.h"

namespace tg::vk {
namespace {

// The matmul shaders' push-constant block (MatmulPush in src/vk/kernels/matmul.cpp, which asserts
// its size): a pipeline layout must cover it, or validation refuses the pipeline.
constexpr std::uint32_t kMatmulPushBytes = 88;

using testing::random_f32;
using testing::VkTest;

// A matmul, a row reduction and a fused elementwise run: several shaders, one of them specialized.
Graph mixed_graph(bool multiply) {
  GraphBuilder b("mixed");
  TracingScope scope(b);
  Tensor x = b.input("x", {DType::f32, {8, 16}});
  Tensor w = b.input("w", {DType::f32, {16, 4}});
  Tensor y = matmul(x, w);
  Tensor z = multiply ? exp(y) * y : exp(y) + y;  // one fused launch; the op codes differ
  b.output("z", tanh(z));
  b.output("s", sum(y, {1}));
  return b.take();
}

const TensorMap& mixed_inputs() {
  static const TensorMap in{{"x", random_f32({8, 16}, 1)}, {"w", random_f32({16, 4}, 2)}};
  return in;
}

void expect_same_bits(const TensorMap& a, const TensorMap& b) {
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [name, x] : a) {
    const HostTensor& y = b.at(name);
    ASSERT_EQ(x.type, y.type) << name;
    for (std::size_t i = 0; i < x.size(); ++i) {
      EXPECT_EQ(std::bit_cast<std::uint32_t>(static_cast<float>(x.at(i))),
                std::bit_cast<std::uint32_t>(static_cast<float>(y.at(i))))
          << name << "[" << i << "]";
    }
  }
}

TEST_F(VkTest, SecondProgramOfTheSameGraphCompilesNoPipeline) {
  auto ctx = make_context();
  const Graph g = mixed_graph(false);
  Program first(ctx, g);
  EXPECT_GT(first.stats().pipelines_created, 0u);
  EXPECT_EQ(first.stats().pipelines_reused, 0u);
  const PipelineStats after_first = ctx->pipeline_stats();
  EXPECT_EQ(after_first.created, first.stats().pipelines_created);
  EXPECT_EQ(after_first.held, after_first.created);

  // Guards change the plan (offsets, no memory reuse), not the launches: the same pipelines.
  Program second(ctx, g, {.guard_bytes = 64});
  EXPECT_EQ(second.stats().pipelines_created, 0u);
  EXPECT_EQ(second.stats().pipelines_reused, first.stats().pipelines_created);
  EXPECT_EQ(ctx->pipeline_stats().created, after_first.created);
  EXPECT_EQ(ctx->pipeline_stats().reused, first.stats().pipelines_created);

  const TensorMap a = first.run(mixed_inputs());
  const TensorMap b = second.run(mixed_inputs());
  expect_same_bits(a, b);
  EXPECT_TRUE(second.check_guards().empty());
  // Reused after the first Program is gone too: the Context holds them, not the Programs.
  {
    Program third(ctx, g);
    EXPECT_EQ(third.stats().pipelines_created, 0u);
  }
  Program fourth(ctx, g);
  EXPECT_EQ(fourth.stats().pipelines_created, 0u);
  expect_same_bits(a, fourth.run(mixed_inputs()));
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

TEST_F(VkTest, OtherSpecializationConstantsCompileTheirOwnPipeline) {
  auto ctx = make_context();
  Program add_program(ctx, mixed_graph(false));
  // The graph differs only in the fused run's op codes, which travel in specialization constants:
  // exactly that pipeline is new.
  Program mul_program(ctx, mixed_graph(true));
  EXPECT_EQ(mul_program.stats().pipelines_created, 1u);
  EXPECT_EQ(mul_program.stats().pipelines_reused, add_program.stats().pipelines_created - 1);
  const TensorMap in = mixed_inputs();
  const TensorMap add_result = add_program.run(in);
  const TensorMap mul_result = mul_program.run(in);
  EXPECT_NE(add_result.at("z").to_f64(), mul_result.at("z").to_f64());
  expect_same_bits({{"s", add_result.at("s")}}, {{"s", mul_result.at("s")}});
  // Against the interpreter: neither program ran the other's pipeline.
  for (const bool multiply : {false, true}) {
    const Graph g = mixed_graph(multiply);
    const TensorMap want = interpret(g, in, {.compute = ComputeType::f32}).outputs;
    const TensorMap& got = multiply ? mul_result : add_result;
    for (std::size_t i = 0; i < want.at("z").size(); ++i)
      EXPECT_NEAR(got.at("z").at(i), want.at("z").at(i), 1e-5 * (1 + std::fabs(want.at("z").at(i))));
  }

  // The key directly: shader, binding count, push-constant bytes and each constant all count.
  const std::uint32_t spec_a[] = {1, 0, 0}, spec_b[] = {0, 1, 0};
  bool created = false;
  const auto p1 = ctx->pipeline("matmul_small", 3, kMatmulPushBytes, spec_a, &created);
  const bool first_created = created;
  const auto p2 = ctx->pipeline("matmul_small", 3, kMatmulPushBytes, spec_a, &created);
  EXPECT_FALSE(created);
  EXPECT_EQ(p1, p2);
  const auto p3 = ctx->pipeline("matmul_small", 3, kMatmulPushBytes, spec_b, &created);
  EXPECT_TRUE(created);
  EXPECT_NE(p1, p3);
  (void)first_created;  // the programs above may have made it already
  const auto p4 = ctx->pipeline("add", 3, 4, {}, &created);
  const auto p5 = ctx->pipeline("add", 3, 8, {}, &created);
  EXPECT_TRUE(created);
  EXPECT_NE(p4, p5);
  EXPECT_EQ(p5->push_constant_bytes(), 8u);
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

TEST_F(VkTest, ContextDestroyedAfterItsPrograms) {
  auto ctx = make_context();
  {
    Program a(ctx, mixed_graph(false));
    Program b(ctx, mixed_graph(false));
    expect_same_bits(a.run(mixed_inputs()), b.run(mixed_inputs()));
  }
  EXPECT_GT(ctx->pipeline_stats().held, 0u);  // kept for later programs
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
  ctx.reset();  // destroys the held pipelines, then the device; the fixture checks the messages
}

TEST_F(VkTest, ContextReleasedBeforeItsPrograms) {
  auto ctx = make_context();
  const std::weak_ptr<Context> weak = ctx;
  std::shared_ptr<const ComputePipeline> outliving = ctx->pipeline("add", 3, 4);
  auto a = std::make_unique<Program>(ctx, mixed_graph(false));
  auto b = std::make_unique<Program>(ctx, mixed_graph(true));
  ctx.reset();  // the programs keep the context alive
  ASSERT_FALSE(weak.expired());
  const TensorMap first = a->run(mixed_inputs());
  a.reset();
  Program c(weak.lock(), mixed_graph(false));  // the pipelines a used are still there
  EXPECT_EQ(c.stats().pipelines_created, 0u);
  expect_same_bits(first, c.run(mixed_inputs()));
  b->run(mixed_inputs());
  b.reset();
  EXPECT_FALSE(weak.expired());
  { Program last = std::move(c); }
  // The last program took the context, its pipelines and its device with it; a pipeline still
  // held elsewhere was emptied first, so dropping it touches no device.
  EXPECT_TRUE(weak.expired());
  EXPECT_EQ(outliving->handle(), VK_NULL_HANDLE);
  outliving.reset();
}

TEST_F(VkTest, HeldPipelinesStayWithinTheBoundAndKeepThoseInUse) {
  ContextOptions options;
  options.max_cached_pipelines = 2;
  auto ctx = make_context(options);
  const std::uint32_t transposed[] = {1, 0, 0};
  {
    const auto in_use = ctx->pipeline("add", 3, 4);  // held by this scope throughout
    (void)ctx->pipeline("add", 3, 8);
    (void)ctx->pipeline("add", 3, 12);  // the bound: add#3#8 goes (add#3#4 is in use)
    PipelineStats stats = ctx->pipeline_stats();
    EXPECT_EQ(stats.created, 3u);
    EXPECT_EQ(stats.evicted, 1u);
    EXPECT_EQ(stats.held, 2u);
    bool created = false;
    EXPECT_EQ(ctx->pipeline("add", 3, 4, {}, &created), in_use);
    EXPECT_FALSE(created);
    (void)ctx->pipeline("add", 3, 8, {}, &created);  // evicted before: compiled again
    EXPECT_TRUE(created);
    (void)ctx->pipeline("matmul_small", 3, kMatmulPushBytes, transposed);
    stats = ctx->pipeline_stats();
    EXPECT_EQ(stats.held, 2u);
    EXPECT_NE(in_use->handle(), VK_NULL_HANDLE);
  }
  // A Program over the bound still gets every pipeline it needs: those it holds are in use.
  Program program(ctx, mixed_graph(false));
  EXPECT_GE(ctx->pipeline_stats().held, program.stats().pipelines_created + program.stats().pipelines_reused);
  const TensorMap want = interpret(mixed_graph(false), mixed_inputs(), {.compute = ComputeType::f32}).outputs;
  const TensorMap got = program.run(mixed_inputs());
  for (std::size_t i = 0; i < want.at("s").size(); ++i)
    EXPECT_NEAR(got.at("s").at(i), want.at("s").at(i), 1e-4 * (1 + std::fabs(want.at("s").at(i))));
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

TEST_F(VkTest, ConcurrentRequestsForOneKeyCompileItOnce) {
  auto ctx = make_context();
  std::vector<std::shared_ptr<const ComputePipeline>> got(4);
  std::atomic<int> created{0};
  std::vector<std::thread> threads;
  for (std::size_t t = 0; t < got.size(); ++t) {
    threads.emplace_back([&, t] {
      bool made = false;
      got[t] = ctx->pipeline("add", 3, 4, {}, &made);
      if (made) ++created;
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(created.load(), 1);
  for (const auto& p : got) EXPECT_EQ(p, got.front());
  EXPECT_EQ(ctx->pipeline_stats().created, 1u);
  EXPECT_EQ(ctx->pipeline_stats().reused, 3u);
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

}  // namespace
}  // namespace tg::vk
