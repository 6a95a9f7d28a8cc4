// The layout and structure families on the Vulkan executor, against tg::interpret in f32 mode:
// reshape, permute, swap_axes, broadcast_to, sum_to_shape, narrow, pad, concat and arange, on f32,
// i32 and bool, with sizes that are not multiples of the workgroup size, long sum_to_shape
// preimages, guard regions (no write outside a value) and concat's input limit. Data movement
// must be bit-exact; sum_to_shape on small integers is exact too (every partial sum fits in f32).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "support/library.h"
#include "tensorgrad/vk/executor.h"
#include "vk_oracle_check.h"
#include "vk_test_support.h"

namespace tg::vk {
namespace {

using testing::VkTest;

using testing::random_f32;
using testing::small_integers_f32;

HostTensor random_i32(Shape shape, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<std::int32_t> dist(-(1 << 30), 1 << 30);
  std::vector<std::int32_t> v(static_cast<std::size_t>(num_elements(shape)));
  for (auto& x : v) x = dist(rng);
  return HostTensor::i32(std::move(shape), v);
}

HostTensor random_bool(Shape shape, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<double> v(static_cast<std::size_t>(num_elements(shape)));
  for (auto& x : v) x = static_cast<double>(rng() & 1u);
  return HostTensor::of({DType::boolean, std::move(shape)}, v);
}

void expect_close(const TensorMap& got, const TensorMap& want, double rel = 0) {
  ASSERT_EQ(got.size(), want.size());
  for (const auto& [name, w] : want) {
    const HostTensor& g = got.at(name);
    ASSERT_EQ(g.type, w.type) << name;
    std::size_t bad = 0;
    for (std::size_t i = 0; i < w.size() && bad < 10; ++i) {
      const double tol = rel * std::max(1.0, std::fabs(w.at(i)));
      if (!(std::fabs(g.at(i) - w.at(i)) <= tol)) {
        ++bad;
        ADD_FAILURE() << name << "[" << i << "]: got " << g.at(i) << ", want " << w.at(i);
      }
    }
  }
}

// Runs g on Vulkan (plain and with guards) and compares with the f32 interpreter.
void check(const std::shared_ptr<Context>& ctx, const Graph& g, const TensorMap& in, double rel = 0) {
  const TensorMap want = interpret(g, in, {.compute = ComputeType::f32}).outputs;
  Program program(ctx, g);
  const TensorMap first = program.run(in);
  expect_close(first, want, rel);
  // Replays give the same bits.
  const TensorMap second = program.run(in);
  for (const auto& [name, t] : first) EXPECT_EQ(t.to_f64(), second.at(name).to_f64()) << name;
  Program guarded(ctx, g, {.guard_bytes = 64});
  expect_close(guarded.run(in), want, rel);
  EXPECT_TRUE(guarded.check_guards().empty()) << testing::join_lines(guarded.check_guards());
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

TEST_F(VkTest, LayoutMovesF32) {
  auto ctx = make_context();
  GraphBuilder b("layout_f32");
  TracingScope scope(b);
  Tensor x = b.input("x", {DType::f32, {3, 5, 7, 11}});
  Tensor v = b.input("v", {DType::f32, {13, 1}});
  b.output("reshape", reshape(x, {15, 77}));
  b.output("permute", permute(x, {2, 0, 3, 1}));
  b.output("permute_id", permute(x, {0, 1, 2, 3}));
  b.output("swap", swap_axes(x, 1, 3));
  b.output("swap_neighbours", swap_axes(x, 2, 3));
  b.output("bcast", broadcast_to(v, {4, 13, 29}));
  b.output("bcast_x", broadcast_to(x, {2, 3, 5, 7, 11}));
  b.output("bcast_mid", broadcast_to(reshape(x, {3, 1, 385}), {3, 6, 385}));
  b.output("chain", permute(broadcast_to(swap_axes(x, 0, 1), {2, 5, 3, 7, 11}), {4, 2, 0, 3, 1}));
  const Graph g = b.take();
  check(ctx, g, {{"x", random_f32({3, 5, 7, 11}, 1)}, {"v", random_f32({13, 1}, 2)}});
}

TEST_F(VkTest, LayoutMovesI32AndBoolBitExactly) {
  auto ctx = make_context();
  GraphBuilder b("layout_ints");
  TracingScope scope(b);
  Tensor i = b.input("i", {DType::i32, {6, 1, 9}});
  Tensor c = b.input("c", {DType::boolean, {4, 5, 3}});
  b.output("ri", reshape(i, {54}));
  b.output("pi", permute(i, {2, 1, 0}));
  b.output("bi", broadcast_to(i, {2, 6, 7, 9}));
  b.output("sc", swap_axes(c, 0, 2));
  b.output("bc", broadcast_to(c, {3, 4, 5, 3}));
  b.output("ni", narrow(i, 2, 3, 5));
  b.output("pdi", pad(i, 0, 2, 3));
  b.output("pdc", pad(c, 2, 0, 4));
  b.output("cc", concat({c, c, narrow(c, 1, 1, 2)}, 1));
  b.output("ci", concat({i, i}, 1));
  const Graph g = b.take();
  check(ctx, g, {{"i", random_i32({6, 1, 9}, 3)}, {"c", random_bool({4, 5, 3}, 4)}});
}

TEST_F(VkTest, SumToShapeIsExactOnIntegersAndHandlesLongPreimages) {
  auto ctx = make_context();
  GraphBuilder b("sum_to_shape");
  TracingScope scope(b);
  Tensor x = b.input("x", {DType::f32, {2, 3, 4, 5}});
  Tensor y = b.input("y", {DType::f32, {7, 300, 4}});
  Tensor z = b.input("z", {DType::f32, {70001}});
  Tensor w = b.input("w", {DType::f32, {3, 1000, 5}});
  b.output("every_other", sum_to_shape(x, {2, 1, 4, 1}));
  b.output("leading", sum_to_shape(y, {4}));
  b.output("leading_and_one", sum_to_shape(y, {1, 4}));
  b.output("middle", sum_to_shape(w, {3, 1, 5}));
  b.output("all", sum_to_shape(z, {}));
  b.output("all_ones", sum_to_shape(x, {1, 1, 1, 1}));
  b.output("none", sum_to_shape(x, {2, 3, 4, 5}));
  b.output("outer", sum_to_shape(w, {1, 1000, 5}));
  // Longer than one 4096-term block: a workgroup per output, over two summed axes that do not
  // merge (u), and over more than 256 blocks, so more than one round of partials (v).
  Tensor u = b.input("u", {DType::f32, {2, 3, 4100, 5}});
  Tensor v = b.input("v", {DType::f32, {2, 600000, 3}});
  b.output("blocks", sum_to_shape(u, {1, 3, 1, 5}));
  b.output("rounds", sum_to_shape(v, {1, 1, 3}));
  const Graph g = b.take();
  const TensorMap in{{"x", small_integers_f32({2, 3, 4, 5}, 5)},     {"y", small_integers_f32({7, 300, 4}, 6)},
                     {"z", small_integers_f32({70001}, 7)},          {"w", small_integers_f32({3, 1000, 5}, 8)},
                     {"u", small_integers_f32({2, 3, 4100, 5}, 13)}, {"v", small_integers_f32({2, 600000, 3}, 14)}};
  check(ctx, g, in);
}

TEST_F(VkTest, SumToShapeOnRealsMatchesTheInterpreterBitForBit) {
  auto ctx = make_context();
  GraphBuilder b("sum_to_shape_real");
  TracingScope scope(b);
  Tensor x = b.input("x", {DType::f32, {37, 1, 29, 3}});
  b.output("a", sum_to_shape(x, {1, 1, 29, 1}));
  b.output("b", sum_to_shape(broadcast_to(x, {5, 37, 4, 29, 3}), {37, 1, 1, 3}));
  Tensor l = b.input("long", {DType::f32, {3, 9001, 2}});
  b.output("c", sum_to_shape(l, {1, 2}));
  b.output("d", sum_to_shape(l, {3, 1, 1}));
  // The row form [rows, cols] -> [cols] (sum_rows.comp, then the ordered block sum): ragged column
  // chunks and a scalar block sum (67 columns), whole chunks and a vec4 block sum (128).
  Tensor r67 = b.input("r67", {DType::f32, {1000, 67}});
  Tensor r128 = b.input("r128", {DType::f32, {4, 150, 128}});
  b.output("e", sum_to_shape(r67, {67}));
  b.output("e_one_block", sum_to_shape(narrow(r67, 0, 0, 200), {1, 67}));
  b.output("f", sum_to_shape(r128, {1, 128}));
  // Short preimages of few outputs, loaded by a workgroup each ("staged"): a one-column bias
  // gradient, a strided preimage of 200 terms, and the most outputs that stay staged.
  Tensor s256 = b.input("s256", {DType::f32, {256, 1}});
  Tensor s3 = b.input("s3", {DType::f32, {3, 40, 5}});
  Tensor s1024 = b.input("s1024", {DType::f32, {1024, 33}});
  b.output("g", sum_to_shape(s256, {1}));
  b.output("h", sum_to_shape(s3, {3, 1, 1}));
  b.output("i", sum_to_shape(s3, {1, 40, 1}));
  b.output("j", sum_to_shape(s1024, {1024, 1}));
  // Past 1024 outputs, ROWS preimages per workgroup: LayerNorm's row sums (a ragged last group of
  // rows), and a strided preimage.
  Tensor ln = b.input("ln", {DType::f32, {3, 347, 128}});
  b.output("k", sum_to_shape(ln, {3, 347, 1}));
  Tensor mid = b.input("mid", {DType::f32, {40, 64, 30}});
  b.output("l", sum_to_shape(mid, {40, 1, 30}));
  const Graph g = b.take();
  // The same order as the interpreter (blocks of 256 terms past 256), so the same bits.
  check(ctx, g,
        {{"x", random_f32({37, 1, 29, 3}, 9)},
         {"long", random_f32({3, 9001, 2}, 15)},
         {"r67", random_f32({1000, 67}, 16)},
         {"r128", random_f32({4, 150, 128}, 17)},
         {"s256", random_f32({256, 1}, 18)},
         {"s3", random_f32({3, 40, 5}, 19)},
         {"s1024", random_f32({1024, 33}, 20)},
         {"ln", random_f32({3, 347, 128}, 21)},
         {"mid", random_f32({40, 64, 30}, 22)}});

  // The row form is two dispatches; a short preimage or another layout stays one.
  const auto dispatches = [&](const Shape& in, const Shape& to) {
    GraphBuilder one("one_sum");
    TracingScope one_scope(one);
    one.output("s", sum_to_shape(one.input("x", {DType::f32, in}), to));
    return Program(ctx, one.take()).stats().dispatches;
  };
  EXPECT_EQ(dispatches({1000, 67}, {67}), 2u);
  EXPECT_EQ(dispatches({256, 67}, {67}), 1u);  // one block: the row kernel writes the output
  EXPECT_EQ(dispatches({1000, 67}, {1000, 1}), 1u);
}

TEST_F(VkTest, StructureOpsOnOddSizes) {
  auto ctx = make_context();
  GraphBuilder b("structure");
  TracingScope scope(b);
  Tensor x = b.input("x", {DType::f32, {17, 23, 3}});
  Tensor y = b.input("y", {DType::f32, {17, 5, 3}});
  Tensor r = b.input("r", {DType::f32, {70003}});
  b.output("n0", narrow(x, 0, 4, 9));
  b.output("n1", narrow(x, 1, 22, 1));
  b.output("n2", narrow(x, 2, 1, 2));
  b.output("nr", narrow(r, 0, 3, 70000));
  b.output("p0", pad(x, 0, 1, 0));
  b.output("p1", pad(x, 1, 3, 2));
  b.output("p2", pad(x, 2, 0, 5));
  b.output("pr", pad(r, 0, 257, 300));
  b.output("c1", concat({x}, 1));
  b.output("c3", concat({x, y, x}, 1));
  b.output("c8", concat({x, y, x, y, y, x, narrow(x, 1, 2, 7), y}, 1));
  b.output("c_last", concat({x, x, pad(x, 2, 1, 1)}, 2));
  b.output("c_first", concat({r, narrow(r, 0, 10, 300)}, 0));
  const Graph g = b.take();
  check(ctx, g,
        {{"x", random_f32({17, 23, 3}, 10)}, {"y", random_f32({17, 5, 3}, 11)}, {"r", random_f32({70003}, 12)}});
}

TEST_F(VkTest, ArangeFillsIndices) {
  auto ctx = make_context();
  GraphBuilder b("arange");
  TracingScope scope(b);
  Tensor x = b.input("x", {DType::f32, {1}});
  b.output("f", add(arange(1000, DType::f32), x));
  b.output("i", arange(70001, DType::i32));
  b.output("one", arange(1, DType::i32));
  const Graph g = b.take();
  check(ctx, g, {{"x", HostTensor::f32({1}, {0.5f})}});
}

TEST_F(VkTest, ConcatOfMoreThanEightInputsIsRefusedClearly) {
  auto ctx = make_context();
  GraphBuilder b("concat9");
  TracingScope scope(b);
  Tensor x = b.input("x", {DType::f32, {2, 3}});
  b.output("y", concat(std::vector<Tensor>(9, x), 0));
  const Graph g = b.take();
  try {
    Program program(ctx, g);
    ADD_FAILURE() << "a concat of 9 inputs should be refused";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("concat"), std::string::npos) << what;
    EXPECT_NE(what.find("9 inputs"), std::string::npos) << what;
  }
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

}  // namespace
}  // namespace tg::vk
