// Transposes absorbed into matmul (src/vk/transpose_absorb.cpp, the transposed-operand paths of
// shaders/matmul.comp): matmul(swap_axes(x, -2, -1), y) and friends must give the same bits as the
// materialized transpose (ProgramOptions::absorb_transposes = false), agree with the f64 oracle,
// record one dispatch fewer per absorbed transpose, and leave guard regions intact. Shapes cover
// both tile sizes, vec4 and scalar rows of each operand, ragged tiles, split-K, batched and 2-D
// rhs products, K = 0 and more tiles than workgroups. Transposes that must stay (graph outputs,
// other readers, a 2-D rhs under a rank-3 lhs) keep their dispatch and the results stay right.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "../../examples/models.h"
#include "ir/ops/matmul_layout.h"
#include "support/library.h"
#include "tensorgrad/ir/ops/ids/layout.h"
#include "tensorgrad/ir/ops/ids/matmul.h"
#include "tensorgrad/vk/executor.h"
#include "vk/fusion.h"
#include "vk/kernels/kernels.h"
#include "vk/transpose_absorb.h"
#include "vk_oracle_check.h"
#include "vk_test_support.h"
#include "vk_transformer_step.h"

namespace tg::vk {
namespace {

using testing::compile_transformer;
using testing::expect_same_bits;
using testing::random_f32;
using testing::VkTest;

constexpr int kLhs = 1;  // which operands are built as swap_axes of an input
constexpr int kRhs = 2;
constexpr int kBoth = kLhs | kRhs;

Shape swapped(Shape s) {
  std::swap(s[s.size() - 2], s.back());
  return s;
}

std::string which_name(int which) { return which == kBoth ? "both" : which == kLhs ? "lhs" : "rhs"; }

struct Expect {
  std::size_t absorbed = 0;          // ProgramStats::absorbed_transposes (and the dispatches saved)
  std::size_t dispatches = 0;        // > 0: the absorbed program records exactly this many
  bool guards = true;                // also run with 256-byte guard regions
  bool replay = true;                // a second run repeats the bits
  std::uint32_t max_workgroups = 0;  // ProgramOptions::max_workgroups of every program
};

// Runs g with and without absorption (and absorbed with guards): the same bits everywhere, the
// dispatch counts and stats as expected, the outputs within `tol` of the f64 oracle (nullopt: the
// property suites' graph_tolerance bound), guards intact.
void check_graph(const std::shared_ptr<Context>& ctx, const Graph& g, const TensorMap& in, const Expect& expect,
                 std::optional<double> tol = std::nullopt) {
  Program plain(ctx, g, {.absorb_transposes = false, .max_workgroups = expect.max_workgroups});
  Program absorbed(ctx, g, {.max_workgroups = expect.max_workgroups});
  EXPECT_EQ(plain.stats().absorbed_transposes, 0u);
  EXPECT_EQ(absorbed.stats().absorbed_transposes, expect.absorbed);
  EXPECT_EQ(plain.stats().dispatches - absorbed.stats().dispatches, expect.absorbed);
  if (expect.dispatches > 0) {
    EXPECT_EQ(absorbed.stats().dispatches, expect.dispatches);
  }

  const TensorMap want = plain.run(in);
  const TensorMap got = absorbed.run(in);
  expect_same_bits(want, got, "absorbed vs materialized");
  if (expect.replay) expect_same_bits(got, absorbed.run(in), "replay");
  if (expect.guards) {
    Program guarded(ctx, g, {.guard_bytes = 256, .max_workgroups = expect.max_workgroups});
    EXPECT_EQ(guarded.stats().absorbed_transposes, expect.absorbed);
    expect_same_bits(want, guarded.run(in), "with guards");
    EXPECT_TRUE(guarded.check_guards().empty()) << testing::join_lines(guarded.check_guards());
  }

  const InterpResult oracle = interpret(g, in, {.compute = ComputeType::f64, .keep_all_values = !tol.has_value()});
  const double bound = tol ? *tol : testing::f32_tolerance(g, oracle);
  for (const auto& [name, ref] : oracle.outputs) {
    const HostTensor& out = got.at(name);
    std::size_t bad = 0;
    for (std::size_t i = 0; i < ref.size(); ++i) {
      if (!(std::fabs(out.at(i) - ref.at(i)) <= bound) && ++bad <= 5) {
        ADD_FAILURE() << name << "[" << i << "]: Vulkan " << out.at(i) << ", f64 oracle " << ref.at(i) << " (allowed "
                      << bound << ")";
      }
    }
    EXPECT_EQ(bad, 0u) << name << ": elements off";
  }
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

struct Case {
  Shape a;  // the logical operands: c = a x b
  Shape b;
};

// c = matmul(a, b) with the operands in `which` built as swap_axes of inputs stored transposed.
// `dispatches`: those the absorbed program records (0: not checked), so a case keeps testing the
// path it was written for (2 for split-K).
void check_case(const std::shared_ptr<Context>& ctx, const Case& c, int which, std::uint32_t seed,
                std::size_t dispatches = 0, bool thorough = true, std::uint32_t max_workgroups = 0) {
  SCOPED_TRACE(shape_to_string(c.a) + " x " + shape_to_string(c.b) + ", transposed " + which_name(which));
  const bool lhs_t = (which & kLhs) != 0;
  const bool rhs_t = (which & kRhs) != 0;
  GraphBuilder builder("matmul_t");
  TracingScope scope(builder);
  Tensor a = builder.input("a", {DType::f32, lhs_t ? swapped(c.a) : c.a});
  Tensor b = builder.input("b", {DType::f32, rhs_t ? swapped(c.b) : c.b});
  builder.output("c", matmul(lhs_t ? swap_axes(a, -2, -1) : a, rhs_t ? swap_axes(b, -1, -2) : b));
  const Graph g = builder.take();
  const TensorMap in{{"a", random_f32(g.type(*g.find_input("a")).shape, seed)},
                     {"b", random_f32(g.type(*g.find_input("b")).shape, seed + 1)}};

  // A transposed lhs is absorbed when it is 2-D or the product batched (its leading dims not folded
  // into rows); empty transposes have no dispatch to save.
  Expect expect{.dispatches = dispatches, .guards = thorough, .replay = thorough, .max_workgroups = max_workgroups};
  if (lhs_t && num_elements(c.a) > 0 && (c.a.size() == 2 || !matmul_layout(c.a, c.b).folded)) ++expect.absorbed;
  if (rhs_t && num_elements(c.b) > 0) ++expect.absorbed;
  // graph_tolerance: the matmul class at reduction length K (a transpose is exact), relative to
  // max(1, the largest |value|), as in vk_matmul_test.cpp.
  check_graph(ctx, g, in, expect);
}

void check_all(const std::shared_ptr<Context>& ctx, const Case& c, std::uint32_t seed, std::size_t dispatches = 0) {
  for (int which : {kLhs, kRhs, kBoth})
    check_case(ctx, c, which, seed + 10 * static_cast<std::uint32_t>(which), dispatches);
}

TEST_F(VkTest, MatmulTransposedSmallTiles) {
  auto ctx = make_context();
  check_all(ctx, {{1, 1}, {1, 1}}, 1, 1);
  check_all(ctx, {{17, 33}, {33, 29}}, 3, 1);  // every extent ragged
  check_all(ctx, {{64, 64}, {64, 64}}, 5, 1);  // one tile, four K slices
  check_all(ctx, {{130, 70}, {70, 257}}, 7);   // 3x5 tiles, ragged K
  check_all(ctx, {{65, 16}, {16, 63}}, 9, 1);  // one past / one short of a tile
}

// 128x128 tiles: vec4 and scalar loads of each transposed operand (a transposed A's rows have M
// words, a transposed B's rows K words) and of C.
TEST_F(VkTest, MatmulTransposedLargeTilesVec4AndScalarRows) {
  auto ctx = make_context();
  check_all(ctx, {{1024, 48}, {48, 1024}}, 31, 1);    // vec4 everywhere
  check_all(ctx, {{1025, 120}, {120, 1026}}, 33, 1);  // A^T scalar (M odd), B^T vec4, C scalar
  check_all(ctx, {{1000, 30}, {30, 1024}}, 35, 1);    // A^T vec4, B^T scalar (K % 4 = 2)
  check_all(ctx, {{1030, 37}, {37, 1031}}, 37, 1);    // scalar everywhere, ragged tiles
}

// Few tiles and a long K: split-K ranges start k_range stored rows further down a transposed
// operand (2 dispatches), in both tilings, vec4 and scalar; and a K without an even split.
TEST_F(VkTest, MatmulTransposedSplitK) {
  auto ctx = make_context();
  // The tiled kernel's tiles and splits (CPU devices run these products as row blocks).
  const ScopedMatmulKernelForTesting tiles(LaunchThresholds::ConvKernel::tiles);
  check_all(ctx, {{64, 4096}, {4096, 64}}, 41, 2);    // one small tile, 64 ranges of 64
  check_all(ctx, {{100, 2048}, {2048, 30}}, 43, 2);   // ragged tiles, scalar C
  check_all(ctx, {{7, 1024}, {1024, 9}}, 45, 2);      // scalar sum, odd M and N
  check_all(ctx, {{1024, 256}, {256, 1024}}, 47, 2);  // large tiles, four ranges, vec4
  check_all(ctx, {{1023, 256}, {256, 1021}}, 49, 2);  // large tiles, four ranges, A^T scalar, B^T vec4
  check_all(ctx, {{5, 4099}, {4099, 3}}, 51, 1);      // K has no even split
}

TEST_F(VkTest, MatmulTransposedBatched) {
  auto ctx = make_context();
  check_all(ctx, {{2, 3, 17, 9}, {2, 3, 9, 13}}, 61, 1);
  check_all(ctx, {{2, 3, 70, 40}, {2, 3, 40, 66}}, 63, 1);  // 2x2 tiles per batch
  check_all(ctx, {{4, 1, 1}, {4, 1, 1}}, 65, 1);
  check_all(ctx, {{8, 136, 36}, {8, 36, 1032}}, 67, 1);  // large tiles, vec4 batch strides
  check_all(ctx, {{4, 385, 12}, {4, 12, 514}}, 69, 1);   // large tiles, A^T scalar, C scalar
}

// Batch dims that broadcast: a transposed operand's matrices are as far apart as the logical ones,
// a repeated one is read again for every batch it meets (stride 0).
TEST_F(VkTest, MatmulTransposedBroadcastBatches) {
  auto ctx = make_context();
  check_all(ctx, {{2, 1, 17, 9}, {3, 9, 13}}, 101, 1);       // both repeat, two batch groups
  check_all(ctx, {{17, 9}, {2, 3, 9, 13}}, 103, 1);          // a 2-D lhs shared by every batch
  check_all(ctx, {{2, 136, 36}, {3, 1, 36, 1032}}, 105, 1);  // large tiles, vec4
  check_all(ctx, {{2, 3, 5, 7}, {1, 1, 7, 11}}, 107);        // an rhs batch of 1s folds: lhs^T kept
}

// A 2-D rhs folds a rank-3+ lhs's leading dims into M: a transposed rhs is absorbed, a transposed
// lhs is not (its swap keeps its dispatch); a 2-D lhs is.
TEST_F(VkTest, MatmulTransposedUnderA2DRhs) {
  auto ctx = make_context();
  check_all(ctx, {{3, 5, 7}, {7, 11}}, 71);
  check_all(ctx, {{2, 3, 45, 19}, {19, 70}}, 73);
  check_all(ctx, {{270, 19}, {19, 70}}, 75, 1);
}

TEST_F(VkTest, MatmulTransposedEmptyOperands) {
  auto ctx = make_context();
  check_all(ctx, {{3, 0}, {0, 4}}, 81);  // K = 0: zeros, the empty transposes have no dispatch
  check_all(ctx, {{0, 5}, {5, 4}}, 83);  // M = 0: no matmul dispatch; B^T still absorbed
}

// 20 one-tile batches under a cap of 3 workgroups: each loops grid-stride over up to 7 tiles.
TEST_F(VkTest, MatmulTransposedMoreTilesThanWorkgroups) {
  auto ctx = make_context();
  check_case(ctx, {{20, 1, 2}, {20, 2, 1}}, kBoth, 91, 1, /*thorough=*/true, /*max_workgroups=*/3);
}

// At the real cap, TG_VK_LARGE=1 only: 65600 one-tile batches, above the 65535 workgroups of one
// dispatch. Once, no guards: lavapipe spends about 50 s on them.
TEST_F(VkTest, MatmulTransposedMoreTilesThanTheWorkgroupCapLarge) {
  const char* large = std::getenv("TG_VK_LARGE");
  if (!large || std::string(large) != "1") {
    GTEST_SKIP() << "needs TG_VK_LARGE=1: 2 x 65600 workgroups take about 50 s on lavapipe; "
                    "MatmulTransposedMoreTilesThanWorkgroups loops the same way under a cap of 3 workgroups";
  }
  auto ctx = make_context();
  check_case(ctx, {{65600, 1, 2}, {65600, 2, 1}}, kBoth, 91, 1, /*thorough=*/false);
}

// ---- graphs around the pass's rules ----

TensorMap random_inputs(const Graph& g, std::uint32_t seed) {
  TensorMap in;
  for (const GraphInput& i : g.inputs()) in.emplace(i.name, random_f32(g.type(i.value).shape, seed++));
  return in;
}

TEST_F(VkTest, TransposeReadElsewhereKeepsItsDispatch) {
  auto ctx = make_context();
  const TensorType x_type{DType::f32, {12, 9}}, y_type{DType::f32, {12, 7}};
  {  // also a graph output
    GraphBuilder b("output");
    TracingScope scope(b);
    const Tensor t = swap_axes(b.input("x", x_type), 0, 1);
    b.output("c", matmul(t, b.input("y", y_type)));
    b.output("t", t);
    const Graph g = b.take();
    check_graph(ctx, g, random_inputs(g, 1), {.absorbed = 0});
  }
  {  // also read by an elementwise op (a fused chain)
    GraphBuilder b("elementwise");
    TracingScope scope(b);
    const Tensor t = swap_axes(b.input("x", x_type), 1, 0);
    b.output("c", matmul(t, b.input("y", y_type)));
    b.output("d", exp(t) * 2.f + 1.f);
    const Graph g = b.take();
    check_graph(ctx, g, random_inputs(g, 3), {.absorbed = 0});
  }
  {  // a swap of other axes, and a permute that is not the last-two transpose
    GraphBuilder b("other_axes");
    TracingScope scope(b);
    const Tensor x = b.input("x", {DType::f32, {5, 4, 6}});
    b.output("c", matmul(swap_axes(x, 0, 1), b.input("y", {DType::f32, {4, 6, 3}})));
    b.output("d", matmul(permute(x, {1, 0, 2}), b.input("z", {DType::f32, {6, 2}})));
    const Graph g = b.take();
    check_graph(ctx, g, random_inputs(g, 5), {.absorbed = 0});
  }
  {  // two matmuls read one transpose, one of them as a folded rank-3 lhs: the swap stays
    GraphBuilder b("mixed");
    TracingScope scope(b);
    const Tensor t = swap_axes(b.input("x", {DType::f32, {2, 6, 5}}), -1, -2);  // [2, 5, 6]
    b.output("c", matmul(t, b.input("y", {DType::f32, {6, 4}})));
    b.output("d", matmul(t, b.input("z", {DType::f32, {2, 6, 3}})));
    const Graph g = b.take();
    check_graph(ctx, g, random_inputs(g, 7), {.absorbed = 0});
  }
}

TEST_F(VkTest, TransposesSharedChainedAndPermuted) {
  auto ctx = make_context();
  {  // one transpose read by two matmuls, as lhs and as rhs: one dispatch saved
    GraphBuilder b("shared");
    TracingScope scope(b);
    const Tensor t = swap_axes(b.input("x", {DType::f32, {9, 9}}), 0, 1);
    b.output("c", matmul(t, b.input("y", {DType::f32, {9, 4}})));
    b.output("d", matmul(b.input("z", {DType::f32, {3, 9}}), t));
    b.output("e", matmul(t, t));
    const Graph g = b.take();
    check_graph(ctx, g, random_inputs(g, 11), {.absorbed = 1});
  }
  {  // the attention pattern: k^T in the forward and its swap back in the backward cancel out
    GraphBuilder b("attention");
    TracingScope scope(b);
    const TensorType head{DType::f32, {2, 3, 20, 8}};
    const Tensor q = b.input("q", head), k = b.input("k", head);
    const Tensor g_s = b.input("g", {DType::f32, {2, 3, 20, 20}});
    const Tensor k_t = swap_axes(k, -1, -2);
    b.output("s", matmul(q, k_t));
    b.output("dq", matmul(g_s, swap_axes(k_t, -1, -2)));  // reads k itself
    b.output("dk_t", matmul(swap_axes(q, -1, -2), g_s));
    const Graph g = b.take();
    check_graph(ctx, g, random_inputs(g, 13), {.absorbed = 3, .dispatches = 3});
  }
  {  // a chain whose middle value is a graph output: only the outer swap goes
    GraphBuilder b("chain_output");
    TracingScope scope(b);
    const Tensor t1 = swap_axes(b.input("x", {DType::f32, {7, 5}}), 0, 1);
    b.output("t1", t1);
    b.output("c", matmul(swap_axes(t1, 0, 1), b.input("y", {DType::f32, {5, 6}})));
    const Graph g = b.take();
    check_graph(ctx, g, random_inputs(g, 15), {.absorbed = 1});
  }
  {  // permute of the last two axes, batched
    GraphBuilder b("permute");
    TracingScope scope(b);
    const Tensor x = b.input("x", {DType::f32, {3, 10, 6}});
    b.output("c", matmul(permute(x, {0, 2, 1}), b.input("y", {DType::f32, {3, 10, 4}})));
    const Graph g = b.take();
    check_graph(ctx, g, random_inputs(g, 17), {.absorbed = 1, .dispatches = 1});
  }
}

// The matmul now reads the transpose's input: with memory reuse on, that value must stay alive
// until the matmul although values of its size come and go in between; an intermediate fed through
// a reshape (an alias) and the intermediate of a fused elementwise run, too.
TEST_F(VkTest, AbsorbedTransposeInputsStayAlive) {
  auto ctx = make_context();
  GraphBuilder b("lifetimes");
  TracingScope scope(b);
  const Tensor x = b.input("x", {DType::f32, {2, 8, 16}});
  const Tensor y = b.input("y", {DType::f32, {16, 5}});
  const Tensor u = x * 2.f;  // fused run (u, h): u is read by the swap below
  const Tensor h = u + 1.f;
  const Tensor t_u = swap_axes(reshape(u, {16, 16}), 0, 1);
  Tensor filler = tanh(h);
  for (int i = 0; i < 4; ++i) filler = tanh(matmul(reshape(filler, {16, 16}), reshape(filler * 0.5f, {16, 16})));
  const Tensor e = exp(x);  // a node's value read through a reshape
  const Tensor t_e = swap_axes(reshape(e, {16, 16}), -1, -2);
  Tensor more = sin(x);
  for (int i = 0; i < 3; ++i) more = reshape(matmul(reshape(more, {16, 16}), reshape(cos(more), {16, 16})), {2, 8, 16});
  b.output("c", matmul(t_u, reshape(filler, {16, 16})));
  b.output("d", matmul(t_e, y));
  b.output("m", more);
  const Graph g = b.take();
  check_graph(ctx, g, random_inputs(g, 21), {.absorbed = 2});
}

// A resident param with a writeback read transposed: the two recordings swap its ranges.
TEST_F(VkTest, AbsorbedTransposeOfAWrittenBackParam) {
  auto ctx = make_context();
  GraphBuilder b("writeback");
  TracingScope scope(b);
  const Tensor w = b.param("w", {DType::f32, {4, 6}});
  const Tensor x = b.input("x", {DType::f32, {5, 6}});
  const Tensor y = matmul(x, swap_axes(w, 0, 1));  // [5, 4]
  b.output("y", y);
  b.output("w_new", w - matmul(swap_axes(y, 0, 1), x) * 0.01f);  // [4, 6]
  const Graph g = b.take();
  const ProgramOptions base{.resident_params = true, .writebacks = {{"w_new", "w"}}};
  ProgramOptions off = base;
  off.absorb_transposes = false;
  Program plain(ctx, g, off), absorbed(ctx, g, base);
  EXPECT_EQ(absorbed.stats().absorbed_transposes, 2u);
  const HostTensor w0 = random_f32({4, 6}, 31);
  plain.write_input("w", w0);
  absorbed.write_input("w", w0);
  for (std::uint32_t step = 0; step < 3; ++step) {
    const TensorMap in{{"x", random_f32({5, 6}, 40 + step)}};
    expect_same_bits(plain.run(in), absorbed.run(in), "step " + std::to_string(step));
  }
  expect_same_bits({{"w", plain.read_input("w")}}, {{"w", absorbed.read_input("w")}}, "params after 3 steps");
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

// ---- the workloads' training steps ----

struct TransposeCounts {
  std::size_t swaps = 0;         // swap_axes nodes
  std::size_t last_two = 0;      // ... of the last two axes
  std::size_t only_matmuls = 0;  // ... read by matmuls only
  std::size_t absorbed = 0;      // dropped by the pass
};

TransposeCounts count_transposes(const Graph& g) {
  TransposeCounts c;
  std::vector<std::vector<OpId>> readers(g.values().size());
  for (const Node& n : g.nodes())
    for (ValueId v : n.inputs) readers[static_cast<std::size_t>(v)].push_back(n.op);
  for (const Node& n : g.nodes()) {
    if (n.op != op::SwapAxes) continue;
    ++c.swaps;
    const auto rank = static_cast<std::int64_t>(g.type(n.output).shape.size());
    const std::int64_t a0 = n.attrs.integer("axis0"), a1 = n.attrs.integer("axis1");
    if (std::min(a0, a1) != rank - 2 || std::max(a0, a1) != rank - 1) continue;
    ++c.last_two;
    const auto& r = readers[static_cast<std::size_t>(n.output)];
    if (!r.empty() && std::all_of(r.begin(), r.end(), [](OpId op) { return op == op::Matmul; })) ++c.only_matmuls;
  }
  std::vector<KernelLaunch> launches;
  for (const Node& n : g.nodes()) launches.push_back(kernel_plan_table()[static_cast<std::size_t>(n.op)](g, n));
  launches = fuse_elementwise(g, std::move(launches));
  c.absorbed = absorb_transposes(g, launches).dropped.size();
  return c;
}

// No device needed: the pass on W2's step graph (bench/profile_step.cpp's W2). Every last-two
// transpose that only matmuls read goes, and so do the swaps back of attention's k^T.
TEST(VkTransposeAbsorb, W2StepGraphCounts) {
  const Training t = compile_transformer({}, 32);
  const TransposeCounts c = count_transposes(t.graph());
  std::cout << "W2 step graph: " << c.swaps << " swap_axes, " << c.last_two << " of the last two axes, "
            << c.only_matmuls << " read by matmuls only, " << c.absorbed << " absorbed\n";
  EXPECT_GE(c.absorbed, c.only_matmuls);
  EXPECT_GT(c.absorbed, 0u);
}

// W2 shrunk (it fits lavapipe): one training step with and without absorption, the same bits in
// every output (loss, gradients, updated params and optimizer state).
TEST_F(VkTest, W2SmallStepGivesTheSameBitsWithAbsorbedTransposes) {
  auto ctx = make_context();
  const examples::TransformerConfig config{.vocab = 65, .context = 16, .width = 32, .layers = 2, .heads = 4};
  const Training t = compile_transformer(config, 4);
  const Graph& g = t.graph();
  const TransposeCounts c = count_transposes(g);
  std::cout << "W2_small step graph: " << c.swaps << " swap_axes, " << c.last_two << " of the last two axes, "
            << c.only_matmuls << " read by matmuls only, " << c.absorbed << " absorbed\n";
  const TensorMap in = testing::transformer_step_inputs(t, config.vocab);
  Program plain(ctx, g, {.absorb_transposes = false});
  Program absorbed(ctx, g);
  EXPECT_EQ(absorbed.stats().absorbed_transposes, c.absorbed);
  EXPECT_EQ(plain.stats().dispatches - absorbed.stats().dispatches, c.absorbed);
  std::cout << "dispatches " << plain.stats().dispatches << " -> " << absorbed.stats().dispatches << ", device bytes "
            << plain.stats().device_bytes << " -> " << absorbed.stats().device_bytes << "\n";
  expect_same_bits(plain.run(in), absorbed.run(in), "W2_small step");
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

}  // namespace
}  // namespace tg::vk
