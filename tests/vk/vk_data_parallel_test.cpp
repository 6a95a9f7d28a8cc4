// Data parallel (TrainingSpec::communicator) on Vulkan, ranks as threads each with its own device
// context: the ranks hold the same bits after every step and follow one process accumulating their
// micro-batches; a rank whose backend computes other bits (interp_f32 beside Vulkan) is caught by
// the params check. tests/unit/data_parallel_test.cpp checks the protocol on interp_f32.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <exception>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "support/data_parallel.h"
#include "support/library.h"
#include "tensorgrad/train/communicator.h"
#include "tensorgrad/train/training.h"
#include "vk_test_support.h"

namespace tg::vk {
namespace {

using testing::VkTest;
using tg::testing::run_ranks;

struct Mlp : Module {
  Linear l1{*this, "l1", 6, 64};
  Linear l2{*this, "l2", 64, 4};
};

Tensor mlp_loss(const Mlp& m, const Inputs& in) { return cross_entropy(m.l2(relu(m.l1(in.at("x")))), in.at("label")); }

constexpr std::int64_t kRows = 48;

TensorMap rows_of(int step, std::int64_t first, std::int64_t rows) {
  return tg::testing::classification_rows(step, first, rows, 6, 4);
}

Training compile_mlp(const Mlp& model, Backend backend, std::int64_t rows, int micro_batches,
                     std::shared_ptr<Communicator> comm, std::shared_ptr<Context> ctx, int check_interval = 100,
                     std::uint64_t bucket_bytes = kDefaultReduceBucketBytes) {
  return compile(TrainingSpec<Mlp>{.model = model,
                                   .loss = mlp_loss,
                                   .inputs = {{"x", {{rows, 6}}}, {"label", {{rows}, DType::i32}}},
                                   .optimizer = {.kind = AdamConfig{}},
                                   .lr = 0.01,
                                   .backend = backend,
                                   .seed = 3,
                                   .vk_context = std::move(ctx),
                                   .micro_batches = micro_batches,
                                   .communicator = std::move(comm),
                                   .params_check_interval = check_interval,
                                   .reduce_bucket_bytes = bucket_bytes});
}

std::vector<float> flat(const ParamValues& params) {
  std::vector<float> out;
  for (const auto& [name, values] : params) out.insert(out.end(), values.begin(), values.end());
  return out;
}

TEST_F(VkTest, DataParallelRanksStayIdenticalAndFollowOneProcess) {
  constexpr int kRanks = 3;
  const Mlp model;
  auto single_ctx = make_context();
  Training single = compile_mlp(model, Backend::vulkan, kRows, kRanks, nullptr, single_ctx);
  std::vector<double> losses;
  for (int step = 0; step < 3; ++step) {
    const StepResult r = single.step(rows_of(step, 0, kRows));
    ASSERT_TRUE(r.ok()) << r.failure().message;
    losses.push_back(r.loss());
  }
  const std::vector<float> expected = flat(single.download_params());
  std::vector<std::shared_ptr<Context>> contexts;
  for (int r = 0; r < kRanks; ++r) contexts.push_back(make_context());
  run_ranks(kRanks, [&](int rank, std::shared_ptr<Communicator> comm) {
    const Mlp mine;
    constexpr std::int64_t rows = kRows / kRanks;
    Training train =
        compile_mlp(mine, Backend::vulkan, rows, 1, comm, contexts[static_cast<std::size_t>(rank)], /*check=*/1);
    for (int step = 0; step < 3; ++step) {
      const StepResult r = train.step(rows_of(step, rank * rows, rows));
      ASSERT_TRUE(r.ok()) << r.failure().message;  // checked after every step: the ranks agree
      EXPECT_NEAR(r.loss(), losses[static_cast<std::size_t>(step)], 1e-5) << "rank " << rank;
    }
    const std::vector<float> params = flat(train.download_params());
    const auto all = comm->all_gather(std::as_bytes(std::span(params)));
    for (const auto& other : all) EXPECT_EQ(other, all[0]) << "rank " << rank;
    for (std::size_t i = 0; i < params.size(); ++i) EXPECT_NEAR(params[i], expected[i], 1e-4) << i;
  });
  for (const auto& ctx : contexts) EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

// Buckets of 64 bytes: the grad session reads back in segments and the ranks sum each gradient
// while the rest of the backward runs, with the bits of one sum after the backward.
TEST_F(VkTest, DataParallelSumsDuringTheBackwardGiveTheBitsOfOneSum) {
  std::vector<std::shared_ptr<Context>> contexts = {make_context(), make_context()};
  run_ranks(2, [&](int rank, std::shared_ptr<Communicator> comm) {
    const auto ctx = contexts[static_cast<std::size_t>(rank)];
    const Mlp a, b;
    Training buckets = compile_mlp(a, Backend::vulkan, 24, 1, comm, ctx, /*check=*/1, /*bucket_bytes=*/64);
    Training one_sum = compile_mlp(b, Backend::vulkan, 24, 1, comm, ctx, /*check=*/1, /*bucket_bytes=*/0);
    for (int step = 0; step < 3; ++step) {
      const StepResult r1 = buckets.step(rows_of(step, rank * 24, 24));
      const StepResult r2 = one_sum.step(rows_of(step, rank * 24, 24));
      ASSERT_TRUE(r1.ok() && r2.ok()) << (r1.ok() ? r2.failure().message : r1.failure().message);
      EXPECT_EQ(r1.loss(), r2.loss()) << "rank " << rank << " step " << step;
    }
    EXPECT_EQ(flat(buckets.download_params()), flat(one_sum.download_params())) << "rank " << rank;
  });
  for (const auto& ctx : contexts) EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

TEST_F(VkTest, DataParallelFailuresReachEveryRank) {
  std::vector<std::shared_ptr<Context>> contexts = {make_context(), make_context()};
  run_ranks(2, [&](int rank, std::shared_ptr<Communicator> comm) {
    const Mlp mine;
    Training train =
        compile_mlp(mine, Backend::vulkan, 24, 1, comm, contexts[static_cast<std::size_t>(rank)], /*check=*/1);
    ASSERT_TRUE(train.step(rows_of(0, rank * 24, 24)).ok());
    const std::vector<float> before = flat(train.download_params());
    // A NaN loss on rank 1 alone: every rank fails, none updates.
    TensorMap data = rows_of(1, rank * 24, 24);
    if (rank == 1) data.insert_or_assign("x", HostTensor::f32({24, 6}, std::vector<float>(24 * 6, NAN)));
    StepResult r = train.step(data);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.failure().kind, "nonfinite");
    EXPECT_NE(r.failure().message.find("rank 1 of 2"), std::string::npos) << r.failure().message;
    EXPECT_EQ(flat(train.download_params()), before) << "rank " << rank;
    // Rank 1 alone changes its learning rate: the params check after the next step sees it.
    if (rank == 1) train.set_lr(0.3);
    r = train.step(rows_of(1, rank * 24, 24));
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.failure().kind, "diverged") << r.failure().message;
  });
  for (const auto& ctx : contexts) EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

// The grad session's params come from the update session by Session::copy_params_from: a device
// copy on one context, checked by name and type.
TEST_F(VkTest, SessionCopiesParamsOnTheDevice) {
  auto ctx = make_context();
  const auto make = [&](std::int64_t n) {
    GraphBuilder b("copy");
    Tensor w;
    {
      TracingScope scope(b);
      w = b.input("w", {DType::f32, {n}}, InputKind::param);
      b.output("y", w * 2.0);
    }
    return Session(b.take(), SessionOptions{.backend = Backend::vulkan, .vk_context = ctx});
  };
  Session source = make(1000), target = make(1000), other = make(7);
  std::vector<float> values(1000);
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i) * 0.25f - 3.0f;
  source.set_param("w", HostTensor::f32({1000}, values));
  EXPECT_THROW(target.copy_params_from(other, {"w"}), RuntimeError);  // [7] into [1000]
  EXPECT_THROW(target.copy_params_from(source, {"nope"}), RuntimeError);
  target.copy_params_from(source, {"w"});
  EXPECT_EQ(target.param("w").to_f32(), values);
  const RunResult r = target.run({});
  ASSERT_TRUE(r.ok()) << r.failure().message;
  EXPECT_EQ(r.output("y").to_f32()[5], values[5] * 2.0f);
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

}  // namespace
}  // namespace tg::vk
