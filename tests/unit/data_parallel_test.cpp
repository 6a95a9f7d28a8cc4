// Data-parallel training (TrainingSpec::communicator) with ranks as threads of this process
// (make_thread_group): W ranks with one micro-batch each give the bits of one process accumulating
// W micro-batches over the same rows, the params stay the same bits on every rank, and every
// failure (bad data or a NaN loss on one rank, an overflow under loss scaling, a rank whose update
// differs) is seen alike by every rank with nothing applied; an update that fails on one rank alone
// is reported alike as diverged, and rank 0's params start the next step. tests/mpi/ runs the same protocol
// over MPI processes; tests/vk/vk_data_parallel_test.cpp on Vulkan.
#include "support/data_parallel.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <exception>
#include <fstream>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "tensorgrad/train/communicator.h"
#include "tensorgrad/train/nn.h"
#include "tensorgrad/train/training.h"

namespace tg {
namespace {

using testing::run_ranks;

constexpr std::int64_t kRows = 24;  // the global batch: 1, 2, 3, 4 and 6 ranks divide it
constexpr std::int64_t kIn = 5, kHidden = 12, kClasses = 3;

struct Classifier : Module {
  Linear l1{*this, "l1", kIn, kHidden};
  Linear l2{*this, "l2", kHidden, kClasses};
};

Tensor classifier_loss(const Classifier& m, const Inputs& in) {
  const Tensor h = dropout(tanh(m.l1(in.at("x"))), 0.25);
  return cross_entropy(m.l2(h), in.at("label"));
}

InputSpecs inputs_of(std::int64_t rows) { return {{"x", {{rows, kIn}}}, {"label", {{rows}, DType::i32}}}; }

TensorMap batch(int step, std::int64_t first, std::int64_t rows) {
  return testing::classification_rows(step, first, rows, kIn, kClasses);
}

struct Options {
  int micro_batches = 1;
  int params_check_interval = 100;
  PrecisionPolicy precision;
  std::uint64_t reduce_bucket_bytes = kDefaultReduceBucketBytes;
};

Training compile_classifier(const Classifier& model, std::int64_t rows, std::shared_ptr<Communicator> comm,
                            const Options& options = {}) {
  return compile(TrainingSpec<Classifier>{.model = model,
                                          .loss = classifier_loss,
                                          .inputs = inputs_of(rows),
                                          .optimizer = {.kind = AdamConfig{}},
                                          .lr = 0.02,
                                          .backend = Backend::interp_f32,
                                          .seed = 5,
                                          .precision = options.precision,
                                          .micro_batches = options.micro_batches,
                                          .communicator = std::move(comm),
                                          .params_check_interval = options.params_check_interval,
                                          .reduce_bucket_bytes = options.reduce_bucket_bytes});
}

bool same_bits(const ParamValues& a, const ParamValues& b) {
  if (a.size() != b.size()) return false;
  for (const auto& [name, values] : a) {
    const auto it = b.find(name);
    if (it == b.end() || it->second.size() != values.size()) return false;
    if (std::memcmp(values.data(), it->second.data(), values.size() * sizeof(float)) != 0) return false;
  }
  return true;
}

TEST(ThreadGroup, SumsInRankOrderAndGathers) {
  // 1e8 + 1 - 1e8 in f32 is 0 in rank order ((1e8 + 1) rounds to 1e8), 1 in another order.
  run_ranks(3, [](int rank, std::shared_ptr<Communicator> comm) {
    std::vector<float> values = {rank == 0 ? 1e8f : rank == 1 ? 1.0f : -1e8f, static_cast<float>(rank)};
    comm->sum_in_rank_order(values);
    EXPECT_EQ(values[0], 0.0f);
    EXPECT_EQ(values[1], 3.0f);
    const std::vector<std::byte> mine(static_cast<std::size_t>(rank), std::byte{static_cast<unsigned char>(rank)});
    const auto all = comm->all_gather(mine);
    ASSERT_EQ(all.size(), 3u);
    for (std::size_t r = 0; r < 3; ++r) EXPECT_EQ(all[r].size(), r);
    std::vector<std::byte> root =
        rank == 2 ? std::vector<std::byte>{std::byte{7}, std::byte{9}} : std::vector<std::byte>{};
    comm->broadcast(root, 2);
    EXPECT_EQ(root, (std::vector<std::byte>{std::byte{7}, std::byte{9}}));
  });
  EXPECT_THROW(make_thread_group(0), Error);
}

// Long enough that each rank's share splits into several of the sum's TBB blocks (2^16 elements),
// with shares that are not a multiple of them: the same bits as a serial rank-order sum.
TEST(ThreadGroup, LongSumsMatchASerialRankOrderSum) {
  constexpr std::size_t kLength = 3 * 65536 * 2 + 12345;
  const auto values_of = [](int rank) {
    std::vector<float> v(kLength);
    for (std::size_t i = 0; i < kLength; ++i) {
      v[i] = (i + static_cast<std::size_t>(rank)) % 3 == 0 ? 1e8f : std::sin(static_cast<float>(i * 7 + rank));
    }
    return v;
  };
  std::vector<float> expected = values_of(0);
  for (int r = 1; r < 3; ++r) {
    const std::vector<float> other = values_of(r);
    for (std::size_t i = 0; i < kLength; ++i) expected[i] += other[i];
  }
  run_ranks(3, [&](int rank, std::shared_ptr<Communicator> comm) {
    std::vector<float> mine = values_of(rank);
    comm->sum_in_rank_order(mine);
    EXPECT_EQ(std::memcmp(mine.data(), expected.data(), kLength * sizeof(float)), 0) << "rank " << rank;
  });
}

TEST(DataParallel, RanksGiveTheBitsOfOneProcessAccumulatingTheirMicroBatches) {
  const Classifier model;
  for (const int ranks : {2, 3}) {
    Training single = compile_classifier(model, kRows, nullptr, {.micro_batches = ranks});
    std::vector<double> single_losses;
    for (int step = 0; step < 4; ++step) {
      const StepResult r = single.step(batch(step, 0, kRows));
      ASSERT_TRUE(r.ok()) << r.failure().message;
      single_losses.push_back(r.loss());
    }
    const ParamValues expected = single.download_params();
    const TensorMap expected_state = single.download_optimizer_state();
    run_ranks(ranks, [&](int rank, std::shared_ptr<Communicator> comm) {
      const Classifier mine;
      const std::int64_t rows = kRows / ranks;
      // 3 ranks sum every gradient as a bucket of its own (4 bytes), 2 ranks all in one.
      Training train = compile_classifier(mine, rows, comm, {.reduce_bucket_bytes = ranks == 3 ? 4u : 0u});
      for (int step = 0; step < 4; ++step) {
        const StepResult r = train.step(batch(step, rank * rows, rows));
        ASSERT_TRUE(r.ok()) << r.failure().message;
        // Dropout draws each rank's stream as the single process draws its micro-batch's.
        EXPECT_EQ(r.loss(), single_losses[static_cast<std::size_t>(step)]) << "rank " << rank << " step " << step;
      }
      EXPECT_TRUE(same_bits(train.download_params(), expected)) << ranks << " ranks, rank " << rank;
      const TensorMap state = train.download_optimizer_state();
      for (const auto& [name, value] : expected_state) {
        EXPECT_EQ(state.at(name).to_f32(), value.to_f32()) << name << ", rank " << rank;
      }
      EXPECT_EQ(train.steps(), 4);
    });
  }
}

TEST(DataParallel, MicroBatchesPerRankMatchOneProcessWithinRounding) {
  const Classifier model;
  Training single = compile_classifier(model, kRows, nullptr, {.micro_batches = 6});
  for (int step = 0; step < 3; ++step) ASSERT_TRUE(single.step(batch(step, 0, kRows)).ok());
  const ParamValues expected = single.download_params();
  run_ranks(2, [&](int rank, std::shared_ptr<Communicator> comm) {
    const Classifier mine;
    Training train = compile_classifier(mine, kRows / 2, comm, {.micro_batches = 3});
    for (int step = 0; step < 3; ++step) {
      const StepResult r = train.step(batch(step, rank * kRows / 2, kRows / 2));
      ASSERT_TRUE(r.ok()) << r.failure().message;
    }
    // (sum of 3) / 3 per rank, then (sum of 2) / 2, against (sum of 6) / 6: a few f32 roundings of
    // the gradients, which Adam's normalised steps of 0.02 turn into at most ~1e-6 on the params.
    for (const auto& [name, values] : train.download_params()) {
      for (std::size_t i = 0; i < values.size(); ++i) EXPECT_NEAR(values[i], expected.at(name)[i], 2e-5) << name;
    }
  });
}

TEST(DataParallel, AFailureOnOneRankFailsTheStepOnEveryRankAndChangesNothing) {
  run_ranks(3, [](int rank, std::shared_ptr<Communicator> comm) {
    const Classifier model;
    Training train = compile_classifier(model, 8, comm);
    ASSERT_TRUE(train.step(batch(0, rank * 8, 8)).ok());
    const ParamValues before = train.download_params();
    // Rank 1 forgets an input.
    TensorMap data = batch(1, rank * 8, 8);
    if (rank == 1) data.erase("label");
    StepResult r = train.step(data);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.failure().kind, "input");
    EXPECT_NE(r.failure().message.find("rank 1 of 3"), std::string::npos) << r.failure().message;
    EXPECT_NE(r.failure().message.find("missing input 'label'"), std::string::npos) << r.failure().message;
    // Rank 2's loss is NaN.
    data = batch(1, rank * 8, 8);
    if (rank == 2) data.insert_or_assign("x", HostTensor::f32({8, kIn}, std::vector<float>(8 * kIn, NAN)));
    r = train.step(data);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.failure().kind, "nonfinite");
    EXPECT_NE(r.failure().message.find("rank 2 of 3"), std::string::npos) << r.failure().message;
    EXPECT_TRUE(same_bits(train.download_params(), before)) << "rank " << rank;
    EXPECT_EQ(train.steps(), 1);
    // And the next good step goes through everywhere.
    ASSERT_TRUE(train.step(batch(1, rank * 8, 8)).ok());
    EXPECT_EQ(train.steps(), 2);
  });
}

