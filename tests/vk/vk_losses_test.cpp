// The losses family (nll_loss, cross_entropy) on the Vulkan executor against the f64 oracle under
// graph_tolerance: the ops' own samples; every reduction on edge shapes (rank-1 scores, one class,
// class counts around the serial/workgroup switch (32/33) and the workgroup (256/257), long rows,
// more than 256 rows so the one-workgroup sum wraps its lanes, no rows at all); -inf, NaN, +inf
// and huge logits; more rows than workgroups (grid-stride; on GPUs only, see the test); one
// workgroup summing 100000 rows and 2000 rows of 1000 classes; out-of-range targets (the executor's
// index check); gradient graphs. Every run is replayed and must repeat its bits. Under the
// validation layer when TG_VK_VALIDATION=1.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "property/graph_gen.h"
#include "support/library.h"
#include "support/tolerance.h"
#include "tensorgrad/ir/ops/ids/losses.h"
#include "tensorgrad/vk/executor.h"
#include "vk_oracle_check.h"
#include "vk_test_support.h"

namespace tg::vk {
namespace {

using testing::VkTest;

// Scores in [lo, hi), by default wider than random_f32's: logits of a few units apart.
HostTensor random_scores(Shape shape, std::uint32_t seed, float lo = -4.f, float hi = 4.f) {
  return testing::random_f32(std::move(shape), seed, lo, hi);
}

// Vulkan against the f64 oracle within graph_tolerance(g) * max(1, largest |value| of the oracle
// run), NaN matching NaN; then a replay must give the same bits.
void check(const std::shared_ptr<Context>& ctx, const Graph& g, const TensorMap& in) {
  testing::check_against_oracle(ctx, g, in, {.otherwise = std::nullopt, .guards = false});
}

// Both losses with every reduction on one scores/targets pair.
Graph all_losses_graph(const Shape& scores_shape) {
  GraphBuilder b("losses");
  TracingScope scope(b);
  Tensor x = b.input("x", {DType::f32, scores_shape});
  Tensor t = b.input("t", {DType::i32, Shape(scores_shape.begin(), scores_shape.end() - 1)});
  for (const auto& [name, r] :
       {std::pair{"none", Reduction::none}, std::pair{"mean", Reduction::mean}, std::pair{"sum", Reduction::sum}}) {
    b.output(std::string("nll_") + name, nll_loss(x, t, {.reduction = r}));
    b.output(std::string("ce_") + name, cross_entropy(x, t, {.reduction = r}));
  }
  return b.take();
}

TensorMap random_loss_inputs(const Shape& scores_shape, std::uint32_t seed, float lo = -4.f, float hi = 4.f) {
  return {{"x", random_scores(scores_shape, seed, lo, hi)},
          {"t", testing::random_indices(Shape(scores_shape.begin(), scores_shape.end() - 1), scores_shape.back(),
                                        seed + 1)}};
}

TEST_F(VkTest, LossesMatchTheOracleOnTheirSamples) {
  auto ctx = make_context();
  for (const OpId op : {op::NllLoss, op::CrossEntropy}) {
    for (std::uint64_t seed = 0; seed < 25; ++seed) {
      SampleRng rng(seed * 7919 + 3);
      const auto sample = op_def(op).samples(rng, std::nullopt);
      ASSERT_TRUE(sample.has_value());
      const tg::testing::GraphCase c = tg::testing::build_single_op(op, *sample, rng);
      SCOPED_TRACE(tg::testing::describe(c));
      check(ctx, c.graph, c.inputs);
    }
  }
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

TEST_F(VkTest, LossesEveryReductionOnEdgeShapes) {
  auto ctx = make_context();
  const std::vector<Shape> shapes = {
      {1},      {6},        // rank 1: one position, a 0-d target
      {1, 1},   {5, 1},     // one class
      {7, 3},   {2, 3, 5},  // batch axes
      {3, 32},  {3, 33},    // the last serial row and the first workgroup row of cross_entropy
      {4, 256}, {2, 257},   // a row of exactly one workgroup, and one more element
      {3, 700},             // a few elements per invocation
      {257, 5}, {600, 40},  // more rows than the reduction's 256 lanes (serial and workgroup rows)
  };
  for (const Shape& shape : shapes) {
    SCOPED_TRACE("scores " + shape_to_string(shape));
    check(ctx, all_losses_graph(shape),
          random_loss_inputs(shape, static_cast<std::uint32_t>(shape.back() * 31 + shape[0])));
  }
  // Logits around 1000: stable only through the row maximum.
  check(ctx, all_losses_graph({4, 50}), random_loss_inputs({4, 50}, 7, 990.f, 1010.f));
  check(ctx, all_losses_graph({4, 5}), random_loss_inputs({4, 5}, 8, 990.f, 1010.f));
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

// Past 256 rows a sum or mean is two dispatches: the row losses into scratch, then one workgroup
// adds them as the one-dispatch form does (invocation l: rows l, l+256, ... in order; then 16
// groups of 16 in order, then the 16 group results in order). The sum must be exactly that
// float computation over the row losses Vulkan reports for reduction "none"; the mean its quotient
// (within 2 ulp: NVIDIA's division is not correctly rounded).
TEST_F(VkTest, LossSumsOverManyRowsAddTheRowLossesInOrder) {
  auto ctx = make_context();
  for (const std::int64_t classes : {5, 40}) {  // serial rows and workgroup rows
    for (const std::int64_t rows : {256, 257, 1000}) {
      SCOPED_TRACE("rows " + std::to_string(rows) + " classes " + std::to_string(classes));
      GraphBuilder b("losses_order");
      TracingScope scope(b);
      Tensor x = b.input("x", {DType::f32, {rows, classes}});
      Tensor t = b.input("t", {DType::i32, {rows}});
      b.output("sum", cross_entropy(x, t, {.reduction = Reduction::sum}));
      b.output("mean", cross_entropy(x, t, {.reduction = Reduction::mean}));
      b.output("none", cross_entropy(x, t, {.reduction = Reduction::none}));
      const Graph g = b.take();
      Program program(ctx, g);
      EXPECT_EQ(program.stats().dispatches, rows > 256 ? 5u : 3u);
      const TensorMap got = program.run(random_loss_inputs({rows, classes}, 91));
      const auto losses = got.at("none").to_f64();
      std::array<float, 256> partial{};
      for (std::size_t row = 0; row < losses.size(); ++row) partial[row % 256] += static_cast<float>(losses[row]);
      float total = 0.f;
      for (std::size_t group = 0; group < 16; ++group) {
        float r = partial[16 * group];
        for (std::size_t i = 1; i < 16; ++i) r += partial[16 * group + i];
        total = group == 0 ? r : total + r;
      }
      EXPECT_EQ(static_cast<float>(got.at("sum").at(0)), total);
      const float mean = total / static_cast<float>(rows);
      EXPECT_NEAR(got.at("mean").at(0), mean, 2 * std::abs(mean) * std::numeric_limits<float>::epsilon());
    }
  }
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

TEST_F(VkTest, LossesOverNoPositions) {
  auto ctx = make_context();
  for (const std::int64_t classes : {4, 40}) {
    const Graph g = all_losses_graph({0, classes});
    Program program(ctx, g);
    const TensorMap got = program.run(
        {{"x", HostTensor::of({DType::f32, {0, classes}}, {})}, {"t", HostTensor::of({DType::i32, {0}}, {})}});
    EXPECT_EQ(got.at("nll_none").size(), 0u);
    EXPECT_EQ(got.at("ce_none").size(), 0u);
    EXPECT_EQ(got.at("nll_sum").to_f64(), std::vector<double>{0.0});
    EXPECT_EQ(got.at("ce_sum").to_f64(), std::vector<double>{0.0});
    EXPECT_TRUE(std::isnan(got.at("nll_mean").at(0)));  // as the interpreter: 0 / 0
    EXPECT_TRUE(std::isnan(got.at("ce_mean").at(0)));
  }
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

TEST_F(VkTest, LossesPropagateInfinitiesAndNansAsTheInterpreter) {
  auto ctx = make_context();
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  for (const std::int64_t classes : {6, 300}) {  // serial rows and workgroup rows
    SCOPED_TRACE("classes " + std::to_string(classes));
    // Rows: -inf away from the target (finite loss); -inf at the target (+inf loss); a NaN; +inf
    // (NaN through inf - inf); all equal; a finite row.
    std::vector<double> x;
    std::vector<double> t = {1, 2, 0, 3, 4, 5};
    for (std::int64_t r = 0; r < 6; ++r) {
      for (std::int64_t j = 0; j < classes; ++j) {
        double v = std::sin(static_cast<double>(r * classes + j));
        if (r == 0 && j == 4) v = -inf;
        if (r == 1 && j == 2) v = -inf;
        if (r == 2 && j == classes - 1) v = nan;
        if (r == 3 && j == 0) v = inf;
        if (r == 4) v = 0.75;
        x.push_back(v);
      }
    }
    GraphBuilder b("losses_special");
    TracingScope scope(b);
    Tensor xs = b.input("x", {DType::f32, {6, classes}});
    Tensor ts = b.input("t", {DType::i32, {6}});
    b.output("nll", nll_loss(xs, ts, {.reduction = Reduction::none}));
    b.output("ce", cross_entropy(xs, ts, {.reduction = Reduction::none}));
    Tensor finite_x = narrow(xs, 0, 4, 2);
    Tensor finite_t = narrow(ts, 0, 4, 2);
    b.output("ce_mean_finite", cross_entropy(finite_x, finite_t, {.reduction = Reduction::mean}));
    b.output("ce_sum_all", cross_entropy(xs, ts, {.reduction = Reduction::sum}));  // NaN
    const Graph g = b.take();
    const TensorMap in{{"x", HostTensor::of({DType::f32, {6, classes}}, x)},
                       {"t", HostTensor::of({DType::i32, {6}}, t)}};
    check(ctx, g, in);
    const TensorMap got = Program(ctx, g).run(in);
    const auto ce = got.at("ce").to_f64();
    EXPECT_TRUE(std::isfinite(ce[0]));
    EXPECT_EQ(ce[1], inf);
    EXPECT_TRUE(std::isnan(ce[2]));
    EXPECT_TRUE(std::isnan(ce[3]));
    EXPECT_NEAR(ce[4], std::log(static_cast<double>(classes)), 1e-5);
  }
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

TEST_F(VkTest, LossesMoreRowsThanWorkgroupsAndLongReductions) {
  auto ctx = make_context();
  if (ctx->info().type != DeviceType::cpu) {
    // 70000 workgroup rows (40 classes) > 65535 workgroups: the grid-stride loop over rows wraps.
    // Not on lavapipe, where a workgroup row costs ~0.3 ms (this case alone took 20-30 s there).
    // Serial rows wrap only past 65535 * 256 rows, beyond lavapipe's 128 MiB buffer limit.
    GraphBuilder b("losses_rows");
    TracingScope scope(b);
    Tensor x = b.input("x", {DType::f32, {70000, 40}});
    Tensor t = b.input("t", {DType::i32, {70000}});
    b.output("ce", cross_entropy(x, t, {.reduction = Reduction::none}));
    b.output("nll", nll_loss(x, t, {.reduction = Reduction::none}));
    check(ctx, b.take(), random_loss_inputs({70000, 40}, 61));
  }
  {
    // One workgroup sums 100000 serial rows: 391 rows per invocation.
    GraphBuilder b("losses_long_sum");
    TracingScope scope(b);
    Tensor x = b.input("x", {DType::f32, {100000, 3}});
    Tensor t = b.input("t", {DType::i32, {100000}});
    b.output("ce_mean", cross_entropy(x, t, {.reduction = Reduction::mean}));
    b.output("nll_sum", nll_loss(x, t, {.reduction = Reduction::sum}));
    check(ctx, b.take(), random_loss_inputs({100000, 3}, 62));
  }
  {
    // One workgroup through 2000 workgroup rows of 1000 classes.
    GraphBuilder b("losses_long_rows");
    TracingScope scope(b);
    Tensor x = b.input("x", {DType::f32, {2000, 1000}});
    Tensor t = b.input("t", {DType::i32, {2000}});
    b.output("ce_sum", cross_entropy(x, t, {.reduction = Reduction::sum}));
    check(ctx, b.take(), random_loss_inputs({2000, 1000}, 63));
  }
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

TEST_F(VkTest, LossTargetsOutOfRangeThrowTheInterpretersError) {
  auto ctx = make_context();
  for (const std::int64_t classes : {5, 100}) {  // serial rows and workgroup rows
    for (const Reduction r : {Reduction::none, Reduction::mean}) {
      for (const bool nll : {true, false}) {
        const std::string op = nll ? "nll_loss" : "cross_entropy";
        SCOPED_TRACE(op + " classes " + std::to_string(classes) + (r == Reduction::none ? " none" : " mean"));
        GraphBuilder b("losses_bad_target");
        TracingScope scope(b);
        Tensor x = b.input("x", {DType::f32, {300, classes}});
        Tensor t = b.input("t", {DType::i32, {300}});
        b.output("loss", nll ? nll_loss(x, t, {.reduction = r}) : cross_entropy(x, t, {.reduction = r}));
        const Graph g = b.take();
        TensorMap in = random_loss_inputs({300, classes}, 71);
        Program program(ctx, g);
        // Rows 290 (== classes) and 137 (-1) are bad: the report names the first, 137.
        in.at("t").set(290, static_cast<double>(classes));
        in.at("t").set(137, -1);
        try {
          program.run(in);
          ADD_FAILURE() << "no error for out-of-range targets";
        } catch (const RuntimeError& e) {
          const std::string what = e.what();
          EXPECT_NE(what.find(op), std::string::npos) << what;
          EXPECT_NE(what.find("target -1 is out of range [0, " + std::to_string(classes) + ")"), std::string::npos)
              << what;
          EXPECT_NE(what.find("element 137"), std::string::npos) << what;
        }
        // Only the later one bad: its value is reported.
        in.at("t").set(137, 0);
        try {
          program.run(in);
          ADD_FAILURE() << "no error for an out-of-range target";
        } catch (const RuntimeError& e) {
          const std::string what = e.what();
          EXPECT_NE(what.find("target " + std::to_string(classes) + " is out of range"), std::string::npos) << what;
          EXPECT_NE(what.find("element 290"), std::string::npos) << what;
        }
        // Fixed again: the same program runs clean (the status word is reset every run).
        in.at("t").set(290, 1);
        const TensorMap got = program.run(in);
        const TensorMap want = interpret(g, in).outputs;
        EXPECT_NEAR(got.at("loss").at(0), want.at("loss").at(0), 1e-4);
      }
    }
  }
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

TEST_F(VkTest, LossGradientGraphsMatchTheOracle) {
  auto ctx = make_context();
  for (const Reduction r : {Reduction::none, Reduction::mean, Reduction::sum}) {
    for (const Shape& shape : {Shape{6, 5}, Shape{2, 3, 40}}) {
      for (const bool nll : {true, false}) {
        GraphBuilder b("loss_grad");
        TracingScope scope(b);
        Tensor x = b.param("x", {DType::f32, shape});
        Tensor t = b.input("t", {DType::i32, Shape(shape.begin(), shape.end() - 1)});
        Tensor loss = nll ? nll_loss(log_softmax(x, -1), t, {.reduction = r}) : cross_entropy(x, t, {.reduction = r});
        b.output("loss", r == Reduction::none ? sum(loss) : loss);
        const Graph g = differentiate(b.take());
        for (const Node& node : g.nodes()) {
          if (!has_kernel(node.op)) {
            GTEST_SKIP() << "the gradient graph needs op '" << op_name(node.op) << "', which has no Vulkan kernel yet";
          }
        }
        SCOPED_TRACE(print_graph(g));
        check(ctx, g,
              {{"x", random_scores(shape, 81)},
               {"t", testing::random_indices(Shape(shape.begin(), shape.end() - 1), shape.back(), 82)}});
      }
    }
  }
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

}  // namespace
}  // namespace tg::vk
