// The reduce family (sum, mean, max, min, argmax, argmin) and the softmax family (softmax,
// log_softmax) on the Vulkan executor against the interpreter, on hand-built graphs: reduction
// lengths around the 256-invocation workgroup (1, 7, 255, 256, 257) and long ones (100000), every
// axis subset with and without keep_dims, rank 6 with alternating kept/reduced axes, more than
// 65535 output rows (grid-stride workgroups), NaN and ties for the index reductions, empty
// reductions, and softmax over first/middle/last axes with values around 1000. Under the
// validation layer when TG_VK_VALIDATION=1.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "support/library.h"
#include "tensorgrad/vk/executor.h"
#include "vk_oracle_check.h"
#include "vk_test_support.h"

namespace tg::vk {
namespace {

using testing::VkTest;

using testing::random_f32;

// Against the f64 oracle: |got - want| <= abs + rel * |want|, NaN matching NaN. `abs` covers the
// rounding of long fp32 sums (scaled by the caller with the reduction length).
void expect_close(const TensorMap& got, const TensorMap& want, double rel, double abs) {
  ASSERT_EQ(got.size(), want.size());
  for (const auto& [name, w] : want) {
    const HostTensor& g = got.at(name);
    ASSERT_EQ(g.type, w.type) << name;
    std::size_t failures = 0;
    for (std::size_t i = 0; i < w.size() && failures < 5; ++i) {
      if (std::isnan(w.at(i))) {
        EXPECT_TRUE(std::isnan(g.at(i))) << name << "[" << i << "] = " << g.at(i) << ", want NaN";
        failures += std::isnan(g.at(i)) ? 0 : 1;
        continue;
      }
      const double tol = w.type.dtype == DType::i32 ? 0 : abs + rel * std::fabs(w.at(i));
      const bool ok = g.at(i) == w.at(i) || std::fabs(g.at(i) - w.at(i)) <= tol;
      EXPECT_TRUE(ok) << name << "[" << i << "] = " << g.at(i) << ", want " << w.at(i) << " (tol " << tol << ")";
      failures += ok ? 0 : 1;
    }
  }
}

// Runs on Vulkan and the oracle; also replays once and checks the bits repeat.
void check(const std::shared_ptr<Context>& ctx, const Graph& g, const TensorMap& in, double rel = 1e-5,
           double abs = 1e-5) {
  Program program(ctx, g);
  const TensorMap got = program.run(in);
  expect_close(got, interpret(g, in).outputs, rel, abs);
  const TensorMap again = program.run(in);
  for (const auto& [name, t] : got) {
    const auto v = again.at(name).to_f64();
    EXPECT_TRUE(testing::same_bits(t.to_f64(), v)) << name << " not bitwise replayable";
  }
}

TEST_F(VkTest, ReduceLengthsAroundTheWorkgroupAndLong) {
  auto ctx = make_context();
  for (const std::int64_t n : {1, 7, 255, 256, 257, 100000}) {
    SCOPED_TRACE("length " + std::to_string(n));
    GraphBuilder b("reduce_lengths");
    TracingScope scope(b);
    Tensor x = b.input("x", {DType::f32, {3, n}});  // along the contiguous last axis
    Tensor t = b.input("t", {DType::f32, {n, 3}});  // along the strided first axis
    for (const auto& [name, v, axis] : {std::tuple{"last", x, 1}, std::tuple{"first", t, 0}}) {
      const std::string s = name;
      b.output("sum_" + s, sum(v, axis));
      b.output("mean_" + s, mean(v, axis));
      b.output("max_" + s, max(v, axis));
      b.output("min_" + s, min(v, axis, {.keep_dims = true}));
      b.output("argmax_" + s, argmax(v, axis));
      b.output("argmin_" + s, argmin(v, axis, {.keep_dims = true}));
      b.output("softmax_" + s, softmax(v, axis));
      b.output("log_softmax_" + s, log_softmax(v, axis));
    }
    const Graph g = b.take();
    const TensorMap in{{"x", random_f32({3, n}, 11)}, {"t", random_f32({n, 3}, 12)}};
    // fp32 sums of n values of magnitude <= 2: a few units of rounding times sqrt(n) growth.
    check(ctx, g, in, 2e-5, 1e-5 * std::sqrt(static_cast<double>(n)) + 1e-6);
  }
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

TEST_F(VkTest, ReduceEveryAxisSubsetWithAndWithoutKeepDims) {
  auto ctx = make_context();
  GraphBuilder b("reduce_axes");
  TracingScope scope(b);
  const Shape shape{3, 5, 4, 70};
  Tensor x = b.input("x", {DType::f32, shape});
  for (int mask = 0; mask < 16; ++mask) {
    std::vector<std::int64_t> axes;
    for (std::int64_t a = 0; a < 4; ++a)
      if (mask & (1 << a)) axes.push_back(a);
    for (const bool keep : {false, true}) {
      const std::string tag = std::to_string(mask) + (keep ? "k" : "");
      b.output("sum" + tag, sum(x, axes, {.keep_dims = keep}));
      b.output("mean" + tag, mean(x, axes, {.keep_dims = keep}));
      b.output("max" + tag, max(x, axes, {.keep_dims = keep}));
      b.output("min" + tag, min(x, axes, {.keep_dims = keep}));
    }
  }
  for (std::int64_t a = 0; a < 4; ++a) {
    for (const bool keep : {false, true}) {
      const std::string tag = std::to_string(a) + (keep ? "k" : "");
      b.output("argmax" + tag, argmax(x, a, {.keep_dims = keep}));
      b.output("argmin" + tag, argmin(x, a, {.keep_dims = keep}));
      b.output("softmax" + tag, keep ? log_softmax(x, a) : softmax(x, a));
    }
  }
  b.output("all", sum(x));
  const Graph g = b.take();
  check(ctx, g, {{"x", random_f32(shape, 21)}}, 2e-5, 2e-4);
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

TEST_F(VkTest, ReduceRankSixAlternatingAxesAndSizeOneAxes) {
  auto ctx = make_context();
  GraphBuilder b("reduce_rank6");
  TracingScope scope(b);
  const Shape shape{2, 3, 4, 3, 2, 5};
  Tensor x = b.input("x", {DType::f32, shape});
  Tensor y = b.input("y", {DType::f32, {1, 6, 1, 40, 1}});
  b.output("even", sum(x, {0, 2, 4}));
  b.output("odd", max(x, {1, 3, 5}, {.keep_dims = true}));
  b.output("mixed", mean(x, {0, 1, 3, 5}));
  b.output("ones", sum(y, {0, 2, 4}));  // only size-1 axes: a copy
  b.output("ones_keep", min(y, {0, 3}, {.keep_dims = true}));
  b.output("arg1", argmax(y, 2));  // a size-1 axis: index 0
  b.output("arg3", argmin(y, 3, {.keep_dims = true}));
  b.output("sm1", softmax(y, 0));
  const Graph g = b.take();
  check(ctx, g, {{"x", random_f32(shape, 31)}, {"y", random_f32({1, 6, 1, 40, 1}, 32)}});
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

TEST_F(VkTest, ReduceMoreRowsThanWorkgroups) {
  auto ctx = make_context();
  GraphBuilder b("reduce_rows");
  TracingScope scope(b);
  Tensor s = b.input("s", {DType::f32, {70001, 3}});   // one invocation per row
  Tensor l = b.input("l", {DType::f32, {65600, 33}});  // one workgroup per row, grid-stride
  b.output("sum_s", sum(s, 1));
  b.output("sum_l", sum(l, 1));
  b.output("softmax_s", softmax(s, 1));
  b.output("log_softmax_l", log_softmax(l, 1));
  const Graph g = b.take();
  check(ctx, g, {{"s", random_f32({70001, 3}, 41)}, {"l", random_f32({65600, 33}, 42)}});
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

TEST_F(VkTest, ReduceNanAndTiesFollowTheInterpreter) {
  auto ctx = make_context();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (const std::int64_t n : {5, 300}) {  // one invocation per row, and a workgroup per row
    SCOPED_TRACE("length " + std::to_string(n));
    // Rows: ties at the maximum and minimum; a NaN late; two NaNs; all equal; +-inf.
    std::vector<double> v;
    const auto row = [&](auto fill) {
      for (std::int64_t i = 0; i < n; ++i) v.push_back(fill(i));
    };
    row([&](std::int64_t i) { return (i == 1 || i == n - 1) ? 3.0 : (i == 2 || i == n - 2) ? -3.0 : 0.5; });
    row([&](std::int64_t i) { return i == n - 2 ? nan : static_cast<double>(i % 7); });
    row([&](std::int64_t i) { return (i == n / 2 || i == n - 1) ? nan : -static_cast<double>(i % 5); });
    row([&](std::int64_t) { return 1.25; });
    row([&](std::int64_t i) {
      return i == 3 ? std::numeric_limits<double>::infinity() : i == 4 ? -std::numeric_limits<double>::infinity() : 0.0;
    });
    GraphBuilder b("reduce_nan");
    TracingScope scope(b);
    Tensor x = b.input("x", {DType::f32, {5, n}});
    Tensor t = b.input("t", {DType::f32, {n, 5}});
    b.output("max", max(x, 1));
    b.output("min", min(x, 1));
    b.output("argmax", argmax(x, 1));
    b.output("argmin", argmin(x, 1));
    b.output("argmax_t", argmax(t, 0));
    b.output("argmin_t", argmin(t, 0));
    b.output("max_t", max(t, 0));
    const Graph g = b.take();
    std::vector<double> tv(v.size());
    for (std::int64_t r = 0; r < 5; ++r)
      for (std::int64_t i = 0; i < n; ++i)
        tv[static_cast<std::size_t>(i * 5 + r)] = v[static_cast<std::size_t>(r * n + i)];
    check(ctx, g, {{"x", HostTensor::of({DType::f32, {5, n}}, v)}, {"t", HostTensor::of({DType::f32, {n, 5}}, tv)}}, 0,
          0);
  }
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

TEST_F(VkTest, ReduceOverEmptyAxes) {
  auto ctx = make_context();
  GraphBuilder b("reduce_empty");
  TracingScope scope(b);
  Tensor x = b.input("x", {DType::f32, {3, 0, 2}});
  b.output("sum", sum(x, 1));                              // zeros
  b.output("mean", mean(x, {1, 2}, {.keep_dims = true}));  // NaN
  b.output("empty_out", sum(x, 2));                        // [3, 0]
  b.output("softmax", softmax(x, 2));                      // [3, 0, 2]
  const Graph g = b.take();
  check(ctx, g, {{"x", HostTensor::of({DType::f32, {3, 0, 2}}, {})}});
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

TEST_F(VkTest, SoftmaxStableAroundThousandOnEveryAxis) {
  auto ctx = make_context();
  GraphBuilder b("softmax_axes");
  TracingScope scope(b);
  const Shape shape{40, 300, 5};
  Tensor x = b.input("x", {DType::f32, shape});
  Tensor r = b.input("r", {DType::f32, {2, 100000}});
  for (std::int64_t a = 0; a < 3; ++a) {
    b.output("softmax" + std::to_string(a), softmax(x, a));
    b.output("log_softmax" + std::to_string(a), log_softmax(x, a));
  }
  b.output("softmax_long", softmax(r, 1));
  b.output("log_softmax_long", log_softmax(r, 1));
  const Graph g = b.take();
  // exp on the device is accurate to a few ulp; softmax outputs are <= 1 and log_softmax a few units.
  check(ctx, g, {{"x", random_f32(shape, 51, 990.f, 1010.f)}, {"r", random_f32({2, 100000}, 52, 995.f, 1005.f)}}, 2e-5,
        1e-6);
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

}  // namespace
}  // namespace tg::vk
