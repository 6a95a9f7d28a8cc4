#pragma once
// Learning-rate schedules: plain values (not closures), so they can be stored, compared, rebased
// and sent anywhere. lr_at(schedule, step) gives the rate of training step `step`, where step 1 is
// the first; the shapes match PyTorch's schedulers stepped once after every optimizer step:
//
//   lr::Constant{lr}                          a fixed rate (a double converts to it)
//   lr::Linear{peak, final, steps}            LinearLR(start_factor=1, end_factor=final/peak, total_iters=steps)
//   lr::CosineAnnealing{peak, final, steps}   CosineAnnealingLR(T_max=steps, eta_min=final), then final
//   lr::Staircase{peak, every, gamma}         StepLR(step_size=every, gamma)
//   lr::MultiStep{peak, milestones, gamma}    MultiStepLR(milestones, gamma)
//   lr::warmup({peak, steps}, after)          a linear ramp: step k <= steps uses peak * k / steps,
//                                             then `after`, whose step 1 is step steps + 1
//
// For a scheduler with base rate `peak`, PyTorch's "epoch" e (the number of scheduler.step() calls
// so far) is step - 1. Bad parameters throw tg::Error naming the schedule and the field.
#include <cstdint>
#include <optional>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "tensorgrad/interp/host_tensor.h"
#include "tensorgrad/passes/optimizer.h"

namespace tg {

namespace lr {
struct Constant {
  double lr = 0;
  friend bool operator==(const Constant&, const Constant&) = default;
};
// From peak at step 1 to final at step steps + 1, in equal steps; final afterwards.
struct Linear {
  double peak = 0;
  double final = 0;
  std::int64_t steps = 0;
  friend bool operator==(const Linear&, const Linear&) = default;
};
// final + (peak - final) * (1 + cos(pi * e / steps)) / 2 at epoch e = step - 1, up to e = steps;
// final afterwards (PyTorch's recursive form would rise again: nobody wants that from a decay).
struct CosineAnnealing {
  double peak = 0;
  double final = 0;
  std::int64_t steps = 0;
  friend bool operator==(const CosineAnnealing&, const CosineAnnealing&) = default;
};
// peak * gamma^floor(e / every).
struct Staircase {
  double peak = 0;
  std::int64_t every = 0;
  double gamma = 0;
  friend bool operator==(const Staircase&, const Staircase&) = default;
};
// peak * gamma^(the number of milestones <= e). Milestones are sorted; one listed twice counts
// twice, as in PyTorch.
struct MultiStep {
  double peak = 0;
  std::vector<std::int64_t> milestones;
  double gamma = 0;
  friend bool operator==(const MultiStep&, const MultiStep&) = default;
};
// A linear warmup: step k in [1, steps] uses peak * (k / steps).
struct Warmup {
  double peak = 0;
  std::int64_t steps = 0;
  friend bool operator==(const Warmup&, const Warmup&) = default;
};
}  // namespace lr

using ScheduleBody = std::variant<lr::Constant, lr::Linear, lr::CosineAnnealing, lr::Staircase, lr::MultiStep>;

struct Schedule {
  ScheduleBody body = lr::Constant{};
  // When set, the warmup runs first and the body's step 1 is the step after it.
  std::optional<lr::Warmup> warmup;
  // The training steps done before this schedule's step 1 (see rebased).
  std::int64_t start = 0;

  Schedule() = default;
  Schedule(double lr) : body(lr::Constant{lr}) {}  // NOLINT(google-explicit-constructor): the seed's "a number"
  template <class Body>
  requires std::is_constructible_v<ScheduleBody, Body> Schedule(Body b)
      : body(std::move(b)) {}  // NOLINT(google-explicit-constructor)
  friend bool operator==(const Schedule&, const Schedule&) = default;
};

namespace lr {
// A linear warmup to ramp.peak over ramp.steps steps, then `after` (by default, ramp.peak constant).
// Throws tg::Error when `after` has a warmup or was rebased itself.
Schedule warmup(Warmup ramp, Schedule after);
Schedule warmup(Warmup ramp);
}  // namespace lr

// Throws tg::Error naming the schedule and field: a negative or non-finite rate, steps / every < 1,
// gamma <= 0, negative or unsorted milestones, a negative start.
void validate(const Schedule& schedule);

// The learning rate of training step `step` (1 = the first). Throws tg::Error for a bad schedule
// (validate) or a step before the schedule's start (step <= start).
double lr_at(const Schedule& schedule, std::int64_t step);

// The same schedule started after `steps_done` training steps: lr_at(rebased(s, d), d + k) ==
// lr_at(s, k). A constant is returned as it is (it has no start). This is what set_lr does with a
// new schedule so that its step 1 is the next training step.
Schedule rebased(const Schedule& schedule, std::int64_t steps_done);

// The per-step scalar inputs of a graph from append_optimizer for training step `step`, with the
// rate the schedule gives that step: what a trainer feeds next to the data every step.
TensorMap optimizer_step_inputs(const OptimizerConfig& config, const Schedule& schedule, std::int64_t step);

}  // namespace tg
