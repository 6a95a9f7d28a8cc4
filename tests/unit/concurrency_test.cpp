// Session, Training and Forward called from several threads at once (docs/runtime.md and
// docs/training.md, "Threads"): calls are serialised, so concurrent runs and steps leave exactly
// the state the same number of serial calls leaves, and a reader never sees a half-written update.
// `make tsan` runs these under ThreadSanitizer (docs/testing.md, "Sanitizers").
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "support/library.h"
#include "tensorgrad/train/training.h"

namespace tg {
namespace {

constexpr int kThreads = 4;
constexpr int kCallsPerThread = 6;
constexpr int kN = 8;

// Runs body(thread index) on kThreads threads started together; rethrowing is not possible across
// threads, so an exception is recorded as a failure naming the thread.
void run_on_threads(const std::function<void(int)>& body) {
  std::atomic<int> ready{0};
  std::mutex errors_mutex;
  std::vector<std::string> errors;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      ++ready;
      while (ready.load() < kThreads) std::this_thread::yield();  // start together: more overlap
      try {
        body(t);
      } catch (const std::exception& e) {
        const std::lock_guard lock(errors_mutex);
        errors.push_back("thread " + std::to_string(t) + ": " + e.what());
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (const std::string& error : errors) ADD_FAILURE() << error;
}

// One SGD step of a linear model with a step counter, both written back after every run.
Graph sgd_graph() {
  GraphBuilder b("sgd");
  TracingScope scope(b);
  Tensor x = b.input("x", {DType::f32, {4}});
  Tensor y = b.input("y", {DType::f32, {4}});
  Tensor w = b.param("w", {DType::f32, {4}});
  Tensor steps = b.input("steps", {DType::f32, {}}, InputKind::state);
  Tensor r = x * w - y;
  b.output("loss", sum(r * r));
  b.output("w.new", w - 0.05f * (2.f * r * x));
  b.output("steps.new", steps + 1.f);
  return b.take();
}

Session sgd_session(Backend backend) {
  Session s(sgd_graph(), {.backend = backend, .writebacks = {{"w.new", "w"}, {"steps.new", "steps"}}});
  s.set_param("w", HostTensor::f32({4}, {0, 0, 0, 0}));
  s.set_param("steps", HostTensor::f32({}, {0}));
  return s;
}

const TensorMap& sgd_data() {
  static const TensorMap data{{"x", HostTensor::f32({4}, {1, 1.5f, 2, 0.5f})},
                              {"y", HostTensor::f32({4}, {2, 3, 4, 1})}};
  return data;
}

class ConcurrencyOnInterpreter : public ::testing::TestWithParam<Backend> {};

TEST_P(ConcurrencyOnInterpreter, SessionRunsFromManyThreadsEqualTheSerialRuns) {
  constexpr int kRuns = kThreads * kCallsPerThread;
  // Serially: the loss of every run, and w after every run (index k: after k runs).
  Session serial = sgd_session(GetParam());
  std::multiset<double> serial_losses;
  std::vector<std::vector<double>> serial_w{serial.param("w").to_f64()};
  for (int i = 0; i < kRuns; ++i) {
    const RunResult r = serial.run(sgd_data());
    ASSERT_TRUE(r.ok()) << r.failure().message;
    serial_losses.insert(r.output("loss").at(0));
    serial_w.push_back(serial.param("w").to_f64());
  }
  // The same runs from kThreads threads, while each thread also reads w and the unset params.
  Session shared = sgd_session(GetParam());
  std::mutex seen_mutex;
  std::multiset<double> losses;
  std::vector<std::vector<double>> seen_w;
  run_on_threads([&](int) {
    for (int i = 0; i < kCallsPerThread; ++i) {
      const RunResult r = shared.run(sgd_data());
      const std::vector<double> w = shared.param("w").to_f64();
      const bool all_set = shared.unset_params().empty();
      const std::lock_guard lock(seen_mutex);
      EXPECT_TRUE(r.ok()) << r.failure().message;
      EXPECT_TRUE(all_set);
      if (r.ok()) losses.insert(r.output("loss").at(0));
      seen_w.push_back(w);
    }
  });
  EXPECT_EQ(losses, serial_losses) << "each run's loss is one of the serial runs' losses, each once";
  EXPECT_EQ(shared.param("w").to_f64(), serial_w.back());
  EXPECT_EQ(shared.param("steps").at(0), kRuns);
  for (const std::vector<double>& w : seen_w) {
    EXPECT_NE(std::find(serial_w.begin(), serial_w.end(), w), serial_w.end())
        << "param() read a w that no number of serial runs produces";
  }
}

TEST_P(ConcurrencyOnInterpreter, SessionSetParamIsNeverSeenHalfWritten) {
  Session s = sgd_session(GetParam());
  // Thread t writes w = (t+1, t+1, t+1, t+1); a reader sees one whole write, never a mix.
  run_on_threads([&](int t) {
    const float v = static_cast<float>(t + 1);
    for (int i = 0; i < kCallsPerThread; ++i) {
      s.set_param("w", HostTensor::f32({4}, {v, v, v, v}));
      const std::vector<double> w = s.param("w").to_f64();
      EXPECT_TRUE(std::all_of(w.begin(), w.end(), [&](double e) { return e == w[0]; })) << "w mixes two writes";
      EXPECT_TRUE(w[0] >= 1 && w[0] <= kThreads) << w[0];
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Backends, ConcurrencyOnInterpreter,
                         ::testing::Values(Backend::interp_f32, Backend::interp_f64),
                         [](const ::testing::TestParamInfo<Backend>& p) { return std::string(backend_name(p.param)); });

// --- Training and Forward ------------------------------------------------------------------------

struct LinReg : Module {
  Linear l{*this, "l", 2, 1};
};

Tensor mse(const LinReg& m, const Inputs& in) {
  Tensor r = m.l(in.at("x")) - in.at("y");
  return mean(r * r);
}

Tensor predict(const LinReg& m, const Inputs& in) { return m.l(in.at("x")); }

TensorMap batch() {
  std::vector<float> x, y;
  for (int i = 0; i < kN; ++i) {
    x.insert(x.end(), {0.1f * static_cast<float>(i), 1.f - 0.2f * static_cast<float>(i)});
    y.push_back(3.f * x[2 * i] - x[2 * i + 1]);
  }
  return {{"x", HostTensor::f32({kN, 2}, x)}, {"y", HostTensor::f32({kN, 1}, y)}};
}

Training compile_lin(const LinReg& model, Backend backend) {
  return compile(TrainingSpec<LinReg>{.model = model,
                                      .loss = mse,
                                      .inputs = {{"x", {{kN, 2}}}, {"y", {{kN, 1}}}},
                                      .optimizer = {.kind = AdamConfig{}},
                                      .lr = 0.05,
                                      .backend = backend,
                                      .seed = 11});
}

ForwardSpec<LinReg> forward_spec() { return {.forward = predict, .inputs = {{"x", {{-1, 2}}}}}; }

TensorMap probe() { return {{"x", HostTensor::f32({3, 2}, {0.5f, -1, 2, 0.25f, -0.75f, 1.5f})}}; }

TEST_P(ConcurrencyOnInterpreter, TrainingStepsAndForwardsFromManyThreadsEqualTheSerialCalls) {
  constexpr int kSteps = kThreads * kCallsPerThread;
  const LinReg model;
  // Serially: every step's loss, and the forward's output on the probe after every step.
  Training serial = compile_lin(model, GetParam());
  Forward serial_forward = serial.attach(forward_spec());
  std::multiset<double> serial_losses;
  std::vector<std::vector<double>> serial_outputs{serial_forward.run(probe()).output().to_f64()};
  for (int i = 0; i < kSteps; ++i) {
    const StepResult r = serial.step(batch());
    ASSERT_TRUE(r.ok()) << r.failure().message;
    serial_losses.insert(r.loss());
    serial_outputs.push_back(serial_forward.run(probe()).output().to_f64());
  }
  // Half the threads step, the other half run forwards (two forwards, one per batch size, and
  // download the params) while the steps go on.
  Training train = compile_lin(model, GetParam());
  Forward forward = train.attach(forward_spec());
  std::mutex seen_mutex;
  std::multiset<double> losses;
  std::vector<std::vector<double>> outputs;
  run_on_threads([&](int t) {
    for (int i = 0; i < 2 * kCallsPerThread; ++i) {
      if (t % 2 == 0) {
        const StepResult r = train.step(batch());
        const std::lock_guard lock(seen_mutex);
        EXPECT_TRUE(r.ok()) << r.failure().message;
        if (r.ok()) losses.insert(r.loss());
      } else {
        const ForwardResult r = forward.run(probe());
        const ForwardResult other = forward.run({{"x", HostTensor::f32({1, 2}, {0.5f, -1})}});
        const ParamValues params = forward.download_params();
        const std::lock_guard lock(seen_mutex);
        EXPECT_TRUE(r.ok() && other.ok());
        EXPECT_EQ(params.size(), 2u);
        if (r.ok()) outputs.push_back(r.output().to_f64());
      }
    }
  });
  EXPECT_EQ(train.steps(), kSteps);
  EXPECT_EQ(losses, serial_losses) << "each step's loss is one of the serial steps' losses, each once";
  EXPECT_EQ(forward.run(probe()).output().to_f64(), serial_outputs.back());
  EXPECT_EQ(train.download_param_tensors(), serial.download_param_tensors());
  EXPECT_EQ(forward.cached_shapes(), 2u);
  for (const std::vector<double>& out : outputs) {
    EXPECT_NE(std::find(serial_outputs.begin(), serial_outputs.end(), out), serial_outputs.end())
        << "a forward ran on params that no number of serial steps produces";
  }
}

TEST_P(ConcurrencyOnInterpreter, UploadsAreNeverSeenHalfWritten) {
  const LinReg model;
  Training train = compile_lin(model, GetParam());
  Forward forward = train.attach(forward_spec());
  // Thread t uploads W = (t, -t), b = t through the training or the forward; every download sees
  // one whole upload (or the initial params), never W of one and b of another.
  const ParamValues initial = train.download_params();
  run_on_threads([&](int t) {
    const float v = static_cast<float>(t + 1);
    for (int i = 0; i < kCallsPerThread; ++i) {
      const ParamValues mine{{"l.W", {v, -v}}, {"l.b", {v}}};
      if (t % 2 == 0) {
        train.upload_params(mine);
      } else {
        forward.upload_params(mine);
      }
      const ParamValues got = t % 2 == 0 ? forward.download_params() : train.download_params();
      const float b = got.at("l.b")[0];
      const bool whole = got == initial || got == ParamValues{{"l.W", {b, -b}}, {"l.b", {b}}};
      EXPECT_TRUE(whole) << "l.W = (" << got.at("l.W")[0] << ", " << got.at("l.W")[1] << "), l.b = " << b;
    }
  });
}

}  // namespace
}  // namespace tg
