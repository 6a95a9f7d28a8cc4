// tg::Session on the interpreter backends: params held between runs, writebacks, results that are
// failed (never thrown) for bad inputs and failing ops, compile-time errors for bad writebacks.
// tests/vk/vk_session_test.cpp runs the same scenarios on Vulkan.
#include <gtest/gtest.h>
#include <tbb/global_control.h>
#include <tbb/task_arena.h>

#include <cmath>
#include <limits>
#include <optional>
#include <string>

#include "support/library.h"

namespace tg {
namespace {

// One SGD step of a linear model: loss = sum((x * w - y)^2), w.new = w - 0.1 * dloss/dw.
Graph sgd_graph() {
  GraphBuilder b("sgd");
  TracingScope scope(b);
  Tensor x = b.input("x", {DType::f32, {4}});
  Tensor y = b.input("y", {DType::f32, {4}});
  Tensor w = b.param("w", {DType::f32, {4}});
  Tensor steps = b.input("steps", {DType::f32, {}}, InputKind::state);
  Tensor r = x * w - y;
  b.output("loss", sum(r * r));
  b.output("w.new", w - 0.1f * (2.f * r * x));
  b.output("steps.new", steps + 1.f);
  return b.take();
}

SessionOptions with_writebacks(Backend backend) {
  return {.backend = backend, .writebacks = {{"w.new", "w"}, {"steps.new", "steps"}}};
}

class SessionOnInterpreter : public ::testing::TestWithParam<Backend> {};

TEST_P(SessionOnInterpreter, ParamsPersistAndWritebacksUpdateThem) {
  Session s(sgd_graph(), with_writebacks(GetParam()));
  EXPECT_EQ(s.unset_params(), (std::vector<std::string>{"w", "steps"}));
  s.set_param("w", HostTensor::f32({4}, {0, 0, 0, 0}));
  s.set_param("steps", HostTensor::f32({}, {0}));
  EXPECT_TRUE(s.unset_params().empty());
  const std::vector<float> x = {1, 1.5f, 2, 0.5f};
  const TensorMap data{{"x", HostTensor::f32({4}, x)}, {"y", HostTensor::f32({4}, {2, 3, 4, 1})}};
  std::vector<double> w(4, 0.0);  // the same steps on the host, in double
  double previous = 1e30;
  for (int step = 0; step < 5; ++step) {
    const RunResult r = s.run(data);
    ASSERT_TRUE(r.ok()) << r.failure().message;
    EXPECT_EQ(r.outputs().count("w.new"), 0u) << "writeback sources are not returned";
    const double loss = r.output("loss").at(0);
    EXPECT_LT(loss, previous) << "step " << step;
    previous = loss;
    for (std::size_t i = 0; i < 4; ++i) w[i] -= 0.1 * 2.0 * (x[i] * w[i] - 2.0 * x[i]) * x[i];
  }
  EXPECT_EQ(s.param("steps").at(0), 5.0);
  const std::vector<double> got = s.param("w").to_f64();
  for (std::size_t i = 0; i < 4; ++i) EXPECT_NEAR(got[i], w[i], 1e-5) << "w[" << i << "]";
}

// SessionOptions::interp_schedule reaches the interpreter: the parallel schedule steps to the same
// bits as the sequential one.
TEST_P(SessionOnInterpreter, TheParallelScheduleStepsToTheSameBits) {
  std::vector<TensorMap> params;
  for (const InterpSchedule schedule : {InterpSchedule::sequential, InterpSchedule::parallel}) {
    SessionOptions options = with_writebacks(GetParam());
    options.interp_schedule = schedule;
    Session s(sgd_graph(), options);
    s.set_param("w", HostTensor::f32({4}, {0.5F, -1, 0, 2}));
    s.set_param("steps", HostTensor::f32({}, {0}));
    const TensorMap data{{"x", HostTensor::f32({4}, {1, 1.5F, 2, 0.5F})}, {"y", HostTensor::f32({4}, {2, 3, 4, 1})}};
    for (int step = 0; step < 3; ++step) ASSERT_TRUE(s.run(data).ok());
    params.push_back({{"w", s.param("w")}, {"steps", s.param("steps")}});
  }
  EXPECT_EQ(params[0], params[1]);
}

TEST_P(SessionOnInterpreter, BadInputsGiveFailedResultsNamingTheInput) {
  Session s(sgd_graph(), with_writebacks(GetParam()));
  const TensorMap data{{"x", HostTensor::f32({4}, {1, 2, 3, 4})}, {"y", HostTensor::f32({4}, {2, 4, 6, 8})}};
  RunResult r = s.run(data);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.failure().kind, "input");
  EXPECT_NE(r.failure().message.find("missing param 'w'"), std::string::npos) << r.failure().message;
  EXPECT_THROW((void)r.outputs(), Error);

