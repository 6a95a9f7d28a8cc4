// The memory bound's price (docs/testing.md, "Memory bound"): graph_cost counts every value at 8
// bytes an element and every node's work, and directional_gradient_cost prices the derived graphs a
// gradient check runs, so the embedding case that ran CI out of memory is refused before it runs.
#include <gtest/gtest.h>

#include "checks.h"
#include "graph_gen.h"

namespace tg::testing {
namespace {

// x: f32[10,20] and w: f32[20,30] into a matmul [10,30] with K = 20.
TEST(MemoryBound, GraphCostCountsEveryValueAtEightBytesAndEveryNodesWork) {
  GraphBuilder b("m");
  {
    TracingScope scope(b);
    const Tensor x = b.input("x", {DType::f32, {10, 20}});
    const Tensor w = b.input("w", {DType::f32, {20, 30}});
    b.output("y", matmul(x, w));
  }
  const GraphCost cost = graph_cost(b.take());
  EXPECT_EQ(cost.value_bytes, (200 + 600 + 300) * 8);
  EXPECT_EQ(cost.work, 300 * 20);
}

// The case of RapidCheck seed 7260665089071056212 (AutodiffMatchesFiniteDifferencesAtBoundarySizes)
// that ran the CI machine out of memory: an embedding of a [32768, 2] table at [16384, 4, 1]
// positions. The forward graph is small; its gradient is a one-hot matmul through a
// [65536, 32768] one-hot, 2^31 elements, held with its transpose.
TEST(MemoryBound, PricesTheGradientGraphOfTheCaseThatRanCIOutOfMemory) {
  GraphBuilder b("embedding_case");
  const TensorType table{DType::f32, {32768, 2}};
  const TensorType positions{DType::i32, {16384, 4, 1}};
  {
    TracingScope scope(b);
    b.output("out", embedding(b.input("table", table), b.input("positions", positions)));
  }
  GraphCase c{b.take(), {}, {}};
  c.inputs.emplace("table", HostTensor::filled(table, 0.5));
  c.inputs.emplace("positions", HostTensor::filled(positions, 3));

  const GraphCost forward = graph_cost(c.graph);
  EXPECT_TRUE(within_memory_bound(forward)) << forward.value_bytes;
  const GraphCost priced = directional_gradient_cost(c, 1);
  const std::int64_t one_hot_bytes = (std::int64_t{1} << 31) * 8;
  EXPECT_GE(priced.value_bytes, 2 * one_hot_bytes) << "the one-hot and its transpose";
  EXPECT_FALSE(within_memory_bound(priced)) << priced.value_bytes;
}

}  // namespace
}  // namespace tg::testing