struct Regressor : Module {
  Linear l1{*this, "l1", kIn, 1};
};

Tensor regressor_loss(const Regressor& m, const Inputs& in) {
  const Tensor r = m.l1(in.at("x")) - in.at("y");
  return mean(r * r);
}

TensorMap regression_batch(float x_value) {
  std::vector<float> x(8 * kIn), y(8);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = x_value * static_cast<float>(static_cast<int>(i % 7) - 3) / 3.0f;
  for (std::size_t i = 0; i < y.size(); ++i) y[i] = static_cast<float>(i % 3) - 1.0f;
  return {{"x", HostTensor::f32({8, kIn}, x)}, {"y", HostTensor::f32({8, 1}, y)}};
}

// x = 1000 on rank 1 alone: its f16 forward is finite, but its gradient of l1.W (x^T times the
// scaled residual, 2^16 * ~1e3 * 1e3) overflows f16, so every rank skips the update.
TEST(DataParallel, AnOverflowOnOneRankSkipsTheUpdateOnEveryRank) {
  run_ranks(2, [](int rank, std::shared_ptr<Communicator> comm) {
    const Regressor model;
    Training train = compile(TrainingSpec<Regressor>{.model = model,
                                                     .loss = regressor_loss,
                                                     .inputs = {{"x", {{8, kIn}}}, {"y", {{8, 1}}}},
                                                     .optimizer = {.kind = AdamConfig{}},
                                                     .lr = 1e-2,
                                                     .seed = 11,
                                                     .precision = {.compute = DType::f16},
                                                     .communicator = comm});
    ASSERT_TRUE(train.step(regression_batch(0.5f)).ok());
    ASSERT_FALSE(train.last_step_skipped());
    const ParamValues before = train.download_params();
    const double scale = train.loss_scale();
    const StepResult r = train.step(regression_batch(rank == 1 ? 1000.0f : 0.5f));
    ASSERT_TRUE(r.ok()) << r.failure().message;
    EXPECT_TRUE(train.last_step_skipped()) << "rank " << rank;
    EXPECT_TRUE(same_bits(train.download_params(), before)) << "rank " << rank;
    EXPECT_EQ(train.loss_scale(), scale / 2) << "rank " << rank;
    EXPECT_EQ(train.steps(), 1);
  });
}