  s.set_param("w", HostTensor::f32({4}, {0, 0, 0, 0}));
  s.set_param("steps", HostTensor::f32({}, {0}));
  r = s.run({{"x", HostTensor::f32({4}, {1, 2, 3, 4})}});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.failure().message.find("missing input 'y'"), std::string::npos) << r.failure().message;

  r = s.run({{"x", HostTensor::f32({3}, {1, 2, 3})}, {"y", HostTensor::f32({4}, {2, 4, 6, 8})}});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.failure().message.find("'x'"), std::string::npos) << r.failure().message;
  EXPECT_NE(r.failure().message.find("f32[4]"), std::string::npos) << r.failure().message;

  r = s.run({{"x", HostTensor::f32({4}, {1, 2, 3, 4})},
             {"y", HostTensor::f32({4}, {2, 4, 6, 8})},
             {"z", HostTensor::f32({}, {1})}});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.failure().message.find("no input named 'z'"), std::string::npos) << r.failure().message;
  // Nothing was updated by the failed runs.
  EXPECT_EQ(s.param("steps").at(0), 0.0);

  EXPECT_THROW(s.set_param("x", HostTensor::f32({4}, {1, 2, 3, 4})), RuntimeError);  // a data input
  EXPECT_THROW(s.set_param("nope", HostTensor::f32({4}, {1, 2, 3, 4})), RuntimeError);
  EXPECT_THROW(s.set_param("w", HostTensor::i32({4}, {1, 2, 3, 4})), RuntimeError);
}

TEST_P(SessionOnInterpreter, AFailingOpGivesARuntimeFailure) {
  GraphBuilder b("embed");
  TracingScope scope(b);
  Tensor table = b.param("table", {DType::f32, {3, 2}});
  Tensor ids = b.input("ids", {DType::i32, {2}});
  b.output("y", embedding(table, ids));
  Session s(b.take(), {.backend = GetParam()});
  s.set_param("table", HostTensor::f32({3, 2}, {1, 2, 3, 4, 5, 6}));
  RunResult r = s.run({{"ids", HostTensor::i32({2}, {0, 2})}});
  ASSERT_TRUE(r.ok()) << r.failure().message;
  EXPECT_EQ(r.output("y").to_f32(), (std::vector<float>{1, 2, 5, 6}));
  r = s.run({{"ids", HostTensor::i32({2}, {0, 7})}});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.failure().kind, "runtime");
  EXPECT_NE(r.failure().message.find("embedding: index 7 is out of range [0, 3)"), std::string::npos)
      << r.failure().message;
}

