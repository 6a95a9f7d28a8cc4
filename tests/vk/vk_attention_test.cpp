// The attention family's Vulkan kernels (src/vk/kernels/attention.cpp, shaders/attention_*.comp)
// against the f64 oracle: the four ops over shapes that cross every tile and chunk edge (T = 1, T
// off the 32-row tiles, Tq != Tk, head_dim 1 .. 129 on both sides of the 64-column chunks, Dv != D,
// 0-2 batch axes, causal or not, empty rows and batches), the workgroup cap's grid-stride loops,
// the key and query chunks on both sides of their thresholds (occupancy and llvmpipe's loop
// budget), scores of 1e4, one long causal sequence; attention and its gradient against the same
// math composed from matmul and softmax on Vulkan; and plans that never hold a [T, T] value.
// Each test asserts from the dispatch labels which launch paths ran, and records the paths it
// reached for the coverage check (tests/coverage).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "support/library.h"
#include "support/path_coverage.h"
#include "support/tolerance.h"
#include "tensorgrad/ir/ops/attention.h"
#include "tensorgrad/ir/ops/ids/attention.h"
#include "tensorgrad/vk/executor.h"
#include "vk/kernels/kernels.h"
#include "vk_boundary_check.h"
#include "vk_oracle_check.h"
#include "vk_test_support.h"

