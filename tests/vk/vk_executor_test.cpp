// The record-once executor (tg::vk::Program) on hand-built graphs of the elementwise family:
// broadcasting, buffer reuse in chains, where on bool, comparisons, fills, guard regions, replay
// determinism and input errors. Under the validation layer (synchronization
// validation included), so a missing barrier fails the test.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "support/library.h"
#include "tensorgrad/vk/executor.h"
#include "vk_oracle_check.h"
#include "vk_test_support.h"

namespace tg::vk {
namespace {

using testing::VkTest;

using testing::random_f32;

// Vulkan against the interpreter in f32 mode: +, -, * are correctly rounded on both; division is
// allowed 2.5 ulp by the Vulkan spec (NVIDIA's H200 differs from IEEE division by 1 ulp), and
// transcendental functions are compared with a small relative bound.
void expect_close(const TensorMap& got, const TensorMap& want, double rel = 0) {
  ASSERT_EQ(got.size(), want.size());
  for (const auto& [name, w] : want) {
    const HostTensor& g = got.at(name);
    ASSERT_EQ(g.type, w.type) << name;
    for (std::size_t i = 0; i < w.size(); ++i) {
      const double tol = rel * std::max(1.0, std::fabs(w.at(i)));
      EXPECT_NEAR(g.at(i), w.at(i), tol) << name << "[" << i << "]";
    }
  }
}

TEST_F(VkTest, ExecutorBroadcastAdd) {
  auto ctx = make_context();
  GraphBuilder b("bcast");
  TracingScope scope(b);
  Tensor x = b.input("x", {DType::f32, {4, 1, 3}});
  Tensor y = b.input("y", {DType::f32, {5, 1}});
  Tensor s = b.input("s", {DType::f32, {}});
  b.output("z", add(x, y));          // [4,5,3]
  b.output("w", mul(sub(x, s), y));  // scalar operand
  b.output("q", div(maximum(x, y), 3.f));
  const Graph g = b.take();
  Program program(ctx, g);
  const TensorMap in{{"x", random_f32({4, 1, 3}, 1)}, {"y", random_f32({5, 1}, 2)}, {"s", random_f32({}, 3)}};
  TensorMap got = program.run(in);
  TensorMap want = interpret(g, in, {.compute = ComputeType::f32}).outputs;
  constexpr double kDivisionUlps = 2.5;  // Vulkan's precision requirement for x / y
  expect_close({{"q", got.at("q")}}, {{"q", want.at("q")}}, kDivisionUlps * std::numeric_limits<float>::epsilon());
  got.erase("q");
  want.erase("q");
  expect_close(got, want);
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

TEST_F(VkTest, ExecutorChainReusesBuffersAndKeepsGuardsIntact) {
  auto ctx = make_context();
  GraphBuilder b("chain");
  TracingScope scope(b);
  Tensor x = b.input("x", {DType::f32, {37, 29}});
  Tensor h = x;
  for (int i = 0; i < 12; ++i) h = (i % 3 == 0) ? tanh(h) : (i % 3 == 1 ? add(h, x) : mul(h, 0.5f));
  b.output("y", h);
  b.output("r", relu(sigmoid(h)));
  const Graph g = b.take();
  const TensorMap in{{"x", random_f32({37, 29}, 4)}};
  const TensorMap want = interpret(g, in, {.compute = ComputeType::f32}).outputs;
  // Unfused: one dispatch per node, so the chain's values and barriers exist (fusion would make
  // the whole chain one dispatch; tests/vk/vk_fusion_test.cpp covers that).
  Program program(ctx, g, {.fuse_elementwise = false});
  EXPECT_LT(program.stats().device_bytes, program.stats().unshared_bytes / 2) << "dead values should share memory";
  EXPECT_GT(program.stats().barriers, 0u);
  EXPECT_LE(program.stats().barriers, program.stats().dispatches);
  expect_close(program.run(in), want, 1e-5);
  // Guards (which turn reuse off) stay intact under correct kernels.
  Program guarded(ctx, g, {.guard_bytes = 256, .fuse_elementwise = false});
  EXPECT_GT(guarded.stats().device_bytes, program.stats().unshared_bytes - 64);  // no reuse
  expect_close(guarded.run(in), want, 1e-5);
  EXPECT_TRUE(guarded.check_guards().empty()) << testing::join_lines(guarded.check_guards());
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

TEST_F(VkTest, ExecutorWhereComparisonsAndFills) {
  auto ctx = make_context();
  GraphBuilder b("select");
  TracingScope scope(b);
  Tensor x = b.input("x", {DType::f32, {3, 4}});
  Tensor y = b.input("y", {DType::f32, {4}});
  Tensor c = b.input("c", {DType::boolean, {3, 1}});
  Tensor i = b.input("i", {DType::i32, {3, 4}});
  b.output("lt", less(x, y));
  b.output("gt", greater(x, 0.f));
  b.output("eq", equal(x, x));
  b.output("sel", where(c, x, y));
  b.output("seli", where(less(x, y), i, full({3, 4}, -7, DType::i32)));
  b.output("ones", add(ones({2, 2}), zeros({2})));
  b.output("clamped", clamp(x, -0.5, 0.25));
  b.output("sg", stop_gradient(i));
  const Graph g = b.take();
  Program program(ctx, g);
  const TensorMap in{{"x", random_f32({3, 4}, 5)},
                     {"y", random_f32({4}, 6)},
                     {"c", HostTensor::of({DType::boolean, {3, 1}}, {1, 0, 1})},
                     {"i", HostTensor::i32({3, 4}, {1, -2, 3, -4, 5, 1 << 30, 7, 8, -9, 10, 11, 12})}};
  expect_close(program.run(in), interpret(g, in, {.compute = ComputeType::f32}).outputs);
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

TEST_F(VkTest, ExecutorUnaryFamilyMatchesInterpreter) {
  auto ctx = make_context();
  GraphBuilder b("unary");
  TracingScope scope(b);
  Tensor x = b.input("x", {DType::f32, {1000}});
  Tensor p = b.input("p", {DType::f32, {1000}});
  b.output("neg", neg(x));
  b.output("abs", abs(x));
  b.output("square", square(x));
  b.output("sqrt", sqrt(p));
  b.output("rsqrt", rsqrt(p));
  b.output("exp", exp(x));
  b.output("log", log(p));
  b.output("sin", sin(x));
  b.output("cos", cos(x));
  b.output("tanh", tanh(mul(x, 30.f)));
  b.output("sigmoid", sigmoid(mul(x, 50.f)));
  b.output("gelu", gelu(x));
  b.output("silu", silu(x));
  const Graph g = b.take();
  Program program(ctx, g);
  const TensorMap in{{"x", random_f32({1000}, 7, -4.f, 4.f)}, {"p", random_f32({1000}, 8, 0.01f, 10.f)}};
  expect_close(program.run(in), interpret(g, in, {.compute = ComputeType::f32}).outputs, 2e-6);
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

TEST_F(VkTest, ExecutorRunsTwiceWithTheSameBitsAndPicksUpNewInputs) {
  auto ctx = make_context();
  GraphBuilder b("twice");
  TracingScope scope(b);
  Tensor x = b.input("x", {DType::f32, {1000, 7}});
  Tensor y = b.input("y", {DType::f32, {1}});
  b.output("z", add(mul(x, y), exp(x)));
  const Graph g = b.take();
  Program program(ctx, g);
  TensorMap in{{"x", random_f32({1000, 7}, 9)}, {"y", random_f32({1}, 10)}};
  const TensorMap first = program.run(in);
  const TensorMap second = program.run(in);
  EXPECT_EQ(first.at("z").to_f64(), second.at("z").to_f64());
  expect_close(first, interpret(g, in, {.compute = ComputeType::f32}).outputs, 1e-6);
  in["y"] = HostTensor::f32({1}, {0.f});
  expect_close(program.run(in), interpret(g, in, {.compute = ComputeType::f32}).outputs, 1e-6);
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

// Nodes without inputs are computed once when the program is built and kept: every run sees them,
// with or without guard regions, and with writebacks (both recordings read the same constants).
TEST_F(VkTest, ExecutorComputesConstantsOnceAndKeepsThem) {
  auto ctx = make_context();
  GraphBuilder b("constants");
  TracingScope scope(b);
  Tensor x = b.input("x", {DType::f32, {300}});
  Tensor p = b.param("p", {DType::f32, {300}});
  const Tensor fill = full({300}, 0.5);
  const Tensor step = add(mul(x, fill), arange(300, DType::f32));
  b.output("y", add(step, ones({300})));
  b.output("p_next", add(p, fill));
  const Graph g = b.take();
  for (std::uint64_t guard : {0u, 64u}) {
    Program program(ctx, g, {.guard_bytes = guard, .resident_params = true, .writebacks = {{"p_next", "p"}}});
    EXPECT_EQ(program.stats().constants, 3u);  // full, arange, ones
    program.write_input("p", HostTensor::filled({DType::f32, {300}}, 1.0));
    for (int run = 0; run < 3; ++run) {
      const TensorMap in{{"x", random_f32({300}, 20 + run)}};
      const TensorMap got = program.run(in);
      const auto xs = in.at("x").to_f64();
      for (std::size_t i = 0; i < 300; ++i) {
        ASSERT_EQ(got.at("y").at(i), static_cast<float>(static_cast<float>(xs[i] * 0.5f) + i) + 1.f) << i;
      }
      EXPECT_EQ(program.read_input("p").at(7), 1.0 + 0.5 * (run + 1)) << "run " << run;
    }
    if (guard > 0) {
      EXPECT_TRUE(program.check_guards().empty()) << testing::join_lines(program.check_guards());
    }
  }
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

// A reshape between two nodes shares its input's memory and records no dispatch; a reshape of a
// graph input or into a graph output still copies (those ranges belong to uploads and readbacks).
TEST_F(VkTest, ExecutorReshapesShareMemoryInsideTheGraph) {
  auto ctx = make_context();
  GraphBuilder b("reshapes");
  TracingScope scope(b);
  Tensor x = b.input("x", {DType::f32, {6, 50}});
  const Tensor e = exp(x);
  const Tensor twice = reshape(reshape(e, {300}), {3, 100});  // two aliases in a chain
  const Tensor later = exp(neg(x));  // runs while the alias group is alive: must not reuse its range
  b.output("y", add(reshape(twice, {6, 50}), later));
  b.output("x_flat", reshape(x, {300}));          // of a graph input: copied
  b.output("e_flat", reshape(exp(e), {2, 150}));  // into a graph output: copied
  const Graph g = b.take();
  const TensorMap in{{"x", random_f32({6, 50}, 31)}};
  const TensorMap want = interpret(g, in, {.compute = ComputeType::f32}).outputs;
  for (std::uint64_t guard : {0u, 64u}) {
    Program program(ctx, g, {.guard_bytes = guard, .fuse_elementwise = false});
    EXPECT_EQ(program.stats().aliases, 3u);
    // exp(exp(x)) multiplies the inner exp's relative error by exp(x) (up to ~6 here): 1e-5.
    expect_close(program.run(in), want, 1e-5);
    if (guard > 0) {
      EXPECT_TRUE(program.check_guards().empty()) << testing::join_lines(program.check_guards());
    }
  }
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

TEST_F(VkTest, ExecutorGridStrideCoversMoreThan65535Workgroups) {
  auto ctx = make_context();
  GraphBuilder b("large");
  TracingScope scope(b);
  // 65535 workgroups of 256 cover 16,776,960 elements: the shader's grid-stride loop covers the rest.
  // (Two values of this size just fit lavapipe's 128 MiB maxStorageBufferRange.)
  constexpr std::int64_t n = 16'777'000;
  Tensor x = b.input("x", {DType::f32, {n}});
  b.output("z", neg(x));
  const Graph g = b.take();
  Program program(ctx, g);
  std::vector<float> v(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i % 1000);
  const TensorMap out = program.run({{"x", HostTensor::f32({n}, v)}});
  const auto z = out.at("z").to_f64();
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (z[i] != -static_cast<double>(v[i])) {
      ADD_FAILURE() << "z[" << i << "] = " << z[i];
      break;
    }
  }
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

// Same-shape operands take the vec4 fast path with a scalar tail: element counts that are and are
// not multiples of 4, for arithmetic (bit-exact: +, -, * are correctly rounded on both sides), the
// comparisons and where.
TEST_F(VkTest, ExecutorSameShapeFastPathAndItsTail) {
  auto ctx = make_context();
  for (std::int64_t n : {1, 2, 3, 4, 5, 6, 7, 1001, 1000003}) {
    SCOPED_TRACE("n = " + std::to_string(n));
    GraphBuilder b("fast");
    TracingScope scope(b);
    Tensor x = b.input("x", {DType::f32, {n}});
    Tensor y = b.input("y", {DType::f32, {n}});
    b.output("sum", x + y);
    b.output("diff", x - y);
    b.output("prod", x * y);
    b.output("less", less(x, y));
    b.output("pick", where(greater(x, y), x, y));
    const Graph g = b.take();
    Program program(ctx, g);
    const TensorMap in{{"x", random_f32({n}, 41)}, {"y", random_f32({n}, 43)}};
    const TensorMap got = program.run(in);
    const TensorMap want = interpret(g, in, {.compute = ComputeType::f32}).outputs;
    for (const auto& [name, w] : want) EXPECT_EQ(got.at(name).to_f64(), w.to_f64()) << name;
  }
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

TEST_F(VkTest, ExecutorInputErrorsNameTheInput) {
  auto ctx = make_context();
  GraphBuilder b("errs");
  TracingScope scope(b);
  Tensor x = b.input("x", {DType::f32, {2}});
  b.output("y", neg(x));
  const Graph g = b.take();
  Program program(ctx, g);
  const auto message = [&](const TensorMap& in) {
    try {
      program.run(in);
    } catch (const RuntimeError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message({}).find("missing input 'x'"), std::string::npos) << message({});
  const TensorMap extra{{"x", HostTensor::f32({2}, {1, 2})}, {"bogus", HostTensor::f32({2}, {1, 2})}};
  EXPECT_NE(message(extra).find("no input named 'bogus'"), std::string::npos);
  const TensorMap misshapen{{"x", HostTensor::f32({3}, {1, 2, 3})}};
  EXPECT_NE(message(misshapen).find("input 'x' expects f32[2]"), std::string::npos) << message(misshapen);
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

// An output of at least 1 MiB is read into the last run's storage once no HostTensor holds that
// any more, and into new storage while one does: a result the caller keeps never changes under a
// later run. Small outputs always get new storage (their values checked here too).
TEST_F(VkTest, ExecutorReusesOutputStorageNobodyHolds) {
  auto ctx = make_context();
  GraphBuilder b("kept_outputs");
  TracingScope scope(b);
  constexpr std::int64_t kBig = (1 << 18) + 3;  // 1 MiB and 12 bytes of f32
  Tensor x = b.input("x", {DType::f32, {kBig}});
  Tensor s = b.input("s", {DType::f32, {4}});
  b.output("big", x * 2.0f);
  b.output("small", s + 1.0f);
  Program program(ctx, b.take());
  const auto feed = [&](float v) {
    TensorMap in;
    in.emplace("x", HostTensor::f32({kBig}, std::vector<float>(kBig, v)));
    in.emplace("s", HostTensor::f32({4}, std::vector<float>(4, v)));
    return in;
  };
  TensorMap first = program.run(feed(1.0f));
  const void* first_big = first.at("big").raw_data();
  TensorMap second = program.run(feed(2.0f));  // the first result still held
  EXPECT_NE(second.at("big").raw_data(), first_big);
  EXPECT_EQ(first.at("big").at(kBig - 1), 2.0);
  EXPECT_EQ(second.at("big").at(kBig - 1), 4.0);
  const void* second_big = second.at("big").raw_data();
  second.clear();
  const TensorMap third = program.run(feed(3.0f));
  EXPECT_EQ(third.at("big").raw_data(), second_big);
  EXPECT_EQ(third.at("big").at(0), 6.0);
  EXPECT_EQ(third.at("big").at(kBig - 1), 6.0);
  EXPECT_EQ(third.at("small").at(3), 4.0);
  EXPECT_EQ(first.at("big").at(0), 2.0);
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

}  // namespace
}  // namespace tg::vk
