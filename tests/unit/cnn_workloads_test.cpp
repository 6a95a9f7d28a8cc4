// W7 and W7_small (examples/models.h, bench/cnn_setup.h): the benchmark-size step graphs build, and
// a few Adam steps on interp_f32 lower the loss of a fixed batch (W7 at a reduced size).
#include <gtest/gtest.h>

#include <cmath>
#include <string_view>
#include <vector>

#include "../../bench/cnn_setup.h"
#include "tensorgrad/ir/ops/op_id.h"

namespace tg {
namespace {

std::vector<double> losses(Training& t, const TensorMap& batch, int steps) {
  std::vector<double> out;
  for (int i = 0; i < steps; ++i) {
    const StepResult r = t.step(batch);
    EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.failure().message);
    if (!r.ok()) break;
    out.push_back(r.loss());
  }
  return out;
}

int count_op(const Graph& g, std::string_view op) {
  int n = 0;
  for (const Node& node : g.nodes()) n += op_name(node.op) == op ? 1 : 0;
  return n;
}

TEST(CnnWorkloads, BenchmarkSizedStepGraphsBuild) {
  examples::ResNetCnn w7;
  Training t7 = bench::compile_resnet(w7, bench::kW7Batch, Backend::interp_f32, nullptr);
  EXPECT_EQ(count_op(t7.graph(), "conv2d"), 8);  // stem, 2 x 2 in stage 1, widen, 2 in stage 2
  EXPECT_EQ(count_op(t7.graph(), "max_pool2d"), 2);
  examples::SmallCnn small;
  Training ts = bench::compile_small_cnn(small, bench::kW7SmallBatch, Backend::interp_f32, nullptr);
  EXPECT_EQ(count_op(ts.graph(), "conv2d"), 2);
  EXPECT_EQ(count_op(ts.graph(), "max_pool2d"), 1);
}

TEST(CnnWorkloads, W7LossFallsAtReducedSize) {
  const examples::CnnConfig config{.image = 8, .in_channels = 3, .width = 4, .classes = 10};
  examples::ResNetCnn model(config);
  Training t = bench::compile_resnet(model, 16, Backend::interp_f32, nullptr, 7, 1e-2);
  const std::vector<double> l = losses(t, bench::resnet_batch(config, 16), 8);
  ASSERT_EQ(l.size(), 8u);
  for (double v : l) EXPECT_TRUE(std::isfinite(v));
  EXPECT_LT(l.back(), 0.9 * l.front());
}

TEST(CnnWorkloads, W7SmallLossFalls) {
  examples::SmallCnn model;
  Training t = bench::compile_small_cnn(model, 16, Backend::interp_f32, nullptr, 7, 1e-2);
  const std::vector<double> l = losses(t, bench::small_cnn_batch(16), 8);
  ASSERT_EQ(l.size(), 8u);
  for (double v : l) EXPECT_TRUE(std::isfinite(v));
  EXPECT_LT(l.back(), 0.9 * l.front());
}

}  // namespace
}  // namespace tg
