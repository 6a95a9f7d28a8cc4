// Results must not depend on the thread count. Random property graphs are small, so this test uses
// tensors big enough that every parallel kernel really splits its work across threads.
#include <gtest/gtest.h>
#include <tbb/global_control.h>

#include "support/library.h"

namespace tg {
namespace {

std::vector<float> pseudo_random(std::size_t n, std::uint64_t seed) {
  SampleRng rng(seed);
  std::vector<float> v(n);
  for (auto& x : v) x = static_cast<float>(rng.uniform(-1, 1));
  return v;
}

TEST(Determinism, LargeKernelsGiveTheSameBitsWithOneThreadAndAllThreads) {
  GraphBuilder b("big");
  TracingScope scope(b);
  Tensor a = b.input("a", {DType::f32, {256, 384}});
  Tensor w = b.input("w", {DType::f32, {384, 200}});
  Tensor h = matmul(a, w);
  b.output("matmul", h);
  b.output("sum_all", sum(a));
  b.output("sum_rows", sum(a, 1));
  b.output("mean_cols", mean(a, 0));
  b.output("softmax", softmax(h, -1));
  b.output("log_softmax", log_softmax(h, 0));
  b.output("elementwise", tanh(a) * 3.f + exp(a));
  b.output("sum_to_shape", sum_to_shape(a, {1, 384}));
  b.output("max", max(h, 0));
  b.output("argmax", argmax(h, 1));
  b.param("unused", {DType::f32, {1}});
  const Graph forward = b.take();
  const Graph g = differentiate(
      [&] {
        GraphBuilder lb("big_loss");
        lb.mutable_graph() = forward;
        TracingScope s(lb);
        lb.output("loss", sum(lb.wrap(*forward.find_output("softmax")) * lb.wrap(*forward.find_output("matmul"))));
        return lb.take();
      }(),
      {.loss = "loss", .wrt = {"a", "w"}});
  const TensorMap inputs = {{"a", HostTensor::f32({256, 384}, pseudo_random(256 * 384, 1))},
                            {"w", HostTensor::f32({384, 200}, pseudo_random(384 * 200, 2))},
                            {"unused", HostTensor::f32({1}, {0})}};
  for (ComputeType compute : {ComputeType::f32, ComputeType::f64}) {
    const auto many = interpret(g, inputs, {.compute = compute}).outputs;
    TensorMap one;
    {
      tbb::global_control single(tbb::global_control::max_allowed_parallelism, 1);
      one = interpret(g, inputs, {.compute = compute}).outputs;
    }
    for (const auto& [name, tensor] : many) {
      EXPECT_EQ(tensor.to_f64(), one.at(name).to_f64()) << name << " differs between thread counts";
    }
  }
}

}  // namespace
}  // namespace tg
