// Elementwise fusion (src/vk/fusion.h): a run of elementwise f32 nodes becomes one dispatch of
// shaders/fused_elementwise.comp. Every test compiles the same graph with fuse_elementwise off and
// on and demands the same bits: the fused program must round exactly as the per-op kernels do.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <iostream>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "support/library.h"
#include "support/test_scale.h"
#include "tensorgrad/ir/ops/ids/elementwise_binary.h"
#include "tensorgrad/ir/ops/ids/elementwise_unary.h"
#include "tensorgrad/passes/optimizer.h"
#include "tensorgrad/vk/executor.h"
#include "vk/fusion.h"
#include "vk/kernels/kernels.h"
#include "vk_oracle_check.h"
#include "vk_test_support.h"

namespace tg::vk {
namespace {

using testing::random_f32;
using testing::VkTest;

std::uint32_t bits(double v) { return std::bit_cast<std::uint32_t>(static_cast<float>(v)); }

// Empty when both maps hold the same f32 outputs bit for bit (with any_nan, any NaN equals any
// NaN); otherwise the first difference.
std::string bit_difference(const TensorMap& a, const TensorMap& b, bool any_nan = false) {
  if (a.size() != b.size()) return "different output sets";
  for (const auto& [name, x] : a) {
    const HostTensor& y = b.at(name);
    if (x.type != y.type) return name + ": types differ";
    for (std::size_t i = 0; i < x.size(); ++i) {
      if (bits(x.at(i)) != bits(y.at(i)) && !(any_nan && std::isnan(x.at(i)) && std::isnan(y.at(i)))) {
        return name + "[" + std::to_string(i) + "]: " + std::to_string(x.at(i)) + " vs " + std::to_string(y.at(i));
      }
    }
  }
  return "";
}

// The ops fusion takes: ops.def's TG_EW lines, read from the generated op list (not from the
// Vulkan layer's tables). tests/unit/op_codes_test.cpp checks that fusion takes exactly these; the
// random cases below draw no comparison or where, the TG_EW ops that cannot end a run.
bool is_fusable_op(OpId op) {
  struct Listed {
    std::string_view name;
    bool ew;
  };
  static constexpr Listed kListed[] = {
#define TG_OP(id, name, family, ew) {name, (ew) != 0},
#include "tensorgrad/ir/ops/op_list.inc"
#undef TG_OP
  };
  for (const Listed& l : kListed) {
    if (l.name == op_name(op)) return l.ew;
  }
  return false;
}

// Whether two fusable nodes follow each other (constants in between do not separate them): the
// fused program must then record fewer dispatches. The cases below give every such node the run's
// shape, so op kinds decide.
bool has_fusable_pair(const Graph& g) {
  bool previous = false;
  for (const Node& node : g.nodes()) {
    if (node.inputs.empty() && !is_fusable_op(node.op)) continue;
    const bool fusable = is_fusable_op(node.op);
    if (previous && fusable) return true;
    previous = fusable;
  }
  return false;
}

struct Case {
  Graph graph;
  TensorMap inputs;
  std::string ops;  // the recipe, for failure messages
};

// 2-12 random fusable ops over one shape, each operand an earlier result, an input or a scalar
// input. Growing or partial ops get a bounded operand (tanh, |x| + pos) so that values stay finite
// and away from singularities, where f32 and the f64 oracle would part; an occasional sum,
// stop_gradient or literal constant splits runs or sits inside one.
Case random_case(std::uint32_t seed, const Shape& shape) {
  std::mt19937 rng(seed);
  const auto chance = [&](double p) { return std::uniform_real_distribution<double>(0, 1)(rng) < p; };
  const auto pick = [&](std::size_t n) { return std::uniform_int_distribution<std::size_t>(0, n - 1)(rng); };
  GraphBuilder b("fusion_case");
  TracingScope scope(b);
  Case c;
  std::vector<Tensor> pool, scalars;
  for (int k = 0; k < 3; ++k) {
    const std::string name = "x" + std::to_string(k);
    pool.push_back(b.input(name, {DType::f32, shape}));
    c.inputs[name] = random_f32(shape, seed * 7 + static_cast<std::uint32_t>(k));
  }
  const Shape ones(std::min<std::size_t>(shape.size(), 2), 1);
  scalars.push_back(b.input("s0", {DType::f32, {}}));
  c.inputs["s0"] = random_f32({}, seed + 100);
  scalars.push_back(b.input("s1", {DType::f32, ones}));
  c.inputs["s1"] = random_f32(ones, seed + 101);
  const Tensor pos = b.input("pos", {DType::f32, {}});
  c.inputs["pos"] = random_f32({}, seed + 102, 0.5f, 1.5f);
  scalars.push_back(pos);

  const auto tensor = [&] { return pool[pick(pool.size())]; };
  const auto operand = [&] { return chance(0.25) ? scalars[pick(scalars.size())] : tensor(); };
  const auto bounded = [&](const Tensor& x) {
    switch (pick(4)) {
      case 0:
        return tanh(x);
      case 1:
        return sin(x);
      case 2:
        return sigmoid(x);
      default:
        return clamp(x, -1.0, 1.0);
    }
  };
  const auto positive = [&](const Tensor& x) { return abs(x) + pos; };
  const int ops = static_cast<int>(2 + pick(11));
  for (int k = 0; k < ops; ++k) {
    if (chance(0.12)) {
      if (chance(0.5)) {
        scalars.push_back(sum(tensor()));
        c.ops += "sum ";
      } else {
        pool.push_back(stop_gradient(tensor()));
        c.ops += "stop_gradient ";
      }
    }
    const Tensor a = tensor();
    Tensor r;
    switch (pick(21)) {
      case 0:
        r = chance(0.5) ? add(a, operand()) : add(operand(), a);
        break;
      case 1:
        r = chance(0.5) ? sub(a, operand()) : sub(operand(), a);
        break;
      case 2:
        r = chance(0.2) ? a * 0.75f : mul(chance(0.5) ? operand() : bounded(tensor()), a);
        break;
      case 3:
        r = div(chance(0.7) ? a : operand(), positive(chance(0.7) ? tensor() : operand()));
        break;
      case 4:
        r = chance(0.5) ? minimum(a, operand()) : minimum(operand(), a);
        break;
      case 5:
        r = chance(0.5) ? maximum(a, operand()) : maximum(operand(), a);
        break;
      case 6:
        r = -a;
        break;
      case 7:
        r = abs(a);
        break;
      case 8:
        r = square(bounded(a));
        break;
      case 9:
        r = sqrt(positive(a));
        break;
      case 10:
        r = rsqrt(positive(a));
        break;
      case 11:
        r = exp(tanh(a));
        break;
      case 12:
        r = log(positive(a));
        break;
      case 13:
        r = sin(a);
        break;
      case 14:
        r = cos(a);
        break;
      case 15:
        r = tanh(a);
        break;
      case 16:
        r = sigmoid(a);
        break;
      case 17:
        r = relu(a);
        break;
      case 18:
        r = gelu(a);
        break;
      case 19:
        r = silu(a);
        break;
      default: {
        const double lo = -std::uniform_real_distribution<double>(0, 1.5)(rng);
        r = clamp(a, lo, lo + std::uniform_real_distribution<double>(0, 2)(rng));
      }
    }
    pool.push_back(r);
    if (chance(0.25)) b.output("o" + std::to_string(k), r);
  }
  b.output("last", pool.back());
  c.graph = b.take();
  for (const Node& node : c.graph.nodes()) c.ops += std::string(op_name(node.op)) + " ";
  return c;
}

// `inputs` with every element drawn from special values and a few ordinary ones.
TensorMap special_inputs(const TensorMap& inputs, std::uint32_t seed) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const std::vector<float> values = {nan, -nan, inf, -inf, 0.f, -0.f, 1e-40f, -1e-40f, 1e30f, -1e30f, 1.f, -2.5f, 0.5f};
  std::mt19937 rng(seed);
  TensorMap out;
  for (const auto& [name, t] : inputs) {
    std::vector<float> v(t.size());
    for (float& x : v) x = values[std::uniform_int_distribution<std::size_t>(0, values.size() - 1)(rng)];
    out[name] = HostTensor::f32(t.type.shape, v);
  }
  return out;
}

// 30 random cases (TG_PROPERTY_SCALE multiplies them, TG_TEST_SCALE does not cut them): each fused
// run is a new pipeline, which lavapipe takes about a second to compile, so the 50 cases this ran
// before cost 80 s of CI. The 30 still draw every op that 50 draw (the last, a product with a
// constant, first at seed 29; checked below without a device) and every shape three times.
TEST_F(VkTest, FusedRunsGiveTheUnfusedBitsAndMatchTheF64Oracle) {
  auto ctx = make_context();
  // n % 4 of 0..3, a single element, and enough vec4 for several workgroups.
  const std::vector<Shape> shapes = {{1}, {3}, {4}, {7}, {2, 3}, {5, 4, 3}, {33, 65}, {4099}, {40, 103}, {1, 1}};
  // The first seed that draws each op, of the first `last` seeds.
  const auto first_seeds = [&](std::uint32_t last) {
    std::map<std::string, std::uint32_t> first;
    for (std::uint32_t seed = 1; seed <= last; ++seed) {
      const Case c = random_case(seed, shapes[seed % shapes.size()]);
      for (const Node& node : c.graph.nodes()) first.emplace(op_name(node.op), seed);
    }
    return first;
  };
  const auto cases =
      static_cast<std::uint32_t>(std::max(30, tg::testing::scaled_count(30)));  // not below 30 under ASan
  for (const auto& [op, seed] : first_seeds(std::max(cases, 50u))) {
    EXPECT_LE(seed, cases) << op << " is drawn first by seed " << seed;
  }
  std::size_t fused_cases = 0;
  for (std::uint32_t seed = 1; seed <= cases; ++seed) {
    const Shape& shape = shapes[seed % shapes.size()];
    const Case c = random_case(seed, shape);
    SCOPED_TRACE("seed " + std::to_string(seed) + " shape " + shape_to_string(shape) + ": " + c.ops);
    Program plain(ctx, c.graph, {.fuse_elementwise = false});
    Program fused(ctx, c.graph);
    Program guarded(ctx, c.graph, {.guard_bytes = 64});
    const TensorMap want = plain.run(c.inputs);
    const TensorMap got = fused.run(c.inputs);
    EXPECT_EQ(bit_difference(want, got), "");
    EXPECT_EQ(bit_difference(want, guarded.run(c.inputs)), "");
    EXPECT_EQ(testing::join_lines(guarded.check_guards()), "");
    if (has_fusable_pair(c.graph)) {
      EXPECT_LT(fused.stats().dispatches, plain.stats().dispatches);
      ++fused_cases;
    }

    // The same programs on NaN, infinities, signed zeros, denormals and huge values: no oracle
    // (f64 keeps what f32 overflows), but still the unfused bits, NaN signs included.
    const TensorMap special = special_inputs(c.inputs, seed);
    EXPECT_EQ(bit_difference(plain.run(special), fused.run(special), true), "") << "special values";

    const InterpResult oracle = interpret(c.graph, c.inputs, {.compute = ComputeType::f64, .keep_all_values = true});
    const double tol = testing::f32_tolerance(c.graph, oracle);
    for (const auto& [name, expected] : oracle.outputs) {
      for (std::size_t i = 0; i < expected.size(); ++i) {
        EXPECT_NEAR(got.at(name).at(i), expected.at(i), tol) << name << "[" << i << "]";
      }
    }
  }
  EXPECT_GE(fused_cases, 4 * cases / 5) << "the cases should mostly contain runs";
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

// More ops, inputs and clamps than one fused dispatch holds: the run splits, the bits stay.
TEST_F(VkTest, LongChainsSplitAtTheShaderLimitsWithTheSameBits) {
  auto ctx = make_context();
  GraphBuilder b("long_chain");
  TracingScope scope(b);
  TensorMap in;
  std::vector<Tensor> xs, ss;
  for (int k = 0; k < 16; ++k) {
    xs.push_back(b.input("x" + std::to_string(k), {DType::f32, {301}}));
    in["x" + std::to_string(k)] = random_f32({301}, 40 + static_cast<std::uint32_t>(k));
  }
  for (int k = 0; k < 8; ++k) {
    ss.push_back(b.input("s" + std::to_string(k), {DType::f32, {}}));
    in["s" + std::to_string(k)] = random_f32({}, 70 + static_cast<std::uint32_t>(k), 0.5f, 1.f);
  }
  Tensor h = xs[0];
  for (int k = 0; k < 60; ++k) {
    h = k % 2 == 0 ? h * ss[static_cast<std::size_t>(k % 8)] + xs[static_cast<std::size_t>(k % 16)]
                   : tanh(h) - clamp(h, -0.5, 0.5 + 0.01 * k);
    if (k % 10 == 0) b.output("h" + std::to_string(k), h);
  }
  b.output("h", h);
  const Graph g = b.take();
  Program plain(ctx, g, {.fuse_elementwise = false});
  Program fused(ctx, g);
  EXPECT_EQ(bit_difference(plain.run(in), fused.run(in)), "");
  // 150 elementwise nodes: at least 7 dispatches of at most 24 steps, far fewer than 150.
  EXPECT_GE(fused.stats().dispatches, 7u);
  EXPECT_LE(fused.stats().dispatches, 30u);
  EXPECT_EQ(plain.stats().dispatches, g.nodes().size());
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

// A value read only inside the run stays in registers; one read after the run, or a graph output,
// is written even when the run reads it too.
TEST(VkFusionPlan, WritesOnlyValuesReadAfterTheRunOrReturned) {
  GraphBuilder b("plan");
  TracingScope scope(b);
  Tensor x = b.input("x", {DType::f32, {10}});
  Tensor s = b.input("s", {DType::f32, {1}});
  Tensor t = x * s;   // node 0: inside only
  Tensor u = exp(t);  // node 1: inside and after
  Tensor v = u + x;   // node 2: the run's last node
  Tensor w = sum(v);  // node 3: ends the run
  Tensor y = u * w;   // node 4: reads u after the run; alone, so not fused
  b.output("y", y);
  const Graph g = b.take();
  std::vector<KernelLaunch> launches;
  for (const Node& node : g.nodes())
    launches.push_back(kernel_plan_table()[static_cast<std::size_t>(node.op)](g, node));
  const std::vector<KernelLaunch> fused = fuse_elementwise(g, launches);
  ASSERT_EQ(fused.size(), 5u);
  EXPECT_EQ(fused[0].items, 0u);
  EXPECT_EQ(fused[1].items, 0u);
  const KernelLaunch& run = fused[2];
  EXPECT_EQ(run.shader, "fused_elementwise");
  EXPECT_EQ(run.label, "fused(mul,exp,add)");
  EXPECT_EQ(run.items, 3u);  // 2 whole vec4 and one holding the 2 trailing elements
  ASSERT_EQ(run.bindings.size(), 12u + 4u);
  EXPECT_EQ(run.bindings[0], x.id());
  EXPECT_EQ(run.bindings[1], s.id());
  EXPECT_EQ(run.writes, 4u);
  // v (the last node's value) first, then u; the unused output slots repeat v.
  EXPECT_EQ(std::vector<ValueId>(run.bindings.begin() + 12, run.bindings.end()),
            (std::vector<ValueId>{v.id(), u.id(), v.id(), v.id()}));
  EXPECT_EQ(run.extra_reads, (std::vector<ValueId>{x.id(), s.id()}));
  EXPECT_EQ(run.specialization[1], 2u) << "two inputs";
  EXPECT_EQ(run.specialization[2], 2u) << "input 1 (s) is broadcast";
  EXPECT_EQ(run.specialization[3], 2u) << "two outputs";
  EXPECT_EQ(fused[3].shader, launches[3].shader);
  EXPECT_EQ(fused[4].shader, launches[4].shader);
}

TEST_F(VkTest, SpecialValuesKeepTheirBitsWhenFused) {
  auto ctx = make_context();
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const std::vector<float> xv = {nan, 1.f, -inf, inf, -0.f, 0.f, 2.f, -3.f, nan, 1e-40f, -1e-40f, 5.f, -0.f, 0.5f};
  const std::vector<float> yv = {1.f, nan, 2.f, -inf, 0.f, -0.f, inf, -inf, nan, -0.f, 0.f, -0.f, -2.f, nan};
  const Shape shape{static_cast<std::int64_t>(xv.size())};  // 3 vec4 and 2 trailing elements
  GraphBuilder b("special");
  TracingScope scope(b);
  Tensor x = b.input("x", {DType::f32, shape});
  Tensor y = b.input("y", {DType::f32, shape});
  Tensor z = b.input("z", {DType::f32, {}});
  b.output("min", relu(minimum(x, y)));
  b.output("max", clamp(maximum(y, x), -1.0, 1.0));
  b.output("div", neg(div(x, y)) * z);
  b.output("mix", relu(-x) + minimum(z, abs(y)));
  b.output("clamp", clamp(x / y, -2.0, 0.0) - maximum(x, z));
  const Graph g = b.take();
  const TensorMap in{
      {"x", HostTensor::f32(shape, xv)}, {"y", HostTensor::f32(shape, yv)}, {"z", HostTensor::f32({}, {-0.f})}};
  Program plain(ctx, g, {.fuse_elementwise = false});
  Program fused(ctx, g);
  ASSERT_LT(fused.stats().dispatches, plain.stats().dispatches);
  const TensorMap want = plain.run(in), got = fused.run(in);
  EXPECT_EQ(bit_difference(want, got), "");
  // NaN, infinities and signed zeros as the interpreter has them (these ops round exactly), where the
  // context asks the driver to keep them (SignedZeroInfNanPreserve, src/vk/spirv_float_controls.h):
  // without it NVIDIA's H200 drops NaN in minimum/maximum/relu and turns relu(-0) into +0, fused or
  // not. lavapipe and the H200 both support it. Denormals (elements 9 and 10) only where the device
  // also keeps them (DenormPreserve: the H200 flushes them, lavapipe keeps them without it).
  const bool denormals_kept = ctx->preserves_denormals() || ctx->info().type == DeviceType::cpu;
  if (ctx->preserves_nan_inf_signed_zero()) {
    const TensorMap ref = interpret(g, in, {.compute = ComputeType::f32}).outputs;
    for (const char* name : {"min", "max", "mix"}) {
      for (std::size_t i = 0; i < xv.size(); ++i) {
        const bool denormal = std::fpclassify(xv[i]) == FP_SUBNORMAL || std::fpclassify(yv[i]) == FP_SUBNORMAL;
        if (denormal && !denormals_kept) continue;
        const double a = got.at(name).at(i), r = ref.at(name).at(i);
        if (std::isnan(r)) {
          EXPECT_TRUE(std::isnan(a)) << name << "[" << i << "]";
        } else {
          EXPECT_EQ(a, r) << name << "[" << i << "]";
          EXPECT_EQ(std::signbit(a), std::signbit(r)) << name << "[" << i << "]";
        }
      }
    }
  }
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

// A two-layer MLP's gradients and Adam's update (torch.optim's op order) on resident params with
// writebacks: 3 steps fused and unfused must leave the same bits in every param and state.
TEST_F(VkTest, FusedAdamStepsKeepTheUnfusedBits) {
  auto ctx = make_context();
  GraphBuilder b("mlp");
  TracingScope scope(b);
  Tensor x = b.input("x", {DType::f32, {8, 6}});
  Tensor target = b.input("y", {DType::f32, {8, 5}});
  Tensor w1 = b.param("w1", {DType::f32, {6, 5}});
  Tensor b1 = b.param("b1", {DType::f32, {5}});
  Tensor w2 = b.param("w2", {DType::f32, {5, 5}});
  Tensor b2 = b.param("b2", {DType::f32, {5}});
  Tensor r = matmul(relu(matmul(x, w1) + b1), w2) + b2 - target;
  b.output("loss", mean(r * r));
  const Graph forward = b.take();
  const Graph grads = differentiate(forward, {.loss = "loss"});
  const OptimizerConfig config{.kind = AdamConfig{}};
  const OptimizedGraph opt = append_optimizer(grads, param_grads(grads), config);

  const ProgramOptions options{.resident_params = true, .writebacks = opt.writebacks};
  ProgramOptions unfused_options = options;
  unfused_options.fuse_elementwise = false;
  Program plain(ctx, opt.graph, unfused_options);
  Program fused(ctx, opt.graph, options);
  std::cout << "Adam MLP step: " << plain.stats().dispatches << " dispatches unfused, " << fused.stats().dispatches
            << " fused (" << opt.graph.nodes().size() << " nodes)\n";
  RecordProperty("dispatches_unfused", std::to_string(plain.stats().dispatches));
  RecordProperty("dispatches_fused", std::to_string(fused.stats().dispatches));
  EXPECT_LT(2 * fused.stats().dispatches, plain.stats().dispatches);

  std::uint32_t seed = 5;
  for (const GraphInput& input : opt.graph.inputs()) {
    if (input.kind == InputKind::data) continue;
    const TensorType& type = opt.graph.type(input.value);
    const bool state = input.kind == InputKind::state;
    const HostTensor value = state ? HostTensor::filled(type, 0.0) : random_f32(type.shape, ++seed, -0.5f, 0.5f);
    plain.write_input(input.name, value);
    fused.write_input(input.name, value);
  }
  for (std::int64_t step = 1; step <= 3; ++step) {
    TensorMap in{{"x", random_f32({8, 6}, 90 + static_cast<std::uint32_t>(step))},
                 {"y", random_f32({8, 5}, 95 + static_cast<std::uint32_t>(step))}};
    for (const auto& [name, value] : scalars_for_step(config, step, 1e-2).values)
      in[name] = HostTensor::filled({DType::f32, {}}, value);
    EXPECT_EQ(bit_difference(plain.run(in), fused.run(in)), "") << "step " << step;
    for (const GraphInput& input : opt.graph.inputs()) {
      if (!plain.is_resident(input.name)) continue;
      EXPECT_EQ(
          bit_difference({{input.name, plain.read_input(input.name)}}, {{input.name, fused.read_input(input.name)}}),
          "")
          << "step " << step;
    }
  }
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

TEST_F(VkTest, TimingsNameTheFusedDispatch) {
  auto ctx = make_context();
  if (!ctx->info().timestamps_supported) GTEST_SKIP() << ctx->info().summary() << " has no timestamp queries";
  GraphBuilder b("timed");
  TracingScope scope(b);
  Tensor x = b.input("x", {DType::f32, {64}});
  Tensor s = b.input("s", {DType::f32, {}});
  b.output("y", sqrt(x * x + s));
  b.output("t", sum(x));
  const Graph g = b.take();
  Program program(ctx, g, {.timestamps = true});
  (void)program.run({{"x", random_f32({64}, 1)}, {"s", random_f32({}, 2, 1.f, 2.f)}});
  const std::vector<DispatchTiming> timings = program.timings();
  ASSERT_EQ(timings.size(), program.stats().dispatches);
  ASSERT_EQ(timings.size(), 2u);
  EXPECT_EQ(timings[0].op, "fused(mul,add,sqrt)");
  EXPECT_EQ(g.node(timings[0].node).op, op::Sqrt) << "the run's last node records it";
  EXPECT_EQ(timings[1].op, "sum");
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

}  // namespace
}  // namespace tg::vk
