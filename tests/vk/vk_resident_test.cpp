// Program features a training step needs: params and state resident on the device, writebacks
// applied on the device after every run, and per-dispatch timestamps. Under the validation layer
// (synchronization checks included), so a missing barrier around the writeback copies fails.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "support/library.h"
#include "tensorgrad/vk/executor.h"
#include "vk_test_support.h"

namespace tg::vk {
namespace {

using testing::VkTest;

// w <- w - lr * x * w (a toy update), with a step counter as state: the outputs "w.new" and
// "count.new" write back into the inputs "w" and "count".
Graph toy_update_graph() {
  GraphBuilder b("toy_update");
  TracingScope scope(b);
  Tensor x = b.input("x", {DType::f32, {3}});
  Tensor w = b.param("w", {DType::f32, {3}});
  Tensor count = b.input("count", {DType::f32, {}}, InputKind::state);
  Tensor loss = sum(x * w);
  b.output("loss", loss);
  b.output("w.new", w - 0.5f * x * w);
  b.output("count.new", count + 1.f);
  return b.take();
}

// The toy's starting params and data.
const std::vector<float> kToyW = {1.f, -2.f, 4.f};
const std::vector<float> kToyX = {0.5f, 0.25f, -1.f};

void write_toy_params(Program& program) {
  program.write_input("w", HostTensor::f32({3}, kToyW));
  program.write_input("count", HostTensor::f32({}, {0.f}));
}

// Building a program of `g` with `options` must fail with a tg::Error containing `fragment`.
void expect_refused(const std::shared_ptr<Context>& ctx, const Graph& g, ProgramOptions options,
                    const std::string& fragment) {
  try {
    Program program(ctx, g, std::move(options));
    ADD_FAILURE() << "accepted; expected an error containing '" << fragment << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

TEST_F(VkTest, ResidentParamsAndWritebacksFollowTheHostComputation) {
  auto ctx = make_context();
  const Graph g = toy_update_graph();
  Program program(ctx, g, {.resident_params = true, .writebacks = {{"w.new", "w"}, {"count.new", "count"}}});
  EXPECT_TRUE(program.is_resident("w"));
  EXPECT_TRUE(program.is_resident("count"));
  EXPECT_FALSE(program.is_resident("x"));

  std::vector<float> w = kToyW;
  write_toy_params(program);
  const std::vector<float>& x = kToyX;
  for (int step = 0; step < 3; ++step) {
    const TensorMap out = program.run({{"x", HostTensor::f32({3}, x)}});
    // Writeback sources are not read back; the loss is, computed from this step's w.
    EXPECT_EQ(out.count("w.new"), 0u);
    EXPECT_EQ(out.count("count.new"), 0u);
    float loss = 0.f;
    for (int i = 0; i < 3; ++i) loss += x[i] * w[i];
    EXPECT_FLOAT_EQ(static_cast<float>(out.at("loss").at(0)), loss) << "step " << step;
    for (int i = 0; i < 3; ++i) w[i] = w[i] - 0.5f * x[i] * w[i];
    EXPECT_EQ(program.read_input("w").to_f32(), w) << "step " << step;
    EXPECT_EQ(program.read_input("count").at(0), step + 1);
  }
  // A resident input passed to run() is written before the dispatches.
  const TensorMap out = program.run({{"x", HostTensor::f32({3}, x)}, {"w", HostTensor::f32({3}, {1.f, 1.f, 1.f})}});
  EXPECT_FLOAT_EQ(static_cast<float>(out.at("loss").at(0)), 0.5f + 0.25f - 1.f);
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

// An intermediate computed before the writeback source must not land in the source's range: in the
// swapped recording that range holds this run's input (a bug the first version of the plan had).
TEST_F(VkTest, WritebackSourcesOwnTheirRangeFromTheStart) {
  auto ctx = make_context();
  GraphBuilder b("decay");
  TracingScope scope(b);
  Tensor w = b.param("W", {DType::f32, {1000}});
  b.output("W.new", w - 0.1f * (w * 2.f));
  const Graph g = b.take();
  Program program(ctx, g, {.resident_params = true, .writebacks = {{"W.new", "W"}}});
  std::vector<float> host(1000);
  for (int i = 0; i < 1000; ++i) host[i] = static_cast<float>(i % 17) - 8.f;
  program.write_input("W", HostTensor::f32({1000}, host));
  for (int step = 0; step < 6; ++step) {
    (void)program.run({});
    for (float& v : host) v = v - 0.1f * (v * 2.f);
    ASSERT_EQ(program.read_input("W").to_f32(), host) << "step " << step;
  }
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

// A run whose writebacks are not committed leaves the params as they were; commit() accepts them.
TEST_F(VkTest, UncommittedRunsLeaveParamsAsTheyWere) {
  auto ctx = make_context();
  GraphBuilder b("count");
  TracingScope scope(b);
  Tensor c = b.input("c", {DType::f32, {}}, InputKind::state);
  b.output("c.new", c + 1.f);
  Program program(ctx, b.take(), {.resident_params = true, .writebacks = {{"c.new", "c"}}});
  program.write_input("c", HostTensor::f32({}, {0.f}));
  EXPECT_THROW(program.commit(), Error) << "nothing to commit yet";
  (void)program.run({}, /*commit_writebacks=*/false);
  EXPECT_EQ(program.read_input("c").at(0), 0.0);
  (void)program.run({}, /*commit_writebacks=*/false);  // replaces the pending run
  program.commit();
  EXPECT_EQ(program.read_input("c").at(0), 1.0);
  EXPECT_THROW(program.commit(), Error) << "committed twice";
  (void)program.run({});
  EXPECT_EQ(program.read_input("c").at(0), 2.0);
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

TEST_F(VkTest, ResidentInputsAreCheckedAndDataInputsStillRequired) {
  auto ctx = make_context();
  const Graph g = toy_update_graph();
  Program program(ctx, g, {.resident_params = true});
  EXPECT_THROW(program.write_input("x", HostTensor::f32({3}, {1.f, 2.f, 3.f})), Error);  // data: not resident
  EXPECT_THROW(program.write_input("nope", HostTensor::f32({3}, {1.f, 2.f, 3.f})), Error);
  try {
    program.write_input("w", HostTensor::f32({4}, {1.f, 2.f, 3.f, 4.f}));
    FAIL() << "a misshapen param was accepted";
  } catch (const RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find("'w'"), std::string::npos) << e.what();
  }
  try {
    (void)program.run({});
    FAIL() << "a run without its data input was accepted";
  } catch (const RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find("missing input 'x'"), std::string::npos) << e.what();
  }
  // Without resident_params every input is uploaded by run() and none can be written alone.
  Program plain(ctx, g);
  EXPECT_FALSE(plain.is_resident("w"));
  EXPECT_THROW(plain.write_input("w", HostTensor::f32({3}, {1.f, 2.f, 3.f})), Error);
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

TEST_F(VkTest, BadWritebacksAreRefusedWhenTheProgramIsBuilt) {
  auto ctx = make_context();
  const Graph g = toy_update_graph();
  const auto refused = [&](ProgramOptions options, const std::string& fragment) {
    expect_refused(ctx, g, std::move(options), fragment);
  };
  refused({.resident_params = true, .writebacks = {{"nope", "w"}}}, "no output named 'nope'");
  refused({.resident_params = true, .writebacks = {{"w.new", "nope"}}}, "no input named 'nope'");
  refused({.resident_params = true, .writebacks = {{"w.new", "x"}}}, "not resident");
  refused({.resident_params = false, .writebacks = {{"w.new", "w"}}}, "not resident");
  refused({.resident_params = true, .writebacks = {{"loss", "w"}}}, "f32[] but the input is f32[3]");
  refused({.resident_params = true, .writebacks = {{"w.new", "w"}, {"w.new", "w"}}}, "target of another");
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

// Device outputs are not read back by run(); read_output() gives the last completed run's value,
// also across writeback parity flips (the output's range may differ between the two recordings).
TEST_F(VkTest, DeviceOutputsStayOnTheDeviceUntilRead) {
  auto ctx = make_context();
  const Graph g = toy_update_graph();
  Program program(
      ctx, g,
      {.resident_params = true, .writebacks = {{"w.new", "w"}, {"count.new", "count"}}, .device_outputs = {"loss"}});
  EXPECT_THROW((void)program.read_output("loss"), Error);  // no run yet
  std::vector<float> w = kToyW;
  write_toy_params(program);
  const std::vector<float>& x = kToyX;
  for (int step = 0; step < 3; ++step) {
    const TensorMap out = program.run({{"x", HostTensor::f32({3}, x)}});
    EXPECT_TRUE(out.empty()) << "step " << step;
    float loss = 0.f;
    for (int i = 0; i < 3; ++i) loss += x[i] * w[i];
    EXPECT_FLOAT_EQ(static_cast<float>(program.read_output("loss").at(0)), loss) << "step " << step;
    for (int i = 0; i < 3; ++i) w[i] = w[i] - 0.5f * x[i] * w[i];
  }
  // A run that throws (a missing input) leaves no value to read.
  EXPECT_THROW((void)program.run({}), Error);
  EXPECT_THROW((void)program.read_output("loss"), Error);

  const auto refused = [&](ProgramOptions options, const std::string& fragment) {
    expect_refused(ctx, g, std::move(options), fragment);
  };
  refused({.device_outputs = {"nope"}}, "no output has that name");
  refused({.device_outputs = {"loss", "loss"}}, "named twice");
  refused({.resident_params = true, .writebacks = {{"w.new", "w"}}, .device_outputs = {"w.new"}}, "writeback source");
  Program plain(ctx, g);
  EXPECT_THROW((void)plain.read_output("loss"), Error);  // not a device output
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

TEST_F(VkTest, TimestampsGiveOneNonNegativeTimePerDispatch) {
  auto ctx = make_context();
  if (!ctx->info().timestamps_supported) GTEST_SKIP() << ctx->info().summary() << " has no timestamp queries";
  const Graph g = toy_update_graph();
  Program program(ctx, g, {.timestamps = true});
  EXPECT_TRUE(program.timings().empty()) << "timings before the first run";
  const TensorMap in{{"x", HostTensor::f32({3}, {1.f, 2.f, 3.f})},
                     {"w", HostTensor::f32({3}, {1.f, 2.f, 3.f})},
                     {"count", HostTensor::f32({}, {0.f})}};
  (void)program.run(in);
  const std::vector<DispatchTiming> timings = program.timings();
  ASSERT_EQ(timings.size(), program.stats().dispatches);
  double longest = 0;
  for (const DispatchTiming& t : timings) {
    EXPECT_GE(t.microseconds, 0.0) << t.op;
    // The node's op, or a label that names it (a fused group names every op it runs, ending with
    // the node's, on which the group's launch sits).
    const std::string op(op_name(g.node(t.node).op));
    EXPECT_TRUE(t.op == op || (t.op.starts_with("fused(") && t.op.ends_with(op + ")"))) << t.op << " on " << op;
    longest = std::max(longest, t.microseconds);
  }
  EXPECT_GE(program.dispatch_span_microseconds(), longest);
  Program untimed(ctx, g);
  (void)untimed.run(in);
  EXPECT_TRUE(untimed.timings().empty());
  EXPECT_EQ(untimed.dispatch_span_microseconds(), 0.0);
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

}  // namespace
}  // namespace tg::vk
