// Learning-rate schedules: each shape at its boundaries and against PyTorch's recursive update rules
// written out here, warmup, rebasing (set_lr) and the errors that name the schedule and field.
#include "tensorgrad/train/schedule.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <numbers>
#include <string>

#include "tensorgrad/ir/error.h"

namespace tg {
namespace {

TEST(Schedule, ConstantIsANumber) {
  const Schedule s = 0.25;
  for (std::int64_t step : {1, 2, 1000}) EXPECT_EQ(lr_at(s, step), 0.25);
  EXPECT_EQ(s, Schedule(lr::Constant{0.25}));
}

TEST(Schedule, LinearGoesFromPeakToFinalInEqualStepsThenStays) {
  const Schedule s = lr::Linear{.peak = 1.0, .final = 0.2, .steps = 4};
  EXPECT_DOUBLE_EQ(lr_at(s, 1), 1.0);
  EXPECT_DOUBLE_EQ(lr_at(s, 2), 0.8);
  EXPECT_DOUBLE_EQ(lr_at(s, 3), 0.6);
  EXPECT_DOUBLE_EQ(lr_at(s, 5), 0.2);
  EXPECT_DOUBLE_EQ(lr_at(s, 50), 0.2);
  // PyTorch's LinearLR(start_factor=1, end_factor=final/peak), stepped recursively.
  double lr = 1.0;
  const double start = 1.0;
  const double end = 0.2;
  for (std::int64_t e = 1; e <= 4; ++e) {
    lr *= 1.0 + (end - start) / (4 * start + static_cast<double>(e - 1) * (end - start));
    EXPECT_NEAR(lr_at(s, e + 1), lr, 1e-15) << "epoch " << e;
  }
}

TEST(Schedule, CosineAnnealingFollowsTheHalfCosineAndHoldsFinal) {
  const Schedule s = lr::CosineAnnealing{.peak = 0.1, .final = 0.01, .steps = 10};
  EXPECT_DOUBLE_EQ(lr_at(s, 1), 0.1);
  EXPECT_DOUBLE_EQ(lr_at(s, 6), (0.1 + 0.01) / 2);
  EXPECT_DOUBLE_EQ(lr_at(s, 11), 0.01);
  EXPECT_DOUBLE_EQ(lr_at(s, 30), 0.01) << "holds final instead of rising again";
  // CosineAnnealingLR's recursive rule, epochs 1..steps.
  double lr = 0.1;
  for (std::int64_t e = 1; e <= 10; ++e) {
    const double pi = std::numbers::pi;
    lr = (1 + std::cos(pi * static_cast<double>(e) / 10)) / (1 + std::cos(pi * static_cast<double>(e - 1) / 10)) *
             (lr - 0.01) +
         0.01;
    EXPECT_NEAR(lr_at(s, e + 1), lr, 1e-15) << "epoch " << e;
  }
}

TEST(Schedule, StaircaseMultipliesByGammaEveryNSteps) {
  const Schedule s = lr::Staircase{.peak = 1.0, .every = 3, .gamma = 0.5};
  double lr = 1.0;  // StepLR: lr *= gamma when the epoch is a multiple of step_size
  for (std::int64_t step = 1; step <= 20; ++step) {
    const std::int64_t epoch = step - 1;
    if (epoch > 0 && epoch % 3 == 0) lr *= 0.5;
    EXPECT_DOUBLE_EQ(lr_at(s, step), lr) << "step " << step;
  }
  EXPECT_DOUBLE_EQ(lr_at(s, 3), 1.0);
  EXPECT_DOUBLE_EQ(lr_at(s, 4), 0.5);
}

TEST(Schedule, MultiStepCountsMilestonesPassedAndRepeatedOnes) {
  const Schedule s = lr::MultiStep{.peak = 1.0, .milestones = {2, 5, 5}, .gamma = 0.1};
  EXPECT_DOUBLE_EQ(lr_at(s, 1), 1.0);
  EXPECT_DOUBLE_EQ(lr_at(s, 2), 1.0);
  EXPECT_DOUBLE_EQ(lr_at(s, 3), 0.1);  // epoch 2 reached the first milestone
  EXPECT_DOUBLE_EQ(lr_at(s, 5), 0.1);
  EXPECT_NEAR(lr_at(s, 6), 0.001, 1e-18);  // epoch 5 counts twice
  EXPECT_NEAR(lr_at(s, 100), 0.001, 1e-18);
  EXPECT_DOUBLE_EQ(lr_at(lr::MultiStep{.peak = 2.0, .milestones = {}, .gamma = 0.1}, 9), 2.0);
}

TEST(Schedule, WarmupRampsLinearlyThenHandsOverToItsAfterSchedule) {
  const Schedule s = lr::warmup({.peak = 0.4, .steps = 4}, lr::CosineAnnealing{.peak = 0.4, .final = 0.0, .steps = 2});
  EXPECT_DOUBLE_EQ(lr_at(s, 1), 0.1);
  EXPECT_DOUBLE_EQ(lr_at(s, 2), 0.2);
  EXPECT_DOUBLE_EQ(lr_at(s, 4), 0.4);
  EXPECT_DOUBLE_EQ(lr_at(s, 5), 0.4) << "the after schedule's step 1";
  EXPECT_DOUBLE_EQ(lr_at(s, 6), 0.2);
  EXPECT_DOUBLE_EQ(lr_at(s, 7), 0.0);
  const Schedule constant_after = lr::warmup({.peak = 1.0, .steps = 2});
  EXPECT_DOUBLE_EQ(lr_at(constant_after, 1), 0.5);
  EXPECT_DOUBLE_EQ(lr_at(constant_after, 99), 1.0);
  EXPECT_THROW(lr::warmup({.peak = 1.0, .steps = 2}, constant_after), Error);
}

TEST(Schedule, RebasedStartsAtTheNextTrainingStep) {
  const Schedule s = lr::warmup({.peak = 1.0, .steps = 3}, lr::Staircase{.peak = 1.0, .every = 2, .gamma = 0.5});
  const Schedule r = rebased(s, 100);
  for (std::int64_t k = 1; k <= 12; ++k) EXPECT_EQ(lr_at(r, 100 + k), lr_at(s, k)) << "k " << k;
  EXPECT_THROW(lr_at(r, 100), Error) << "before its step 1";
  EXPECT_EQ(lr_at(rebased(r, 5), 107), lr_at(s, 2)) << "rebasing composes";
  const Schedule constant = 0.5;
  EXPECT_EQ(rebased(constant, 100), constant);
  EXPECT_EQ(lr_at(rebased(constant, 100), 3), 0.5);
  EXPECT_THROW(rebased(s, -1), Error);
}

TEST(Schedule, OptimizerStepInputsFeedTheScheduledRate) {
  const Schedule s = lr::Linear{.peak = 0.5, .final = 0.1, .steps = 2};
  const TensorMap sgd = optimizer_step_inputs({.kind = SgdConfig{}}, s, 2);
  ASSERT_EQ(sgd.size(), 1u);
  EXPECT_EQ(sgd.at(kLrInput).type, (TensorType{DType::f32, {}}));
  EXPECT_DOUBLE_EQ(sgd.at(kLrInput).at(0), 0.3);
  const TensorMap adam = optimizer_step_inputs({.kind = AdamConfig{.beta1 = 0.5}}, s, 1);
  EXPECT_DOUBLE_EQ(adam.at(kStepSizeInput).at(0), 0.5 / (1 - 0.5));
}

void expect_error(const std::function<void()>& f, const std::string& fragment) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one mentioning '" << fragment << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

TEST(Schedule, BadParametersNameTheScheduleAndField) {
  expect_error([] { lr_at(-0.1, 1); }, "lr schedule constant: lr must be >= 0");
  expect_error([] { lr_at(lr::Linear{.peak = 1, .final = 0, .steps = -5}, 1); },
               "lr schedule linear: steps must be >= 1");
  expect_error([] { lr_at(lr::Linear{.peak = -1, .final = 0, .steps = 5}, 1); },
               "lr schedule linear: peak must be >= 0");
  expect_error([] { lr_at(lr::CosineAnnealing{.peak = 1, .final = std::nan(""), .steps = 5}, 1); },
               "lr schedule cosine_annealing: final must be >= 0");
  expect_error([] { lr_at(lr::Staircase{.peak = 1, .every = 0, .gamma = 0.5}, 1); },
               "lr schedule staircase: every must be >= 1");
  expect_error([] { lr_at(lr::Staircase{.peak = 1, .every = 2, .gamma = 0}, 1); },
               "lr schedule staircase: gamma must be > 0");
  expect_error(
      [] {
        lr_at(lr::MultiStep{.peak = 1, .milestones = {5, 3}, .gamma = 0.1}, 1);
      },
      "lr schedule multi_step: milestones[1] must not be less than the one before it (5), got 3");
  expect_error([] { lr_at(lr::MultiStep{.peak = 1, .milestones = {-1}, .gamma = 0.1}, 1); },
               "lr schedule multi_step: milestones[0] must be >= 0");
  expect_error([] { lr_at(lr::MultiStep{.peak = 1, .milestones = {1}, .gamma = -2}, 1); },
               "lr schedule multi_step: gamma must be > 0");
  expect_error([] { lr::warmup({.peak = 1, .steps = 0}); }, "lr schedule warmup: steps must be >= 1");
  expect_error([] { lr_at(0.1, 0); }, "step 0 comes before the schedule's step 1");
}

}  // namespace
}  // namespace tg