TEST_P(SessionOnInterpreter, ANonFiniteLossDiscardsTheUpdates) {
  SessionOptions options = with_writebacks(GetParam());
  options.commit_if_finite = "loss";
  Session s(sgd_graph(), options);
  s.set_param("w", HostTensor::f32({4}, {1, 1, 1, 1}));
  s.set_param("steps", HostTensor::f32({}, {0}));
  const float nan = std::numeric_limits<float>::quiet_NaN();
  RunResult r = s.run({{"x", HostTensor::f32({4}, {1, nan, 3, 4})}, {"y", HostTensor::f32({4}, {2, 4, 6, 8})}});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.failure().kind, "nonfinite");
  EXPECT_NE(r.failure().message.find("output 'loss' is nan"), std::string::npos) << r.failure().message;
  EXPECT_EQ(s.param("w").to_f64(), std::vector<double>(4, 1.0));
  EXPECT_EQ(s.param("steps").at(0), 0.0);
  r = s.run({{"x", HostTensor::f32({4}, {1, 2, 3, 4})}, {"y", HostTensor::f32({4}, {2, 4, 6, 8})}});
  ASSERT_TRUE(r.ok()) << r.failure().message;
  EXPECT_EQ(s.param("steps").at(0), 1.0);
  EXPECT_THROW(Session(sgd_graph(), {.backend = GetParam(), .commit_if_finite = "nope"}), Error);
}

INSTANTIATE_TEST_SUITE_P(Backends, SessionOnInterpreter, ::testing::Values(Backend::interp_f32, Backend::interp_f64),
                         [](const auto& p) { return std::string(backend_name(p.param)); });

