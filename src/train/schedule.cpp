// Learning-rate schedules. Each rate comes from a closed form in double; PyTorch's schedulers
// compute most of them recursively (lr *= factor each step), which differs from the closed form
// only by rounding (relative ~1e-16 per step).
#include "tensorgrad/train/schedule.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numbers>
#include <string>

#include "tensorgrad/ir/error.h"

namespace tg {

namespace {

std::string str(double v) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%g", v);
  return buffer;
}

// Checks of one schedule's fields; the messages read "lr schedule <kind>: <field> must be ...".
class FieldCheck {
 public:
  explicit FieldCheck(std::string kind) : kind_(std::move(kind)) {}
  void rate(const char* field, double value) const {
    if (!(value >= 0) || !std::isfinite(value)) fail(field, "must be >= 0 and finite", str(value));
  }
  void count(const char* field, std::int64_t value) const {
    if (value < 1) fail(field, "must be >= 1", std::to_string(value));
  }
  void gamma(double value) const {
    if (!(value > 0) || !std::isfinite(value)) fail("gamma", "must be > 0 and finite", str(value));
  }
  [[noreturn]] void fail(const std::string& field, const std::string& rule, const std::string& got) const {
    throw Error("lr schedule " + kind_ + ": " + field + " " + rule + ", got " + got);
  }

 private:
  std::string kind_;
};

void validate_body(const ScheduleBody& body) {
  if (const auto* s = std::get_if<lr::Constant>(&body)) FieldCheck("constant").rate("lr", s->lr);
  if (const auto* s = std::get_if<lr::Linear>(&body)) {
    const FieldCheck check("linear");
    check.rate("peak", s->peak);
    check.rate("final", s->final);
    check.count("steps", s->steps);
  }
  if (const auto* s = std::get_if<lr::CosineAnnealing>(&body)) {
    const FieldCheck check("cosine_annealing");
    check.rate("peak", s->peak);
    check.rate("final", s->final);
    check.count("steps", s->steps);
  }
  if (const auto* s = std::get_if<lr::Staircase>(&body)) {
    const FieldCheck check("staircase");
    check.rate("peak", s->peak);
    check.count("every", s->every);
    check.gamma(s->gamma);
  }
  if (const auto* s = std::get_if<lr::MultiStep>(&body)) {
    const FieldCheck check("multi_step");
    check.rate("peak", s->peak);
    check.gamma(s->gamma);
    for (std::size_t i = 0; i < s->milestones.size(); ++i) {
      const std::string field = "milestones[" + std::to_string(i) + "]";
      if (s->milestones[i] < 0) check.fail(field, "must be >= 0", std::to_string(s->milestones[i]));
      if (i > 0 && s->milestones[i] < s->milestones[i - 1]) {
        check.fail(field, "must not be less than the one before it (" + std::to_string(s->milestones[i - 1]) + ")",
                   std::to_string(s->milestones[i]));
      }
    }
  }
}

// The body's rate at epoch e = (its own step) - 1 >= 0.
double body_lr(const ScheduleBody& body, std::int64_t epoch) {
  if (const auto* s = std::get_if<lr::Constant>(&body)) return s->lr;
  if (const auto* s = std::get_if<lr::Linear>(&body)) {
    const auto e = static_cast<double>(std::min(epoch, s->steps));
    return s->peak + (s->final - s->peak) * (e / static_cast<double>(s->steps));
  }
  if (const auto* s = std::get_if<lr::CosineAnnealing>(&body)) {
    // CosineAnnealingLR._get_closed_form_lr, in its operation order.
    const auto e = static_cast<double>(std::min(epoch, s->steps));
    return s->final + (s->peak - s->final) * (1 + std::cos(std::numbers::pi * e / static_cast<double>(s->steps))) / 2;
  }
  if (const auto* s = std::get_if<lr::Staircase>(&body)) {
    return s->peak * std::pow(s->gamma, static_cast<double>(epoch / s->every));
  }
  const auto& s = std::get<lr::MultiStep>(body);
  const auto passed = std::upper_bound(s.milestones.begin(), s.milestones.end(), epoch) - s.milestones.begin();
  return s.peak * std::pow(s.gamma, static_cast<double>(passed));
}

bool is_constant(const Schedule& schedule) {
  return !schedule.warmup && std::holds_alternative<lr::Constant>(schedule.body);
}

}  // namespace

namespace lr {

Schedule warmup(Warmup ramp, Schedule after) {
  if (after.warmup) throw Error("lr schedule warmup: after must not have a warmup of its own");
  if (after.start != 0) throw Error("lr schedule warmup: after must not be rebased (its start is not 0)");
  after.warmup = ramp;
  validate(after);
  return after;
}

Schedule warmup(Warmup ramp) { return warmup(ramp, Schedule(ramp.peak)); }

}  // namespace lr

void validate(const Schedule& schedule) {
  if (schedule.warmup) {
    const FieldCheck check("warmup");
    check.rate("peak", schedule.warmup->peak);
    check.count("steps", schedule.warmup->steps);
  }
  validate_body(schedule.body);
  if (schedule.start < 0) FieldCheck("rebased").fail("start", "must be >= 0", std::to_string(schedule.start));
}

double lr_at(const Schedule& schedule, std::int64_t step) {
  validate(schedule);
  std::int64_t local = step - schedule.start;
  if (local < 1) {
    throw Error("lr_at: step " + std::to_string(step) + " comes before the schedule's step 1 (" +
                (schedule.start == 0 ? std::string("steps count from 1")
                                     : "it was rebased to start after step " + std::to_string(schedule.start)) +
                ")");
  }
  if (schedule.warmup) {
    const lr::Warmup& w = *schedule.warmup;
    if (local <= w.steps) return w.peak * (static_cast<double>(local) / static_cast<double>(w.steps));
    local -= w.steps;
  }
  return body_lr(schedule.body, local - 1);
}

Schedule rebased(const Schedule& schedule, std::int64_t steps_done) {
  if (steps_done < 0) throw Error("rebased: steps_done must be >= 0, got " + std::to_string(steps_done));
  validate(schedule);
  if (is_constant(schedule)) return schedule;
  Schedule out = schedule;
  out.start += steps_done;
  return out;
}

TensorMap optimizer_step_inputs(const OptimizerConfig& config, const Schedule& schedule, std::int64_t step) {
  TensorMap inputs;
  for (const auto& [name, value] : scalars_for_step(config, step, lr_at(schedule, step)).values) {
    inputs.emplace(name, HostTensor::of({DType::f32, {}}, {value}));
  }
  return inputs;
}

}  // namespace tg
