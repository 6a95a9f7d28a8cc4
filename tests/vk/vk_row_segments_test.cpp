// The row paths for many medium rows: reduce, softmax and softmax_causal with 32 invocations per
// row (mode 2, "row segments"), and sum_to_shape over contiguous rows (staged = 3). Each case
// first asserts from the Program's dispatch labels that the path under test is the one that ran,
// so a change of the host's choice cannot leave the path untested. reduce and softmax meet the f64
// oracle's graph tolerance (their order differs from the interpreter's, as mode 0's does);
// sum_to_shape must equal the f32 interpreter bit for bit (its order is the interpreter's).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "support/library.h"
#include "tensorgrad/vk/executor.h"
#include "vk_oracle_check.h"
#include "vk_test_support.h"

namespace tg::vk {
namespace {

using testing::check_against_oracle;
using testing::random_f32;
using testing::VkTest;

// How many of the program's dispatches carry `label`.
std::size_t dispatches_labelled(const std::shared_ptr<Context>& ctx, const Graph& g, const TensorMap& in,
                                const std::string& label) {
  Program program(ctx, g, {.timestamps = true});
  (void)program.run(in);
  std::size_t count = 0;
  for (const DispatchTiming& t : program.timings()) count += t.op == label ? 1 : 0;
  return count;
}

TEST_F(VkTest, ReduceRowSegmentsMatchTheOracle) {
  auto ctx = make_context();
  GraphBuilder b("reduce_segments");
  TracingScope scope(b);
  // 300 rows (not a multiple of the 8 per workgroup) of 100 along the contiguous last axis, the
  // same along a strided first axis, 130 rows of 1024 (the longest segmented length), and two
  // reduced axes merged into 128 terms.
  Tensor last = b.input("last", {DType::f32, {300, 100}});
  Tensor first = b.input("first", {DType::f32, {100, 300}});
  Tensor longest = b.input("longest", {DType::f32, {130, 1024}});
  Tensor two_axes = b.input("two_axes", {DType::f32, {130, 8, 16}});
  for (const auto& [name, v, axis] :
       {std::tuple{"last", last, 1}, std::tuple{"first", first, 0}, std::tuple{"longest", longest, 1}}) {
    const std::string s = name;
    b.output("sum_" + s, sum(v, axis));
    b.output("mean_" + s, mean(v, axis, {.keep_dims = true}));
    b.output("max_" + s, max(v, axis));
    b.output("min_" + s, min(v, axis));
    b.output("argmax_" + s, argmax(v, axis));
    b.output("argmin_" + s, argmin(v, axis));
  }
  b.output("sum_two_axes", sum(two_axes, {1, 2}));
  const Graph g = b.take();

  // Ties and NaN in some rows: argmax/argmin take the first extremum, the first NaN wins, max/min
  // propagate NaN, whichever lanes of a segment hold them.
  HostTensor last_values = random_f32({300, 100}, 1);
  for (std::size_t row = 0; row < 300; row += 7) {
    last_values.set(row * 100 + 90, 5.0);
    last_values.set(row * 100 + 33, 5.0);  // a tie: index 33 comes first
  }
  for (std::size_t row = 3; row < 300; row += 11) {
    last_values.set(row * 100 + 70, std::numeric_limits<double>::quiet_NaN());
    last_values.set(row * 100 + 40, std::numeric_limits<double>::quiet_NaN());
  }
  const TensorMap in{{"last", last_values},
                     {"first", random_f32({100, 300}, 2)},
                     {"longest", random_f32({130, 1024}, 3)},
                     {"two_axes", random_f32({130, 8, 16}, 4)}};
  EXPECT_EQ(dispatches_labelled(ctx, g, in, "sum (row segments)"), 4u);
  EXPECT_EQ(dispatches_labelled(ctx, g, in, "argmax (row segments)"), 3u);
  check_against_oracle(ctx, g, in, {.otherwise = std::nullopt});
}

TEST_F(VkTest, SoftmaxRowSegmentsMatchTheOracle) {
  auto ctx = make_context();
  GraphBuilder b("softmax_segments");
  TracingScope scope(b);
  Tensor rows = b.input("rows", {DType::f32, {200, 77}});
  Tensor middle = b.input("middle", {DType::f32, {4, 60, 50}});  // 200 rows of 60, elements 50 apart
  Tensor scores = b.input("scores", {DType::f32, {3, 50, 50}});  // 150 causal rows of 50
  b.output("softmax_rows", softmax(rows, 1));
  b.output("log_softmax_rows", log_softmax(rows, 1));
  b.output("softmax_middle", softmax(middle, 1));
  b.output("causal", softmax_causal(scores));
  const Graph g = b.take();
  // Values around 1000: the max subtraction must happen per segment row.
  const TensorMap in{{"rows", random_f32({200, 77}, 5, 995.f, 1005.f)},
                     {"middle", random_f32({4, 60, 50}, 6, -30.f, 30.f)},
                     {"scores", random_f32({3, 50, 50}, 7, 995.f, 1005.f)}};
  EXPECT_EQ(dispatches_labelled(ctx, g, in, "softmax (row segments)"), 2u);
  EXPECT_EQ(dispatches_labelled(ctx, g, in, "log_softmax (row segments)"), 1u);
  EXPECT_EQ(dispatches_labelled(ctx, g, in, "softmax_causal (row segments)"), 1u);
  check_against_oracle(ctx, g, in, {.otherwise = std::nullopt});
}

TEST_F(VkTest, SumToShapeContiguousRowsEqualTheF32Interpreter) {
  auto ctx = make_context();
  GraphBuilder b("sum_contiguous_rows");
  TracingScope scope(b);
  // 1100 rows of 40 (32 rows per workgroup, the last workgroup partial), 1200 rows of 200 (16 per
  // workgroup) over two kept axes that merge, and 1030 rows of 255 (odd: the row stride is len).
  Tensor short_rows = b.input("short_rows", {DType::f32, {1100, 40}});
  Tensor long_rows = b.input("long_rows", {DType::f32, {2, 600, 200}});
  Tensor odd_rows = b.input("odd_rows", {DType::f32, {1030, 255}});
  b.output("short", sum_to_shape(short_rows, {1100, 1}));
  b.output("long", sum_to_shape(long_rows, {2, 600, 1}));
  b.output("odd", sum_to_shape(odd_rows, {1030, 1}));
  const Graph g = b.take();
  const TensorMap in{{"short_rows", random_f32({1100, 40}, 8)},
                     {"long_rows", random_f32({2, 600, 200}, 9)},
                     {"odd_rows", random_f32({1030, 255}, 10)}};
  EXPECT_EQ(dispatches_labelled(ctx, g, in, "sum_to_shape (contiguous rows)"), 3u);
  Program program(ctx, g);
  const TensorMap got = program.run(in);
  const TensorMap want = interpret(g, in, {.compute = ComputeType::f32}).outputs;
  for (const auto& [name, w] : want) {
    const HostTensor& v = got.at(name);
    ASSERT_EQ(v.type, w.type) << name;
    std::size_t differ = 0;
    for (std::size_t i = 0; i < w.size(); ++i) differ += v.at(i) == w.at(i) ? 0 : 1;
    EXPECT_EQ(differ, 0u) << name << ": elements differing from the f32 interpreter";
  }
  check_against_oracle(ctx, g, in, {.otherwise = std::nullopt});
}

}  // namespace
}  // namespace tg::vk