// set_param refuses a value of another shape naming both, says when it is the expected shape with
// its last two dims swapped (a PyTorch nn.Linear weight, typically), and writes nothing.
TEST(Session, SetParamNamesATransposedValue) {
  GraphBuilder b("shapes");
  std::optional<TracingScope> scope(std::in_place, b);
  Tensor matrix = b.param("m", {DType::f32, {2, 3}});
  Tensor batch = b.param("t", {DType::f32, {4, 2, 3}});
  b.output("total", sum(matrix) + sum(batch));
  scope.reset();
  Session s(b.take());
  const auto message = [&](const std::string& name, Shape shape) {
    try {
      s.set_param(name, HostTensor::filled({DType::f32, std::move(shape)}, 1.0));
    } catch (const RuntimeError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  const std::string reversed = message("m", {3, 2});
  EXPECT_NE(reversed.find("param 'm' of graph 'shapes': expected f32[2,3], got f32[3,2]: it looks transposed (the "
                          "expected shape reversed): PyTorch's nn.Linear stores its weight as [out, in]"),
            std::string::npos)
      << reversed;
  EXPECT_NE(reversed.find("nothing was written"), std::string::npos) << reversed;
  const std::string swapped = message("t", {4, 3, 2});
  EXPECT_NE(swapped.find("expected f32[4,2,3], got f32[4,3,2]: it looks transposed (the last two dims swapped)"),
            std::string::npos)
      << swapped;
  const std::string rotated = message("t", {3, 2, 4});
  EXPECT_NE(rotated.find("expected f32[4,2,3], got f32[3,2,4]"), std::string::npos) << rotated;
  EXPECT_EQ(rotated.find("transposed"), std::string::npos) << rotated;
  EXPECT_EQ(s.unset_params(), (std::vector<std::string>{"m", "t"}));
  // A param passed to run() with the data is checked the same way, and the run fails as "input".
  const RunResult run = s.run(
      {{"m", HostTensor::filled({DType::f32, {3, 2}}, 1.0)}, {"t", HostTensor::filled({DType::f32, {4, 2, 3}}, 1.0)}});
  ASSERT_FALSE(run.ok());
  EXPECT_EQ(run.failure().kind, "input");
  EXPECT_NE(run.failure().message.find("param 'm' of graph 'shapes': expected f32[2,3], got f32[3,2]: it looks "
                                       "transposed"),
            std::string::npos)
      << run.failure().message;
  EXPECT_EQ(s.unset_params(), (std::vector<std::string>{"m", "t"}));
}

// SessionOptions::interp_threads: refused when negative; 1, 3 and TBB's default step to the same
// bits under the parallel schedule; the limit is the session's own arena, so the process's TBB
// settings are as they were while the session lives and after it ran.
TEST_P(SessionOnInterpreter, InterpThreadsStepToTheSameBitsAndStayLocal) {
  try {
    Session refused(sgd_graph(), {.backend = GetParam(), .interp_threads = -1});
    FAIL() << "interp_threads = -1 was accepted";
  } catch (const CompileError& e) {
    EXPECT_NE(std::string(e.what()).find("SessionOptions::interp_threads is -1 for graph 'sgd'; it must be >= 0"),
              std::string::npos)
        << e.what();
  }
  const int default_concurrency = tbb::this_task_arena::max_concurrency();
  const std::size_t default_parallelism =
      tbb::global_control::active_value(tbb::global_control::max_allowed_parallelism);
  std::vector<TensorMap> params;
  for (const int threads : {0, 1, 3}) {
    SessionOptions options = with_writebacks(GetParam());
    options.interp_schedule = InterpSchedule::parallel;
    options.interp_threads = threads;
    Session s(sgd_graph(), options);
    s.set_param("w", HostTensor::f32({4}, {0.5F, -1, 0, 2}));
    s.set_param("steps", HostTensor::f32({}, {0}));
    const TensorMap data{{"x", HostTensor::f32({4}, {1, 1.5F, 2, 0.5F})}, {"y", HostTensor::f32({4}, {2, 3, 4, 1})}};
    for (int step = 0; step < 3; ++step) ASSERT_TRUE(s.run(data).ok()) << threads << " threads";
    params.push_back({{"w", s.param("w")}, {"steps", s.param("steps")}});
    EXPECT_EQ(tbb::this_task_arena::max_concurrency(), default_concurrency) << threads << " threads";
    EXPECT_EQ(tbb::global_control::active_value(tbb::global_control::max_allowed_parallelism), default_parallelism)
        << threads << " threads";
  }
  EXPECT_EQ(params[0], params[1]);
  EXPECT_EQ(params[0], params[2]);
}

TEST(Session, BadWritebacksAreRefusedAtCompile) {
  const Graph g = sgd_graph();
  EXPECT_THROW(Session(g, {.writebacks = {{"nope", "w"}}}), CompileError);
  EXPECT_THROW(Session(g, {.writebacks = {{"w.new", "x"}}}), CompileError);  // a data input
  EXPECT_THROW(Session(g, {.writebacks = {{"loss", "w"}}}), CompileError);   // f32[] into f32[4]
  EXPECT_THROW(Session(g, {.writebacks = {{"w.new", "w"}, {"w.new", "w"}}}), CompileError);
}

// NaN/Inf params are refused by default (every later run would compute from them) and accepted,
// bit for bit, with allow_nonfinite_params; a NaN data input is the graph's business either way.
TEST_P(SessionOnInterpreter, NonFiniteParamsNeedTheOptIn) {
  const HostTensor nan_w = HostTensor::f32({4}, {1.f, std::nanf(""), 3.f, 4.f});
  Session strict(sgd_graph(), {.backend = GetParam()});
  EXPECT_THROW(strict.set_param("w", nan_w), RuntimeError);
  EXPECT_EQ(strict.unset_params(), (std::vector<std::string>{"w", "steps"}));
  Session lenient(sgd_graph(), {.backend = GetParam(), .allow_nonfinite_params = true});
  lenient.set_param("w", nan_w);
  lenient.set_param("steps", HostTensor::f32({}, {0.f}));
  EXPECT_TRUE(std::isnan(lenient.param("w").at(1)));
  const RunResult r =
      lenient.run({{"x", HostTensor::f32({4}, {1, 1, 1, 1})}, {"y", HostTensor::f32({4}, {0, 0, 0, 0})}});
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(std::isnan(r.output("loss").at(0)));
}

}  // namespace
}  // namespace tg