TEST(DataParallel, RankZerosParamsReachEveryRankAfterALocalChange) {
  run_ranks(2, [](int rank, std::shared_ptr<Communicator> comm) {
    const Classifier model;
    Training train = compile_classifier(model, 8, comm);
    // Only rank 1 uploads: rank 0's params are the truth, so the step starts from them.
    if (rank == 1) train.upload_params(TensorMap{{"l1.b", HostTensor::filled({DType::f32, {kHidden}}, 3.0)}});
    ASSERT_TRUE(train.step(batch(0, rank * 8, 8)).ok());
    const ParamValues mine = train.download_params();
    std::vector<float> flat;
    for (const auto& [name, values] : mine) flat.insert(flat.end(), values.begin(), values.end());
    const auto all = comm->all_gather(std::as_bytes(std::span(flat)));
    EXPECT_EQ(all[0], all[1]);
    EXPECT_LT(std::fabs(mine.at("l1.b")[0]), 1.0f);  // rank 0's zeros moved by one Adam step, not 3
  });
}

TEST(DataParallel, RanksWhoseUpdatesDifferAreReportedAsDiverged) {
  run_ranks(2, [](int rank, std::shared_ptr<Communicator> comm) {
    const Classifier model;
    Training train = compile_classifier(model, 8, comm, {.params_check_interval = 2});
    // A mistake the protocol cannot see: rank 1 alone changes its learning rate.
    if (rank == 1) train.set_lr(0.5);
    ASSERT_TRUE(train.step(batch(0, rank * 8, 8)).ok());  // not compared yet
    const StepResult r = train.step(batch(1, rank * 8, 8));
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.failure().kind, "diverged");
    EXPECT_NE(r.failure().message.find("rank 1 "), std::string::npos) << r.failure().message;
    // The next step starts from rank 0's params, so they agree again after it.
    ASSERT_TRUE(train.step(batch(2, rank * 8, 8)).ok());
  });
}