namespace tg::vk {
namespace {

using testing::random_f32;
using testing::VkTest;

struct Case {
  std::string name;
  Shape batch;
  std::int64_t tq = 1, tk = 1, d = 1, dv = 1;
  bool causal = false;
  std::optional<double> scale;
  bool forward_only = false;  // attention alone, not its three siblings
};

Shape with(Shape batch, std::int64_t rows, std::int64_t cols) {
  batch.push_back(rows);
  batch.push_back(cols);
  return batch;
}

// Small integers in [-bound, bound] as f32 (exact scores with scale 1).
HostTensor integers_f32(const Shape& shape, int bound, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> dist(-bound, bound);
  std::vector<float> v(static_cast<std::size_t>(num_elements(shape)));
  for (float& x : v) x = static_cast<float>(dist(rng));
  return HostTensor::f32(shape, v);
}

// Adds case c's inputs (<name>.q, .k, .v, .g) and its four ops as outputs: o = attention,
// lse = attention_lse, and the backward ops on that o and lse with cotangent g; random inputs into
// `in` unless it is null (a graph only planned).
void add_ops(GraphBuilder& b, TensorMap* in, const Case& c, std::uint32_t seed, int integer_bound = 0) {
  const Shape qs = with(c.batch, c.tq, c.d), ks = with(c.batch, c.tk, c.d), vs = with(c.batch, c.tk, c.dv);
  const Shape os = with(c.batch, c.tq, c.dv);
  const Tensor q = b.input(c.name + ".q", {DType::f32, qs});
  const Tensor k = b.input(c.name + ".k", {DType::f32, ks});
  const Tensor v = b.input(c.name + ".v", {DType::f32, vs});
  const Tensor g = b.input(c.name + ".g", {DType::f32, os});
  const AttentionOptions options{.causal = c.causal, .scale = c.scale};
  const Tensor o = attention(q, k, v, options);
  b.output(c.name + ".o", o);
  if (!c.forward_only) {
    const Tensor lse = attention_lse(q, k, options);
    b.output(c.name + ".lse", lse);
    b.output(c.name + ".dq", attention_grad_q(q, k, v, o, g, lse, options));
    b.output(c.name + ".dkv", attention_grad_kv(q, k, v, o, g, lse, options));
  }
  if (!in) return;
  in->emplace(c.name + ".q", integer_bound ? integers_f32(qs, integer_bound, seed) : random_f32(qs, seed));
  in->emplace(c.name + ".k", integer_bound ? integers_f32(ks, integer_bound, seed + 1) : random_f32(ks, seed + 1));
  in->emplace(c.name + ".v", random_f32(vs, seed + 2));
  in->emplace(c.name + ".g", random_f32(os, seed + 3));
}

// Runs g on Vulkan (guard regions, timestamps, `options`) and on the f64 oracle: every output
// within its cone's bound, a replay with the same bits (unless `replay` is false), the guards
// intact. Returns how many dispatches carry each label.
std::map<std::string, std::size_t> check_with_oracle(const std::shared_ptr<Context>& ctx, const Graph& g,
                                                     const TensorMap& in, ProgramOptions options = {},
                                                     bool replay = true) {
  const InterpResult want = interpret(g, in, {.compute = ComputeType::f64, .keep_all_values = true});
  const std::vector<OutputTolerance> bounds = tg::testing::output_tolerances(g, want.values);
  options.guard_bytes = 64;
  options.timestamps = true;
  Program program(ctx, g, options);
  const TensorMap got = program.run(in);
  for (std::size_t o = 0; o < g.outputs().size(); ++o) {
    const std::string& name = g.outputs()[o].name;
    const HostTensor& w = want.outputs.at(name);
    const HostTensor& out = got.at(name);
    EXPECT_EQ(out.type, w.type) << name;
    const double tol = bounds[o].absolute();
    std::size_t bad = 0;
    for (std::size_t i = 0; i < w.size(); ++i) {
      const double a = out.at(i), e = w.at(i);
      if (!(a == e || std::fabs(a - e) <= tol) && ++bad <= 3) {
        ADD_FAILURE() << name << "[" << i << "]: Vulkan " << a << ", oracle " << e << " (allowed " << tol << ")";
      }
    }
    EXPECT_EQ(bad, 0u) << name << ": elements off";
  }
  std::map<std::string, std::size_t> labels;
  for (const DispatchTiming& t : program.timings()) ++labels[t.op];
  if (replay) {
    const TensorMap again = program.run(in);
    for (const auto& [name, t] : got) {
      EXPECT_TRUE(testing::same_bits(t.to_f64(), again.at(name).to_f64())) << name << " not bitwise replayable";
    }
  }
  EXPECT_TRUE(program.check_guards().empty()) << testing::join_lines(program.check_guards());
  return labels;
}

std::size_t count(const std::map<std::string, std::size_t>& labels, const std::string& label) {
  const auto it = labels.find(label);
  return it == labels.end() ? 0 : it->second;
}

class VkAttention : public VkTest {
 protected:
  void TearDown() override {
    tg::testing::write_path_coverage();
    VkTest::TearDown();
  }
};

// Shapes across the tiles (32 rows), the head_dim slices (32) and the column chunks (64), on the
// default launches and under a workgroup cap (grid-stride loops in every shader).
TEST_F(VkAttention, OpsMatchOracleAcrossShapes) {
  auto ctx = make_context();
  const std::vector<Case> cases = {
      {"t1", {}, 1, 1, 1, 1, false, {}},           {"t1_causal", {}, 1, 1, 4, 3, true, {}},
      {"q33_k65", {2}, 33, 65, 3, 5, false, {}},   {"c31_b2", {2, 2}, 31, 31, 5, 17, true, {}},
      {"c65", {1}, 65, 65, 17, 3, true, 0.7},      {"d63_dv65", {}, 40, 33, 63, 65, false, {}},
      {"d64_c33", {}, 33, 33, 64, 64, true, {}},   {"d65_dv63", {}, 20, 70, 65, 63, false, -0.3},
      {"d80_c17", {2}, 17, 17, 80, 80, true, {}},  {"d129", {}, 9, 40, 129, 1, false, {}},
      {"dv129_c12", {}, 12, 12, 1, 129, true, {}}, {"dv0", {}, 5, 6, 3, 0, false, {}},
      {"tq0", {}, 0, 7, 3, 2, false, {}},          {"batch0", {0}, 4, 4, 2, 2, true, {}}};
  GraphBuilder b("attention_shapes");
  TracingScope scope(b);
  TensorMap in;
  std::uint32_t seed = 100;
  for (const Case& c : cases) add_ops(b, &in, c, seed += 10);
  const Graph g = b.take();
  const auto labels = check_with_oracle(ctx, g, in);
  EXPECT_EQ(count(labels, "attention"), 11u);          // not dv0 (o is empty), tq0 or batch0
  EXPECT_EQ(count(labels, "attention_grad_kv"), 13u);  // tq0's dk and dv are zeros
  EXPECT_EQ(count(labels, "attention (key chunks)"), 0u);
  check_with_oracle(ctx, g, in, {.max_workgroups = 2});
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

// sum(attention(q, k, v) * w) and its gradients against the composed ops, both on Vulkan: each
// within its own oracle bound, so the two within the sum of the bounds.
TEST_F(VkAttention, GradientMatchesComposedOps) {
  auto ctx = make_context();
  const std::vector<Case> cases = {{"a", {2}, 33, 65, 17, 5, false, {}},
                                   {"b", {}, 65, 65, 3, 17, true, {}},
                                   {"c", {2, 1}, 31, 31, 65, 63, true, 0.25},
                                   {"d", {}, 1, 300, 5, 80, false, {}}};
  std::uint32_t seed = 300;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    std::map<std::string, HostTensor> results[2];
    double bound[2][4] = {};
    const std::vector<std::string> names = {"y", "grad.q", "grad.k", "grad.v"};
    TensorMap in;
    in.emplace("q", random_f32(with(c.batch, c.tq, c.d), seed += 10));
    in.emplace("k", random_f32(with(c.batch, c.tk, c.d), seed + 1));
    in.emplace("v", random_f32(with(c.batch, c.tk, c.dv), seed + 2));
    in.emplace("w", random_f32(with(c.batch, c.tq, c.dv), seed + 3));
    for (int fused = 0; fused < 2; ++fused) {
      GraphBuilder b(fused ? "fused" : "composed");
      TracingScope scope(b);
      const Tensor q = b.input("q", {DType::f32, in.at("q").type.shape});
      const Tensor k = b.input("k", {DType::f32, in.at("k").type.shape});
      const Tensor v = b.input("v", {DType::f32, in.at("v").type.shape});
      const Tensor w = b.input("w", {DType::f32, in.at("w").type.shape});
      const double scale = c.scale.value_or(1.0 / std::sqrt(static_cast<double>(c.d)));
      Tensor y;
      if (fused) {
        y = attention(q, k, v, {.causal = c.causal, .scale = scale});
      } else {
        const Tensor scores = matmul(q, swap_axes(k, -1, -2)) * static_cast<float>(scale);
        y = matmul(c.causal ? softmax_causal(scores) : softmax(scores, -1), v);
      }
      b.output("y", y);
      b.output("loss", sum(y * w));
      const Graph g = differentiate(b.take(), {.loss = "loss", .wrt = {"q", "k", "v"}});
      const InterpResult want = interpret(g, in, {.compute = ComputeType::f64, .keep_all_values = true});
      const std::vector<OutputTolerance> tolerances = tg::testing::output_tolerances(g, want.values);
      const TensorMap got = Program(ctx, g).run(in);
      for (std::size_t o = 0; o < g.outputs().size(); ++o) {
        const auto at = std::find(names.begin(), names.end(), g.outputs()[o].name);
        if (at == names.end()) continue;
        bound[fused][at - names.begin()] = tolerances[o].absolute();
        results[fused].emplace(*at, got.at(*at));
      }
    }
    for (std::size_t n = 0; n < names.size(); ++n) {
      const HostTensor& fused = results[1].at(names[n]);
      const HostTensor& composed = results[0].at(names[n]);
      ASSERT_EQ(fused.type, composed.type) << names[n];
      const double tol = bound[0][n] + bound[1][n];
      ASSERT_GT(tol, 0.0);
      std::size_t bad = 0;
      for (std::size_t i = 0; i < fused.size(); ++i) {
        if (std::fabs(fused.at(i) - composed.at(i)) > tol && ++bad <= 3) {
          ADD_FAILURE() << names[n] << "[" << i << "]: fused " << fused.at(i) << ", composed " << composed.at(i)
                        << " (allowed " << tol << ")";
        }
      }
      EXPECT_EQ(bad, 0u) << names[n];
    }
  }
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

// The occupancy split: a summed axis longer than 256 (8 tiles) splits while the workgroups are
// fewer than 256, into chunks of at least 4 tiles; 256 keys, or 256 workgroups, stay one chunk.
TEST_F(VkAttention, ChunksOnBothSidesOfTheSplit) {
  auto ctx = make_context();
  const std::vector<Case> cases = {{"k256", {}, 5, 256, 3, 2, false, {}},
                                   {"k257", {}, 5, 257, 3, 2, false, {}},
                                   {"c256", {}, 256, 256, 2, 3, true, {}},
                                   {"c257", {}, 257, 257, 2, 3, true, {}},
                                   {"q257", {}, 257, 3, 2, 2, false, {}},
                                   {"groups255", {255}, 1, 257, 1, 1, false, {}, true},
                                   {"groups256", {256}, 1, 257, 1, 1, false, {}, true}};
  GraphBuilder b("attention_chunks");
  TracingScope scope(b);
  TensorMap in;
  std::uint32_t seed = 500;
  for (const Case& c : cases) add_ops(b, &in, c, seed += 10);
  const auto labels = check_with_oracle(ctx, b.take(), in);
  // k257, c257 and groups255 (attention only) split their keys; q257 and c257 their queries
  // (grad_kv).
  EXPECT_EQ(count(labels, "attention (key chunks)"), 3u);
  EXPECT_EQ(count(labels, "attention (chunk combine)"), 3u);
  EXPECT_EQ(count(labels, "attention_lse (key chunks)"), 2u);
  EXPECT_EQ(count(labels, "attention_lse (chunk combine)"), 2u);
  EXPECT_EQ(count(labels, "attention_grad_q (key chunks)"), 2u);
  EXPECT_EQ(count(labels, "attention_grad_q (chunk sum)"), 2u);
  EXPECT_EQ(count(labels, "attention_grad_kv (query chunks)"), 2u);
  EXPECT_EQ(count(labels, "attention_grad_kv (chunk sum)"), 2u);
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

// Scores up to ~1.5e4 (integers, exact in f32 with scale 1): the softmax is nearly one-hot and
// exp(s - m) must not overflow anywhere, in one chunk or across chunks; the chunk combine also
// under a workgroup cap (300 outputs: a grid-stride loop).
TEST_F(VkAttention, ScoresOfTenThousand) {
  auto ctx = make_context();
  GraphBuilder b("attention_large_scores");
  TracingScope scope(b);
  TensorMap in;
  add_ops(b, &in, {"one", {2}, 40, 40, 17, 5, true, 1.0}, 700, 30);
  add_ops(b, &in, {"split", {}, 60, 300, 17, 5, false, 1.0}, 710, 30);
  const Graph g = b.take();
  const auto labels = check_with_oracle(ctx, g, in);
  EXPECT_EQ(count(labels, "attention (key chunks)"), 1u);
  check_with_oracle(ctx, g, in, {.max_workgroups = 1}, false);
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

// One long causal sequence (T = 4096, small head_dim), forward only and run once: about 1.2 s on
// lavapipe (its gradient ops would take about 4x that; the shorter tests check them).
TEST_F(VkAttention, LongCausalSequence) {
  auto ctx = make_context();
  constexpr std::int64_t kT = 4096;
  GraphBuilder b("attention_long");
  TracingScope scope(b);
  const Tensor q = b.input("q", {DType::f32, {kT, 2}});
  const Tensor k = b.input("k", {DType::f32, {kT, 2}});
  const Tensor v = b.input("v", {DType::f32, {kT, 3}});
  b.output("y", attention(q, k, v, {.causal = true}));
  const TensorMap in{{"q", random_f32({kT, 2}, 801)}, {"k", random_f32({kT, 2}, 802)}, {"v", random_f32({kT, 3}, 803)}};
  const auto labels = check_with_oracle(ctx, b.take(), in, {}, false);
  EXPECT_EQ(count(labels, "attention (key chunks)"), 1u);  // 128 query tiles: two key chunks
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

// Every node of g with an op of `ops` plans a split (a `then` dispatch) of at most kLoopBudget
// loop passes per invocation.
void expect_budget_split(const Graph& g, const std::vector<OpId>& ops) {
  std::size_t planned = 0;
  for (const Node& node : g.nodes()) {
    if (std::find(ops.begin(), ops.end(), node.op) == ops.end()) continue;
    const KernelLaunch launch = kernel_plan_table()[static_cast<std::size_t>(node.op)](g, node);
    EXPECT_LE(launch.loop_passes, kLoopBudget) << op_name(node.op);
    EXPECT_EQ(launch.then.size(), 1u) << op_name(node.op) << " splits its summed axis";
    ++planned;
  }
  EXPECT_EQ(planned, ops.size());
}

// The loop budget: with 256 workgroups (no occupancy split) 44,000 keys at head_dim 1 need more
// key tiles than one invocation may loop over on lavapipe (about 1,360 tiles at 3 passes each), so
// the keys (and for grad_kv the queries) split into chunks that fit, and every launch declares at
// most kLoopBudget passes. Planned only: the run takes minutes on lavapipe (TG_VK_LARGE=1 runs the
// keys against the oracle).
TEST_F(VkAttention, LoopBudgetSplitsLongRows) {
  GraphBuilder keys("attention_budget_keys");
  TracingScope keys_scope(keys);
  std::optional<TensorMap> in;
  if (testing::large_tests_enabled()) in.emplace();
  add_ops(keys, in ? &*in : nullptr, {"keys", {256}, 1, 44000, 1, 1, false, {}}, 900);
  const Graph g = keys.take();
  expect_budget_split(g, {op::Attention, op::AttentionLse, op::AttentionGradQ});
  GraphBuilder queries("attention_budget_queries");
  TracingScope queries_scope(queries);
  add_ops(queries, nullptr, {"queries", {256}, 44000, 1, 1, 1, false, {}}, 950);
  expect_budget_split(queries.take(), {op::AttentionGradKv});
  if (!in) return;
  auto ctx = make_context();
  const auto labels = check_with_oracle(ctx, g, *in, {}, false);
  EXPECT_EQ(count(labels, "attention (key chunks)"), 1u);
  EXPECT_EQ(count(labels, "attention_grad_q (key chunks)"), 1u);
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

// The shaders index with 32-bit arithmetic: a value of 2^32 elements is refused by name when the
// launch is planned, before anything is allocated.
TEST_F(VkAttention, RefusesValuesPast32BitIndexing) {
  GraphBuilder b("attention_huge");
  TracingScope scope(b);
  const Tensor q = b.input("q", {DType::f32, {65536, 65536, 1}});
  const Tensor k = b.input("k", {DType::f32, {65536, 1, 1}});
  b.output("y", attention(q, k, k));
  const Graph g = b.take();
  const Node& node = g.nodes().back();
  ASSERT_EQ(node.op, op::Attention);
  try {
    kernel_plan_table()[static_cast<std::size_t>(node.op)](g, node);
    ADD_FAILURE() << "planned a launch past 32-bit indexing";
  } catch (const LimitError& e) {
    EXPECT_NE(std::string(e.what()).find("2^32-1"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("'attention'"), std::string::npos) << e.what();
  }
}

// Forward and backward at T = 2048 plan no value and no scratch of T x T floats: the peak of live
// bytes stays below one score matrix.
TEST_F(VkAttention, PlanHoldsNoScoreMatrix) {
  auto ctx = make_context();
  constexpr std::int64_t kT = 2048;
  GraphBuilder b("attention_memory");
  TracingScope scope(b);
  const Tensor q = b.input("q", {DType::f32, {kT, 16}});
  const Tensor k = b.input("k", {DType::f32, {kT, 16}});
  const Tensor v = b.input("v", {DType::f32, {kT, 16}});
  const Tensor y = attention(q, k, v, {.causal = true});
  b.output("loss", sum(y * y));
  const Graph g = differentiate(b.take(), {.loss = "loss", .wrt = {"q", "k", "v"}});
  constexpr std::uint64_t kScoreBytes = 4 * kT * kT;
  for (const Node& node : g.nodes()) {
    EXPECT_LT(g.type(node.output).size() * 4, static_cast<std::int64_t>(kScoreBytes)) << op_name(node.op);
    const KernelPlanFn plan = kernel_plan_table()[static_cast<std::size_t>(node.op)];
    if (plan) {
      EXPECT_LT(plan(g, node).scratch_bytes, kScoreBytes / 4) << op_name(node.op);
    }
  }
  const ProgramStats stats = plan_memory(g, ctx->info());
  EXPECT_LT(stats.peak_live_bytes, kScoreBytes / 4);
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

}  // namespace
}  // namespace tg::vk
