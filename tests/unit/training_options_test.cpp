// TrainingSpec's interpreter options (interp_schedule, interp_threads) reaching the step and the
// attached forwards, and the loss of a last, partial batch through a forward that returns the loss
// (docs/training/compile.md, "The last partial batch").
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "support/library.h"
#include "tensorgrad/train/training.h"

namespace tg {
namespace {

constexpr std::int64_t kBatch = 8;

// Wide enough that the hidden activations ([8, 1024]) pass the kernels' 4096-element grain, so the
// thread count reaches their parallel loops too, not only the schedule.
struct Mlp : Module {
  Linear l1{*this, "l1", 3, 1024};
  Linear l2{*this, "l2", 1024, 1};
};

Tensor predict(const Mlp& m, const Inputs& in) { return m.l2(m.l1(in.at("x"))); }
Tensor mse(const Mlp& m, const Inputs& in) {
  const Tensor r = predict(m, in) - in.at("y");
  return mean(r * r);
}

// Every element's exact bits, so "the same" means bit for bit.
std::string exact_bits(const HostTensor& t) {
  std::string out = t.type.to_string();
  for (const double v : t.to_f64()) out += " " + std::to_string(std::bit_cast<std::uint64_t>(v));
  return out + "\n";
}

// Rows [first, first + count) of a fixed data set.
TensorMap rows(std::int64_t first, std::int64_t count) {
  std::vector<float> x, y;
  for (std::int64_t i = first; i < first + count; ++i) {
    const auto t = static_cast<float>(i);
    x.insert(x.end(), {std::sin(t), std::cos(0.5F * t), 0.1F * t});
    y.push_back(std::sin(t) - 0.3F * std::cos(0.5F * t));
  }
  return {{"x", HostTensor::f32({count, 3}, x)}, {"y", HostTensor::f32({count, 1}, y)}};
}

TrainingSpec<Mlp> spec(const Mlp& model, Backend backend, std::int64_t batch = kBatch) {
  return {.model = model,
          .loss = mse,
          .inputs = {{"x", {{batch, 3}}}, {"y", {{batch, 1}}}},
          .optimizer = {.kind = AdamConfig{}},
          .lr = 0.01,
          .backend = backend,
          .seed = 9};
}

// How many kernel loops the interpreter has split over TBB's threads so far.
std::uint64_t parallel_loops() {
  for (const LaunchPathCount& path : launch_path_counts())
    if (path.name() == "interp/parallel_chunks/parallel_for") return path.hits;
  return 0;
}

class TrainingOnInterpreter : public ::testing::TestWithParam<Backend> {};

TEST_P(TrainingOnInterpreter, ThreadsAndScheduleStepToTheSameBits) {
  struct Run {
    InterpSchedule schedule;
    int threads;
  };
  const Mlp model;
  const std::uint64_t loops_before = parallel_loops();
  std::vector<std::string> results;
  for (const Run run : {Run{InterpSchedule::sequential, 0}, Run{InterpSchedule::parallel, 1},
                        Run{InterpSchedule::parallel, 3}, Run{InterpSchedule::parallel, 0}}) {
    TrainingSpec<Mlp> s = spec(model, GetParam());
    s.interp_schedule = run.schedule;
    s.interp_threads = run.threads;
    Training train = compile(s);
    Forward forward = train.attach(ForwardSpec<Mlp>{.forward = predict, .inputs = {{"x", {{-1, 3}}}}});
    std::string bits;
    for (int step = 0; step < 3; ++step) {
      const StepResult r = train.step(rows(step * kBatch, kBatch));
      ASSERT_TRUE(r.ok()) << r.failure().message;
      bits += std::to_string(r.loss()) + " ";
    }
    const ForwardResult out = forward.run({{"x", rows(0, 5).at("x")}});
    ASSERT_TRUE(out.ok()) << out.failure().message;
    std::string state;
    for (const auto& [name, t] : train.download_param_tensors()) state += name + ":" + exact_bits(t);
    for (const auto& [name, t] : train.download_optimizer_state()) state += name + ":" + exact_bits(t);
    results.push_back(bits + state + "out:" + exact_bits(out.output()));
  }
  for (std::size_t i = 1; i < results.size(); ++i) EXPECT_EQ(results[i], results[0]) << "run " << i;
  EXPECT_GT(parallel_loops() - loops_before, 0U)
      << "no kernel split its loop: the model is too small to test the thread count";
}

TEST(TrainingOptions, NegativeThreadCountIsRefused) {
  const Mlp model;
  TrainingSpec<Mlp> s = spec(model, Backend::interp_f32);
  s.interp_threads = -2;
  try {
    (void)compile(s);
    FAIL() << "interp_threads = -2 was accepted";
  } catch (const CompileError& e) {
    EXPECT_NE(std::string(e.what()).find("compile: interp_threads is -2; it must be >= 0"), std::string::npos)
        << e.what();
  }
}

// A training compiled for batch 8 and 13 rows of data: one step on rows 0-7, then the loss of the
// last 5 rows through an attached forward that returns the loss with a wildcard batch dim. It is the
// loss a training compiled for batch 5 reports for the same params (the loss before its update).
TEST_P(TrainingOnInterpreter, ThePartialLastBatchsLossThroughAnAttachedForward) {
  const Mlp model;
  Training train = compile(spec(model, GetParam()));
  Forward eval_loss = train.attach(ForwardSpec<Mlp>{.forward = mse, .inputs = {{"x", {{-1, 3}}}, {"y", {{-1, 1}}}}});
  const TensorMap last = rows(kBatch, 5);
  const ForwardResult before = eval_loss.run(last);  // at the init params
  ASSERT_TRUE(train.step(rows(0, kBatch)).ok());

  const ForwardResult partial = eval_loss.run(last);
  ASSERT_TRUE(partial.ok()) << partial.failure().message;
  EXPECT_EQ(partial.output().type, (TensorType{DType::f32, {}}));

  Training at_five = compile(spec(model, GetParam(), 5));
  at_five.upload_params(train.download_param_tensors());
  const StepResult reference = at_five.step(last);
  ASSERT_TRUE(reference.ok()) << reference.failure().message;
  EXPECT_EQ(partial.output().at(0), reference.loss());
  ASSERT_TRUE(before.ok()) << before.failure().message;
  EXPECT_NE(before.output().at(0), partial.output().at(0)) << "the step changed the params";

  // And at full size it is the loss the next step reports.
  const ForwardResult full = eval_loss.run(rows(kBatch, kBatch));
  const StepResult next = train.step(rows(kBatch, kBatch));
  ASSERT_TRUE(full.ok() && next.ok());
  EXPECT_EQ(full.output().at(0), next.loss());
}

INSTANTIATE_TEST_SUITE_P(Interp, TrainingOnInterpreter, ::testing::Values(Backend::interp_f32, Backend::interp_f64),
                         [](const ::testing::TestParamInfo<Backend>& param_info) {
                           return std::string(backend_name(param_info.param));
                         });

}  // namespace
}  // namespace tg
