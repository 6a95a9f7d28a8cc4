// Data-parallel training over MPI (TrainingSpec::communicator = MpiCommunicator), on every rank of
// the job (tg_mpi_tests runs on 2 and 3 ranks): on interp_f32 the ranks give the bits of one
// process accumulating their micro-batches, on Vulkan (lavapipe in CI) they stay identical and
// follow it, and a failure on one rank fails the step on every rank with nothing applied.
// Checks are EXPECT_* before any later collective: an ASSERT returning on one rank would strand
// the others in it.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "support/data_parallel.h"
#include "tensorgrad/distributed/mpi.h"
#include "tensorgrad/train/nn.h"
#include "tensorgrad/train/training.h"
#include "tensorgrad/vk/device.h"

namespace tg {
namespace {

constexpr std::int64_t kRowsPerRank = 8;
constexpr std::int64_t kIn = 5, kHidden = 16, kClasses = 3;

struct Classifier : Module {
  Linear l1{*this, "l1", kIn, kHidden};
  Linear l2{*this, "l2", kHidden, kClasses};
};

Tensor classifier_loss(const Classifier& m, const Inputs& in) {
  return cross_entropy(m.l2(dropout(tanh(m.l1(in.at("x"))), 0.2)), in.at("label"));
}

TensorMap batch(int step, std::int64_t first, std::int64_t rows) {
  return testing::classification_rows(step, first, rows, kIn, kClasses);
}

Training compile_classifier(const Classifier& model, Backend backend, std::int64_t rows, int micro_batches,
                            std::shared_ptr<Communicator> comm,
                            std::uint64_t reduce_bucket_bytes = kDefaultReduceBucketBytes) {
  return compile(TrainingSpec<Classifier>{.model = model,
                                          .loss = classifier_loss,
                                          .inputs = {{"x", {{rows, kIn}}}, {"label", {{rows}, DType::i32}}},
                                          .optimizer = {.kind = AdamConfig{}},
                                          .lr = 0.02,
                                          .backend = backend,
                                          .seed = 5,
                                          .interp_threads = 1,  // ranks x threads near the cores
                                          .micro_batches = micro_batches,
                                          .communicator = std::move(comm),
                                          .params_check_interval = 1,
                                          .reduce_bucket_bytes = reduce_bucket_bytes});
}

std::vector<float> flat(const ParamValues& params) {
  std::vector<float> out;
  for (const auto& [name, values] : params) out.insert(out.end(), values.begin(), values.end());
  return out;
}

// Whether every rank holds these exact values.
bool same_on_every_rank(Communicator& comm, const std::vector<float>& values) {
  const auto all = comm.all_gather(std::as_bytes(std::span(values)));
  for (const auto& other : all)
    if (other != all[0]) return false;
  return true;
}

// One rank's steps against one process accumulating every rank's micro-batch in rank order. The
// gradients are summed in buckets of 64 bytes (several per step; on Vulkan during the backward).
void train_and_compare(Backend backend, bool bits) {
  const auto comm = distributed::MpiCommunicator::world();
  const int ranks = comm->size();
  const Classifier reference_model, model;
  Training reference = compile_classifier(reference_model, backend, kRowsPerRank * ranks, ranks, nullptr);
  Training train = compile_classifier(model, backend, kRowsPerRank, 1, comm, /*reduce_bucket_bytes=*/64);
  for (int step = 0; step < 3; ++step) {
    const StepResult expected = reference.step(batch(step, 0, kRowsPerRank * ranks));
    const StepResult got = train.step(batch(step, comm->rank() * kRowsPerRank, kRowsPerRank));
    EXPECT_TRUE(expected.ok() && got.ok()) << (got.ok() ? "" : got.failure().message);
    if (!expected.ok() || !got.ok()) continue;
    if (bits) {
      EXPECT_EQ(got.loss(), expected.loss()) << "step " << step;
    } else {
      EXPECT_NEAR(got.loss(), expected.loss(), 1e-5) << "step " << step;
    }
  }
  const std::vector<float> mine = flat(train.download_params()), theirs = flat(reference.download_params());
  EXPECT_TRUE(same_on_every_rank(*comm, mine)) << comm->describe();
  ASSERT_EQ(mine.size(), theirs.size());
  for (std::size_t i = 0; i < mine.size(); ++i) {
    if (bits) {
      EXPECT_EQ(mine[i], theirs[i]) << i;
    } else {
      EXPECT_NEAR(mine[i], theirs[i], 1e-4) << i;
    }
  }
  EXPECT_EQ(train.steps(), 3);
}

TEST(MpiTraining, RanksGiveTheBitsOfOneProcessOnInterpF32) { train_and_compare(Backend::interp_f32, true); }

TEST(MpiTraining, RanksStayIdenticalOnVulkan) {
  // Every rank sees the same device list (the same machine, or the same driver everywhere), so
  // every rank skips alike.
  bool usable = false;
  for (const vk::DeviceInfo& d : vk::list_devices()) usable = usable || d.usable;
  if (!usable) GTEST_SKIP() << "no usable Vulkan device";
  train_and_compare(Backend::vulkan, false);
}

TEST(MpiTraining, AFailureOnOneRankFailsEveryRankAndChangesNothing) {
  const auto comm = distributed::MpiCommunicator::world();
  const Classifier model;
  Training train = compile_classifier(model, Backend::interp_f32, kRowsPerRank, 1, comm);
  const StepResult first = train.step(batch(0, comm->rank() * kRowsPerRank, kRowsPerRank));
  EXPECT_TRUE(first.ok()) << (first.ok() ? "" : first.failure().message);
  const std::vector<float> before = flat(train.download_params());
  TensorMap data = batch(1, comm->rank() * kRowsPerRank, kRowsPerRank);
  const int bad = comm->size() - 1;  // the last rank's loss is NaN
  if (comm->rank() == bad)
    data.insert_or_assign("x", HostTensor::f32({kRowsPerRank, kIn}, std::vector<float>(kRowsPerRank * kIn, NAN)));
  const StepResult r = train.step(data);
  EXPECT_FALSE(r.ok());
  if (!r.ok()) {
    EXPECT_EQ(r.failure().kind, "nonfinite");
    const std::string who = "rank " + std::to_string(bad) + " of " + std::to_string(comm->size());
    EXPECT_NE(r.failure().message.find(who), std::string::npos) << r.failure().message;
  }
  EXPECT_EQ(flat(train.download_params()), before);
  EXPECT_EQ(train.steps(), 1);
  const StepResult next = train.step(batch(1, comm->rank() * kRowsPerRank, kRowsPerRank));
  EXPECT_TRUE(next.ok()) << (next.ok() ? "" : next.failure().message);
  EXPECT_EQ(train.steps(), 2);
}

}  // namespace
}  // namespace tg