// Hands `inner`'s sums back as +inf on the one call after arm(): a rank whose reduced gradients
// arrived corrupted, the way a failing device or link would leave them on that rank alone.
class CorruptingCommunicator final : public Communicator {
 public:
  explicit CorruptingCommunicator(std::shared_ptr<Communicator> inner) : inner_(std::move(inner)) {}
  void arm() { armed_ = true; }
  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  void sum_in_rank_order(std::span<float> values) override {
    inner_->sum_in_rank_order(values);
    if (armed_) std::fill(values.begin(), values.end(), INFINITY);
    armed_ = false;
  }
  std::vector<std::vector<std::byte>> all_gather(std::span<const std::byte> bytes) override {
    return inner_->all_gather(bytes);
  }
  void broadcast(std::vector<std::byte>& bytes, int root) override { inner_->broadcast(bytes, root); }
  std::string describe() const override { return inner_->describe(); }

 private:
  std::shared_ptr<Communicator> inner_;
  bool armed_ = false;
};

// The update fails on rank 1 alone (its sums are infinite, so Adam's params are not finite), while
// rank 0 applies it: every rank reports the step as diverged naming rank 1, rank 1 keeps its params,
// and the next step starts every rank from rank 0's params and optimizer state, so they agree again.
TEST(DataParallel, AnUpdateThatFailsOnOneRankAloneIsReportedAsDivergedAndRankZeroWins) {
  run_ranks(2, [](int rank, std::shared_ptr<Communicator> comm) {
    const auto corrupting = std::make_shared<CorruptingCommunicator>(comm);
    const Classifier model;
    Training train = compile_classifier(model, 8, corrupting);
    ASSERT_TRUE(train.step(batch(0, rank * 8, 8)).ok());
    const ParamValues before = train.download_params();
    if (rank == 1) corrupting->arm();
    const StepResult r = train.step(batch(1, rank * 8, 8));
    ASSERT_FALSE(r.ok()) << "rank " << rank;
    EXPECT_EQ(r.failure().kind, "diverged") << r.failure().message;
    EXPECT_NE(r.failure().message.find("rank 1 "), std::string::npos) << r.failure().message;
    EXPECT_NE(r.failure().message.find("failed its update"), std::string::npos) << r.failure().message;
    EXPECT_NE(r.failure().message.find("the other ranks applied it"), std::string::npos) << r.failure().message;
    EXPECT_EQ(same_bits(train.download_params(), before), rank == 1) << "rank " << rank;
    ASSERT_TRUE(train.step(batch(2, rank * 8, 8)).ok()) << "rank " << rank;
    std::vector<float> flat;
    for (const auto& [name, values] : train.download_params()) flat.insert(flat.end(), values.begin(), values.end());
    for (const float v : flat) ASSERT_TRUE(std::isfinite(v)) << "rank " << rank;
    const auto all = comm->all_gather(std::as_bytes(std::span(flat)));
    EXPECT_EQ(all[0], all[1]);
  });
}

TEST(DataParallel, RefusesWhatItCannotRun) {
  const Classifier model;
  const auto group = make_thread_group(1);
  EXPECT_THROW(compile(TrainingSpec<Classifier>{.model = model,
                                                .loss = classifier_loss,
                                                .inputs = inputs_of(8),
                                                .backend = Backend::interp_f64,
                                                .communicator = group[0]}),
               CompileError);
  EXPECT_THROW(compile_classifier(model, 8, group[0], {.params_check_interval = -1}), CompileError);
  // Ranks compiling different shapes get a CompileError naming both, not a hang or garbage.
  run_ranks(2, [](int rank, std::shared_ptr<Communicator> comm) {
    const Classifier mine;
    try {
      (void)compile_classifier(mine, rank == 0 ? 8 : 6, comm);
      ADD_FAILURE() << "rank " << rank << " compiled";
    } catch (const CompileError& e) {
      EXPECT_NE(std::string(e.what()).find("rank 1 compiles"), std::string::npos) << e.what();
    }
  });
}

TEST(DataParallel, SavesOnRankZeroOnly) {
  const std::string dir = ::testing::TempDir();
  run_ranks(2, [&](int rank, std::shared_ptr<Communicator> comm) {
    const Classifier model;
    Training train = compile_classifier(model, 8, comm);
    ASSERT_TRUE(train.step(batch(0, rank * 8, 8)).ok());
    const std::string path = dir + "/dp_save_rank" + std::to_string(rank) + ".safetensors";
    std::remove(path.c_str());
    train.save(path);
    EXPECT_EQ(std::ifstream(path).good(), rank == 0) << path;
  });
}

}  // namespace
}  // namespace tg
