// Early readback (ProgramOptions::early_readback_bytes): the run is submitted in segments and each
// output is read back and handed to the sink once its segment completes. The outputs must be the
// bits of the one-submission run, each handed over once, never before its last write (a fused
// dispatch recorded at a later node, a second run on other inputs); a sink that throws ends the
// run cleanly, and a failed index check still fails it.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "tensorgrad/ir/ops/api.h"
#include "tensorgrad/vk/executor.h"
#include "vk_test_support.h"

namespace tg::vk {
namespace {

using testing::VkTest;

// Outputs of every kind: a fused elementwise chain with an intermediate output, a matmul, a
// reduction, an input passed through, an empty value, and an index op for the failing case.
Graph many_outputs() {
  GraphBuilder b("early_readback");
  TracingScope scope(b);
  const Tensor x = b.input("x", {DType::f32, {64, 48}});
  const Tensor w = b.input("w", {DType::f32, {48, 32}});
  const Tensor empty = b.input("empty", {DType::f32, {0, 3}});
  const Tensor table = b.input("table", {DType::f32, {5, 4}});
  const Tensor ids = b.input("ids", {DType::i32, {6}});
  const Tensor e = exp(x * 0.01);
  const Tensor chained = e * 3.0 + 1.0;
  b.output("e", e);
  b.output("chained", chained);
  const Tensor y = matmul(chained, w);
  b.output("y", y);
  b.output("rows", sum(y, {1}));
  b.output("x_again", x);
  b.output("empty_twice", empty * 2.0);
  b.output("looked_up", embedding(table, ids));
  b.output("late", tanh(y) * sum(y, {0, 1}));
  return b.take();
}

TensorMap inputs_of(float shift, std::int32_t bad_id = 0) {
  std::vector<float> x(64 * 48), w(48 * 32), table(20);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 97) * 0.03f - 1.2f + shift;
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i % 13) * 0.01f - 0.05f * shift;
  for (std::size_t i = 0; i < table.size(); ++i) table[i] = static_cast<float>(i) + shift;
  return {{"x", HostTensor::f32({64, 48}, x)},
          {"w", HostTensor::f32({48, 32}, w)},
          {"empty", HostTensor::f32({0, 3}, {})},
          {"table", HostTensor::f32({5, 4}, table)},
          {"ids", HostTensor::i32({6}, {0, 4, 2, bad_id, 1, 3})}};
}

void expect_same_bits(const TensorMap& got, const TensorMap& expected, const std::string& what) {
  ASSERT_EQ(got.size(), expected.size()) << what;
  for (const auto& [name, value] : expected) {
    ASSERT_TRUE(got.contains(name)) << what << ": " << name;
    EXPECT_EQ(got.at(name).to_f32(), value.to_f32()) << what << ": " << name;
  }
}

TEST_F(VkTest, EarlyReadbackHandsEachOutputOverOnceWithTheBitsOfOneSubmission) {
  auto ctx = make_context();
  const Graph g = many_outputs();
  Program whole(ctx, g);
  // 4 bytes: a cut wherever an output became final.
  Program early(ctx, g, ProgramOptions{.early_readback_bytes = 4});
  EXPECT_EQ(whole.stats().segments, 1u);
  EXPECT_GT(early.stats().segments, 3u);
  for (const float shift : {0.0f, 0.5f}) {  // the second run must not see the first one's values
    const TensorMap expected = whole.run(inputs_of(shift));
    std::map<std::string, int> handed;
    TensorMap sunk;
    const TensorMap got = early.run(inputs_of(shift), true, [&](const std::string& name, const HostTensor& value) {
      ++handed[name];
      sunk.insert_or_assign(name, value);
    });
    expect_same_bits(got, expected, "returned, shift " + std::to_string(shift));
    expect_same_bits(sunk, expected, "handed to the sink, shift " + std::to_string(shift));
    for (const auto& [name, count] : handed) EXPECT_EQ(count, 1) << name;
  }
  // Without early readback a sink gets every output after the run.
  std::map<std::string, int> handed;
  whole.run(inputs_of(1.0f), true, [&](const std::string& name, const HostTensor&) { ++handed[name]; });
  EXPECT_EQ(handed.size(), g.outputs().size());
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

TEST_F(VkTest, EarlyReadbackSinkThatThrowsEndsTheRunAndTheProgramRunsOn) {
  auto ctx = make_context();
  const Graph g = many_outputs();
  Program whole(ctx, g);
  Program early(ctx, g, ProgramOptions{.early_readback_bytes = 4});
  int calls = 0;
  EXPECT_THROW(early.run(inputs_of(0.0f), true,
                         [&](const std::string&, const HostTensor&) {
                           if (++calls == 2) throw std::runtime_error("the sink gives up");
                         }),
               std::runtime_error);
  EXPECT_EQ(calls, 2);  // nothing handed over after the throw
  expect_same_bits(early.run(inputs_of(0.25f)), whole.run(inputs_of(0.25f)), "the run after");
  // An index out of range still fails a segmented run, after its outputs were handed over.
  try {
    early.run(inputs_of(0.0f, /*bad_id=*/7));
    ADD_FAILURE() << "an embedding id of 7 in a table of 5 rows ran";
  } catch (const RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find("out of range"), std::string::npos) << e.what();
  }
  expect_same_bits(early.run(inputs_of(0.75f)), whole.run(inputs_of(0.75f)), "the run after the index error");
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

// Program::input_staging: a value written straight into its upload memory and passed as a view of
// it gives the run of the same value passed from elsewhere; resident and unknown inputs are refused.
TEST_F(VkTest, InputWrittenIntoItsStagingRunsAsIfPassed) {
  auto ctx = make_context();
  const Graph g = many_outputs();
  Program program(ctx, g);
  const TensorMap inputs = inputs_of(0.5f);
  const TensorMap expected = program.run(inputs);
  const std::span<std::byte> staged = program.input_staging("x");
  ASSERT_EQ(staged.size(), 64u * 48u * sizeof(float));
  const HostTensor& x = inputs.at("x");
  std::memcpy(staged.data(), x.raw_data(), staged.size());
  TensorMap in_place = inputs;
  in_place.insert_or_assign(
      "x", HostTensor::view({64, 48}, std::span<const float>(reinterpret_cast<const float*>(staged.data()), 64 * 48)));
  expect_same_bits(program.run(in_place), expected, "x from its staging");
  EXPECT_THROW(program.input_staging("nope"), Error);
  ProgramOptions resident{.resident_params = true};
  GraphBuilder b("resident");
  {
    TracingScope scope(b);
    b.output("y", b.input("w", {DType::f32, {3}}, InputKind::param) * 2.0);
  }
  Program with_param(ctx, b.take(), resident);
  EXPECT_THROW(with_param.input_staging("w"), Error);
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

}  // namespace
}  // namespace tg::vk
