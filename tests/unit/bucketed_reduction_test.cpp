// The data-parallel step's bucketed sum (src/train/bucketed_reduction.h): the layout follows the
// nodes that produce the outputs and cuts buckets by bytes; a bucket is summed over the ranks once
// all its outputs are in, buckets in layout order; outputs never delivered count as zeros; and the
// bits are those of one sum over everything.
#include "train/bucketed_reduction.h"

#include <gtest/gtest.h>

#include <span>
#include <string>
#include <utility>
#include <vector>

#include "support/data_parallel.h"
#include "tensorgrad/ir/ops/api.h"

namespace tg::detail {
namespace {

// Outputs named in another order than their nodes: "d" (made last), "a" (first), "c" (second).
Graph three_outputs() {
  GraphBuilder b("grads");
  TracingScope scope(b);
  const Tensor x = b.input("x", {DType::f32, {4}});
  const Tensor a = x + 1.0;
  const Tensor c = x * 2.0;
  const Tensor d = a * c;
  b.output("d", d);
  b.output("a", a);
  b.output("c", c);
  return b.take();
}

const std::vector<std::string> kReduced = {"d", "a", "c"};

// One rank that records which floats of the buffer each sum covered.
class RecordingCommunicator : public Communicator {
 public:
  explicit RecordingCommunicator(const std::vector<float>& buffer) : buffer_(buffer) {}
  int rank() const override { return 0; }
  int size() const override { return 1; }
  void sum_in_rank_order(std::span<float> values) override {
    sums.emplace_back(static_cast<std::size_t>(values.data() - buffer_.data()), values.size());
  }
  std::vector<std::vector<std::byte>> all_gather(std::span<const std::byte> bytes) override {
    return {std::vector<std::byte>(bytes.begin(), bytes.end())};
  }
  void broadcast(std::vector<std::byte>&, int) override {}
  std::string describe() const override { return "rank 0 of 1 (recording)"; }
  std::vector<std::pair<std::size_t, std::size_t>> sums;  // (offset, floats)

 private:
  const std::vector<float>& buffer_;
};

HostTensor filled(float value) { return HostTensor::f32({4}, std::vector<float>(4, value)); }

TEST(BucketedReduction, LayoutFollowsTheProducingNodesAndCutsBucketsByBytes) {
  const Graph g = three_outputs();
  const ReduceLayout per_output = ReduceLayout::of(g, kReduced, 16);
  EXPECT_EQ(per_output.slots.at("a").offset, 0u);
  EXPECT_EQ(per_output.slots.at("c").offset, 4u);
  EXPECT_EQ(per_output.slots.at("d").offset, 8u);
  EXPECT_EQ(per_output.bucket_begin, (std::vector<std::size_t>{0, 4, 8, 12}));
  // A bucket closes once it holds at least the bucket's bytes: 17 bytes take two outputs.
  const ReduceLayout pairs = ReduceLayout::of(g, kReduced, 17);
  EXPECT_EQ(pairs.bucket_begin, (std::vector<std::size_t>{0, 8, 12}));
  EXPECT_EQ(pairs.outputs_in_bucket, (std::vector<std::size_t>{2, 1}));
  const ReduceLayout one = ReduceLayout::of(g, kReduced, 0);
  EXPECT_EQ(one.bucket_begin, (std::vector<std::size_t>{0, 12}));
  EXPECT_EQ(one.total, 12u);
}

TEST(BucketedReduction, SumsEachBucketOnceItIsCompleteInLayoutOrder) {
  const ReduceLayout layout = ReduceLayout::of(three_outputs(), kReduced, 16);
  std::vector<float> buffer;
  RecordingCommunicator comm(buffer);
  BucketedReduction reduction(layout, buffer, comm);
  reduction.deliver("c", filled(2.0f));  // bucket 1: waits for bucket 0
  EXPECT_TRUE(comm.sums.empty());
  reduction.deliver("capture.h", filled(9.0f));  // not reduced: ignored
  reduction.deliver("a", filled(1.0f));          // bucket 0 complete, and so is bucket 1
  EXPECT_EQ(comm.sums, (std::vector<std::pair<std::size_t, std::size_t>>{{0, 4}, {4, 4}}));
  reduction.finish();  // "d" never came (a failed run): summed as zeros
  EXPECT_EQ(comm.sums.size(), 3u);
  EXPECT_EQ(comm.sums.back(), (std::pair<std::size_t, std::size_t>{8, 4}));
  EXPECT_EQ(buffer, (std::vector<float>{1, 1, 1, 1, 2, 2, 2, 2, 0, 0, 0, 0}));
  reduction.finish();  // nothing left to sum
  EXPECT_EQ(comm.sums.size(), 3u);
}

TEST(BucketedReduction, RanksDeliveringInAnyOrderGetTheBitsOfOneSum) {
  const Graph g = three_outputs();
  const ReduceLayout buckets = ReduceLayout::of(g, kReduced, 16);
  const ReduceLayout one = ReduceLayout::of(g, kReduced, 0);
  // Values whose sum in rank order rounds differently from other orders.
  const std::vector<float> values = {1e8f, 1.0f, -1e8f};
  std::vector<std::vector<float>> results(2);
  tg::testing::run_ranks(3, [&](int rank, std::shared_ptr<Communicator> comm) {
    const float v = values[static_cast<std::size_t>(rank)];
    for (const ReduceLayout* layout : {&buckets, &one}) {
      std::vector<float> buffer;
      BucketedReduction reduction(*layout, buffer, *comm);
      // Each rank hands its outputs over in its own order; rank 2's run "fails" before "d".
      if (rank == 0) {
        for (const char* name : {"d", "c", "a"}) reduction.deliver(name, filled(v));
      } else if (rank == 1) {
        for (const char* name : {"a", "c", "d"}) reduction.deliver(name, filled(v));
      } else {
        for (const char* name : {"c", "a"}) reduction.deliver(name, filled(v));
      }
      reduction.finish();
      if (rank == 0) results[layout == &one ? 1 : 0] = buffer;
    }
  });
  const float with_rank2 = (1e8f + 1.0f) + -1e8f, without = 1e8f + 1.0f;
  EXPECT_EQ(results[0], results[1]);
  EXPECT_EQ(results[0], (std::vector<float>{with_rank2, with_rank2, with_rank2, with_rank2, with_rank2, with_rank2,
                                            with_rank2, with_rank2, without, without, without, without}));
}

}  // namespace
}  // namespace tg::detail
