// The random family (randn, dropout) on the Vulkan executor. The shaders' Philox4x32-10 must equal
// src/interp/philox.h bit for bit: the raw words are compared directly (randn.comp's test mode,
// including a nonzero high counter word), dropout's kept elements must be IDENTICAL to both
// interpreters' for many seeds, salts and p (p = 0, p just above a uniform's value, p just below 1,
// p exactly on a uniform's value), and randn's values must meet the op's tolerance against the f64
// oracle (the measured error is printed). Also: the seed is read at run time (one program, several
// seeds), draws at the extreme uniforms (u1 = 1 and 2^-24, cos at its quadrant boundaries), a
// randn large enough for the grid-stride loop to wrap, empty and 0-d outputs, dropout's gradient
// graph. Under the validation layer when TG_VK_VALIDATION=1.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <iostream>
#include <limits>
#include <random>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "interp/philox.h"
#include "support/library.h"
#include "support/tolerance.h"
#include "tensorgrad/ir/ops/ids/random.h"
#include "tensorgrad/vk/executor.h"
#include "vk/buffer.h"
#include "vk/commands.h"
#include "vk/compute.h"
#include "vk_test_support.h"

namespace tg::vk {
namespace {

using testing::VkTest;

constexpr std::int64_t kMaxSalt = 4294967295ll;

// randn.comp's push constants (src/vk/kernels/random.cpp).
struct RandnPush {
  std::uint32_t salt = 0;
  std::uint32_t count = 0;
  std::uint32_t index_high = 0;
  std::uint32_t mode = 0;  // 1: raw words, out[i] = word (i & 3) of element i >> 2
};

// Runs randn.comp directly (the executor always passes index_high 0 and mode 0).
std::vector<std::uint32_t> run_randn_shader(const std::shared_ptr<Context>& ctx, std::int32_t seed, RandnPush push) {
  Buffer seed_buffer(ctx, 4, MemoryUse::device);
  Buffer out(ctx, std::uint64_t{push.count} * 4, MemoryUse::device);
  upload(seed_buffer, std::as_bytes(std::span(&seed, 1)));
  ComputePipeline pipeline(ctx, "randn", 2, sizeof(RandnPush));
  DescriptorPool pool(ctx, 1, 2);
  const BufferBinding bindings[] = {{&seed_buffer}, {&out}};
  const VkDescriptorSet set = pool.allocate(pipeline, bindings);
  CommandBuffer cmd(ctx);
  cmd.begin();
  record_dispatch(cmd.handle(), pipeline, set, std::as_bytes(std::span(&push, 1)),
                  {group_count_x(*ctx, push.count, 256), 1, 1});
  record_compute_barrier(cmd.handle());
  cmd.end();
  submit_and_wait(ctx, cmd.handle(), "the randn dispatch");
  std::vector<std::uint32_t> words(push.count);
  download(out, std::as_writable_bytes(std::span(words)));
  return words;
}

// The largest error of `got` against `want`, relative to |want| in units of 2^-24 (half a float
// ulp at 1) and absolute; printed so a run documents the device's precision.
struct ErrorStats {
  double max_relative_units = 0;
  double max_absolute = 0;
  void add(double got, double want) {
    const double e = std::fabs(got - want);
    max_absolute = std::max(max_absolute, e);
    if (std::fabs(want) > 1e-6) max_relative_units = std::max(max_relative_units, e / std::fabs(want) * 16777216.0);
  }
};

// randn's own bound, documented in shaders/randn.comp: fp32 log (< 1 ulp), cos (< 2.5 2^-24
// relative) and GLSL sqrt (correctly rounded on lavapipe; Vulkan allows a few ulp), so a draw is
// within a few units of 2^-24 relative; 16 units leaves room for GPU sqrt. Near a zero of cos the
// absolute floor covers cos(pi/2) = 6e-17 computed as 0.
bool randn_within_own_bound(double got, double want) {
  return std::fabs(got - want) <= 16.0 / 16777216.0 * std::fabs(want) + 1e-12;
}

std::string str(double v) {
  std::ostringstream s;
  s.precision(17);
  s << v;
  return s.str();
}

TEST_F(VkTest, PhiloxWordsEqualTheInterpretersBitForBit) {
  auto ctx = make_context();
  std::size_t compared = 0;
  for (const std::int32_t seed : {0, 1, -1, -8, 123456789, std::numeric_limits<std::int32_t>::min()}) {
    for (const std::int64_t salt : {std::int64_t{0}, std::int64_t{63}, kMaxSalt}) {
      for (const std::uint32_t high : {0u, 1u, 0xffffffffu}) {
        const std::uint32_t elements = 1000;
        const auto words = run_randn_shader(ctx, seed, {static_cast<std::uint32_t>(salt), 4 * elements, high, 1});
        const philox::Key key = philox::stream_key(seed, salt);
        for (std::uint32_t i = 0; i < elements; ++i) {
          const philox::Counter want = philox::draw(key, (std::uint64_t{high} << 32) + i);
          for (std::uint32_t w = 0; w < 4; ++w) {
            ASSERT_EQ(words[4 * i + w], want[w])
                << "seed " << seed << " salt " << salt << " element " << i << " (high word " << high << ") word " << w;
            ++compared;
          }
        }
      }
    }
  }
  EXPECT_EQ(compared, 6u * 3u * 3u * 4000u);
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

TEST_F(VkTest, RandnAtANonzeroHighCounterWordIsBoxMullerOfThoseWords) {
  auto ctx = make_context();
  const std::uint32_t n = 5000;
  const auto bits = run_randn_shader(ctx, -3, {77, n, 2, 0});
  const philox::Key key = philox::stream_key(-3, 77);
  for (std::uint32_t i = 0; i < n; ++i) {
    const philox::Counter w = philox::draw(key, (std::uint64_t{2} << 32) + i);
    const double want = philox::box_muller<double>(w[0], w[1]);
    const auto got = static_cast<double>(std::bit_cast<float>(bits[i]));
    ASSERT_TRUE(randn_within_own_bound(got, want)) << "element " << i << ": " << str(got) << ", want " << str(want);
  }
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

// Runs on Vulkan and the f64 oracle (within graph_tolerance * scale, scale as the property tests);
// a replay must repeat the bits. Returns the Vulkan outputs.
TensorMap check(const std::shared_ptr<Context>& ctx, const Graph& g, const TensorMap& in, ErrorStats* stats = nullptr) {
  Program program(ctx, g);
  const TensorMap got = program.run(in);
  const InterpResult oracle = interpret(g, in, {.compute = ComputeType::f64, .keep_all_values = true});
  double scale = 1.0;
  for (const HostTensor& t : oracle.values)
    for (double v : t.to_f64()) scale = std::max(scale, std::fabs(v));
  const double tol = tg::testing::graph_tolerance(g) * scale;
  for (const auto& [name, want] : oracle.outputs) {
    const HostTensor& out = got.at(name);
    EXPECT_EQ(out.type, want.type) << name;
    int failures = 0;
    for (std::size_t i = 0; i < want.size() && failures < 5; ++i) {
      const double w = want.at(i), v = out.at(i);
      if (stats) stats->add(v, w);
      const bool ok = v == w || std::fabs(v - w) <= tol;
      EXPECT_TRUE(ok) << name << "[" << i << "] = " << str(v) << ", want " << str(w) << " (tol " << tol << ")";
      failures += ok ? 0 : 1;
    }
  }
  const TensorMap again = program.run(in);
  for (const auto& [name, t] : got) {
    EXPECT_TRUE(testing::same_bits(t.to_f64(), again.at(name).to_f64())) << name << " not bitwise replayable";
  }
  return got;
}

HostTensor seed_tensor(std::int32_t seed) { return HostTensor::i32({}, {seed}); }

Tensor emit_randn(GraphBuilder& b, const Tensor& seed, Shape shape, std::int64_t salt) {
  const Tensor inputs[] = {seed};
  return b.emit(op::Randn, inputs, Attrs{{"shape", std::move(shape)}, {"salt", salt}},
                SourceLoc{"vk_random_test", 1, 0});
}

Tensor emit_dropout(GraphBuilder& b, const Tensor& x, const Tensor& seed, double p, std::int64_t salt) {
  const Tensor inputs[] = {x, seed};
  return b.emit(op::Dropout, inputs, Attrs{{"p", p}, {"salt", salt}}, SourceLoc{"vk_random_test", 2, 0});
}

TEST_F(VkTest, RandnMatchesTheOracleForSeedsSaltsAndShapes) {
  auto ctx = make_context();
  GraphBuilder b("randn");
  TracingScope scope(b);
  // Through the front-end: the step seed input and consecutive salts, as a model traces them.
  b.output("scalar", randn({}));
  b.output("one", randn({1}));
  b.output("matrix", randn({3, 5}));
  b.output("long", randn({4099}));
  b.output("rank4", randn({2, 3, 4, 5}));
  b.output("empty", randn({0, 3}));
  const Tensor seed = b.step_seed();
  b.output("salt_max", emit_randn(b, seed, {300}, kMaxSalt));
  b.output("salt_big", emit_randn(b, seed, {300}, 2654435769ll));
  const Graph g = b.take();
  ErrorStats stats;
  Program program(ctx, g);
  TensorMap previous;
  for (const std::int32_t s : {0, 1, -1, 5, -8, 2147483647, std::numeric_limits<std::int32_t>::min()}) {
    SCOPED_TRACE("seed " + std::to_string(s));
    const TensorMap in{{kStepSeedInput, seed_tensor(s)}};
    const TensorMap got = check(ctx, g, in, &stats);
    const TensorMap want = interpret(g, in).outputs;
    for (const auto& [name, t] : got) {
      for (std::size_t i = 0; i < t.size(); ++i) {
        const double w = want.at(name).at(i);
        ASSERT_TRUE(randn_within_own_bound(t.at(i), w))
            << name << "[" << i << "] " << str(t.at(i)) << ", want " << str(w);
      }
    }
    // The seed is read at run time: one program, a new seed, new draws.
    const TensorMap from_program = program.run(in);
    EXPECT_EQ(from_program.at("long").to_f64(), got.at("long").to_f64());
    if (!previous.empty()) {
      EXPECT_NE(previous.at("long").to_f64(), got.at("long").to_f64());
    }
    previous = got;
  }
  std::cout << "randn on " << ctx->info().name << ": max error " << stats.max_relative_units
            << " units of 2^-24 relative, " << stats.max_absolute << " absolute\n";
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

// Draws found offline with philox.h (seed 0, the salt and element below) whose words hit the ends
// of the uniforms' ranges; the test re-derives each word from philox.h before relying on it.
struct EdgeDraw {
  std::int64_t salt;
  std::uint32_t element;
  int word;             // 0: u1's word, 1: u2's word
  std::uint32_t top24;  // its top 24 bits
};
constexpr EdgeDraw kEdgeDraws[] = {
    {10962, 926, 0, 0xffffff},  // u1 = 1: log 0, output +-0 (no NaN from sqrt(-0))
    {8427, 529, 0, 0x000000},   // u1 = 2^-24: the largest magnitude, 5.77
    {3018, 750, 1, 0x000000},   // cos(0) = 1
    {44954, 959, 1, 0x200000},  // cos(pi/4): where the quadrant folds
    {9026, 526, 1, 0x400000},   // cos(pi/2) = 0
    {26073, 794, 1, 0x600000},  // cos(3pi/4)
    {34385, 997, 1, 0x800000},  // cos(pi) = -1
    {48674, 427, 1, 0xa00000},  // cos(5pi/4)
    {10040, 815, 1, 0xc00000},  // cos(3pi/2) = 0
    {37604, 601, 1, 0xe00000},  // cos(7pi/4)
};

TEST_F(VkTest, RandnAtTheEndsOfTheUniforms) {
  auto ctx = make_context();
  GraphBuilder b("randn_edges");
  Tensor seed = b.input("seed", {DType::i32, {}});
  for (const EdgeDraw& e : kEdgeDraws) {
    const philox::Counter w = philox::draw(philox::stream_key(0, e.salt), e.element);
    ASSERT_EQ(w[static_cast<std::size_t>(e.word)] >> 8, e.top24) << "salt " << e.salt;
    b.output("s" + std::to_string(e.salt), emit_randn(b, seed, {1024}, e.salt));
  }
  const Graph g = b.take();
  const TensorMap in{{"seed", seed_tensor(0)}};
  const TensorMap got = check(ctx, g, in);
  const TensorMap want = interpret(g, in).outputs;
  for (const EdgeDraw& e : kEdgeDraws) {
    const std::string name = "s" + std::to_string(e.salt);
    const double v = got.at(name).at(e.element), w = want.at(name).at(e.element);
    EXPECT_TRUE(std::isfinite(v)) << name;
    EXPECT_TRUE(randn_within_own_bound(v, w)) << name << ": " << str(v) << ", want " << str(w);
  }
  EXPECT_EQ(got.at("s10962").at(926), 0.0);  // u1 = 1
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

TEST_F(VkTest, RandnGridStrideLoopWraps) {
  auto ctx = make_context();
  // 65535 workgroups of 256 cover 16776960 elements; the rest go round the grid-stride loop again.
  // One run and the oracle's outputs only (~3 s on lavapipe): replays are checked elsewhere.
  // (dropout's loop is the same; a dropout this large needs input and output, 134 MB, above
  // lavapipe's 128 MiB buffer limit.)
  const std::int64_t n = 65535ll * 256 + 4099;
  GraphBuilder b("randn_wrap");
  TracingScope scope(b);
  Tensor r = randn({n});
  b.output("head", narrow(r, 0, 0, 2000));
  b.output("tail", narrow(r, 0, n - 6000, 6000));  // 4099 of them from the second pass
  const Graph g = b.take();
  const TensorMap in{{kStepSeedInput, seed_tensor(11)}};
  const TensorMap got = Program(ctx, g).run(in);
  const TensorMap want = interpret(g, in).outputs;
  for (const char* name : {"head", "tail"}) {
    for (std::size_t i = 0; i < want.at(name).size(); ++i) {
      const double v = got.at(name).at(i), w = want.at(name).at(i);
      ASSERT_TRUE(randn_within_own_bound(v, w)) << name << "[" << i << "] = " << str(v) << ", want " << str(w);
    }
  }
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

TEST_F(VkTest, DropoutKeepsExactlyTheInterpretersElements) {
  auto ctx = make_context();
  const double below_one = std::nextafter(1.0, 0.0);
  const std::vector<double> ps = {0.0, 1e-12, 0x1p-24, 0x1.8p-24,   0.1,         0.25,     1.0 / 3.0,
                                  0.5, 0.9,   0.99,    1 - 0x1p-24, 1 - 0x1p-30, below_one};
  const std::vector<std::int64_t> salts = {0, 1, 63, kMaxSalt};
  const std::int64_t n = 2053;
  std::mt19937 rng(5);
  std::uniform_real_distribution<double> magnitude(0.5, 2.0);
  std::vector<double> xv(static_cast<std::size_t>(n));
  for (double& v : xv) v = static_cast<float>((rng() & 1 ? 1 : -1) * magnitude(rng));  // never 0

  GraphBuilder b("dropout_masks");
  Tensor x = b.input("x", {DType::f32, {n}});
  Tensor seed = b.input("seed", {DType::i32, {}});
  for (std::size_t pi = 0; pi < ps.size(); ++pi)
    for (const std::int64_t salt : salts)
      b.output("p" + std::to_string(pi) + "_salt" + std::to_string(salt), emit_dropout(b, x, seed, ps[pi], salt));
  const Graph g = b.take();
  Program program(ctx, g);
  std::int64_t kept = 0, total = 0;
  for (const std::int32_t s : {0, 1, -1, 7, -8, 123456789, std::numeric_limits<std::int32_t>::max(),
                               std::numeric_limits<std::int32_t>::min()}) {
    SCOPED_TRACE("seed " + std::to_string(s));
    const TensorMap in{{"x", HostTensor::of({DType::f32, {n}}, xv)}, {"seed", seed_tensor(s)}};
    const TensorMap got = program.run(in);
    const TensorMap f32 = interpret(g, in, {.compute = ComputeType::f32}).outputs;
    const TensorMap f64 = interpret(g, in, {.compute = ComputeType::f64}).outputs;
    for (const auto& [name, t] : got) {
      for (std::size_t i = 0; i < t.size(); ++i) {
        const bool keep = t.at(i) != 0.0;
        ASSERT_EQ(keep, f32.at(name).at(i) != 0.0) << name << "[" << i << "]: the f32 interpreter differs";
        ASSERT_EQ(keep, f64.at(name).at(i) != 0.0) << name << "[" << i << "]: the f64 interpreter differs";
        // Kept: x / (1 - p) within dropout's elementwise class (4 ulp of the value).
        const double want = f64.at(name).at(i);
        ASSERT_LE(std::fabs(t.at(i) - want), 4.0 * 0x1p-23 * std::fabs(want)) << name << "[" << i << "]";
        kept += keep ? 1 : 0;
        ++total;
      }
    }
  }
  // p from 0 to just below 1: neither everything nor nothing was kept.
  EXPECT_GT(kept, total / 4);
  EXPECT_LT(kept, total);
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

TEST_F(VkTest, DropoutKeepTestIsExactOnTheUniformsOwnValues) {
  auto ctx = make_context();
  const std::int64_t n = 1024;
  const HostTensor x = HostTensor::filled({DType::f32, {n}}, 1.0);
  // p exactly on an element's uniform q 2^-24 keeps it (uniform >= p); the next double above drops it.
  struct Case {
    std::int64_t salt;
    std::uint32_t element;
  };
  std::vector<Case> cases = {{8427, 529}, {10962, 926}};  // q = 0 and q = 2^24 - 1 (kEdgeDraws)
  for (std::uint32_t e : {3u, 100u, 1000u}) cases.push_back({5, e});
  GraphBuilder b("dropout_boundaries");
  Tensor xs = b.input("x", {DType::f32, {n}});
  Tensor seed = b.input("seed", {DType::i32, {}});
  struct Expect {
    std::string name;
    std::uint32_t element;
    bool keep;
  };
  std::vector<Expect> expects;
  for (const Case& c : cases) {
    const std::uint32_t q = philox::draw(philox::stream_key(0, c.salt), c.element)[0] >> 8;
    const double on = q * 0x1p-24;
    const std::string tag = std::to_string(c.salt) + "_" + std::to_string(c.element);
    const double above = on == 0.0 ? std::numeric_limits<double>::denorm_min() : std::nextafter(on, 1.0);
    if (on < 1.0) {
      b.output("on" + tag, emit_dropout(b, xs, seed, on, c.salt));
      expects.push_back({"on" + tag, c.element, true});
    }
    if (above < 1.0) {
      b.output("above" + tag, emit_dropout(b, xs, seed, above, c.salt));
      expects.push_back({"above" + tag, c.element, false});
    }
    if (on > 0.0) {
      b.output("below" + tag, emit_dropout(b, xs, seed, std::nextafter(on, 0.0), c.salt));
      expects.push_back({"below" + tag, c.element, true});
    }
  }
  const Graph g = b.take();
  const TensorMap in{{"x", x}, {"seed", seed_tensor(0)}};
  const TensorMap got = check(ctx, g, in);
  const TensorMap f32 = interpret(g, in, {.compute = ComputeType::f32}).outputs;
  for (const Expect& e : expects) {
    EXPECT_EQ(got.at(e.name).at(e.element) != 0.0, e.keep) << e.name;
    EXPECT_EQ(f32.at(e.name).at(e.element) != 0.0, e.keep) << e.name << " (f32 interpreter)";
    for (std::size_t i = 0; i < got.at(e.name).size(); ++i)
      ASSERT_EQ(got.at(e.name).at(i) != 0.0, f32.at(e.name).at(i) != 0.0) << e.name << "[" << i << "]";
  }
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

TEST_F(VkTest, DropoutOnEdgeShapesAndItsGradientRecomputesTheMask) {
  auto ctx = make_context();
  {
    GraphBuilder b("dropout_shapes");
    TracingScope scope(b);
    Tensor s = b.input("s", {DType::f32, {}});
    Tensor e = b.input("e", {DType::f32, {2, 0}});
    Tensor m = b.input("m", {DType::f32, {3, 257}});
    b.output("scalar", dropout(s, 0.5));
    b.output("empty", dropout(e, 0.5));
    b.output("matrix", dropout(m, 0.3));
    const Graph g = b.take();
    for (const std::int32_t seed : {3, 4}) {
      check(ctx, g,
            {{"s", HostTensor::f32({}, {1.5f})},
             {"e", HostTensor::of({DType::f32, {2, 0}}, {})},
             {"m", HostTensor::filled({DType::f32, {3, 257}}, -0.75)},
             {kStepSeedInput, seed_tensor(seed)}});
    }
  }
  GraphBuilder b("dropout_grad");
  TracingScope scope(b);
  Tensor x = b.param("x", {DType::f32, {7, 33}});
  Tensor w = b.input("w", {DType::f32, {7, 33}});
  Tensor y = dropout(x, 0.4);
  b.output("y", y);
  b.output("loss", sum(mul(y, w)));
  const Graph g = differentiate(b.take());
  for (const Node& node : g.nodes()) {
    if (!has_kernel(node.op)) {
      GTEST_SKIP() << "the gradient graph needs op '" << op_name(node.op) << "', which has no Vulkan kernel yet";
    }
  }
  std::mt19937 rng(9);
  std::uniform_real_distribution<float> dist(0.5f, 2.0f);
  std::vector<float> xv(7 * 33), wv(7 * 33);
  for (float& v : xv) v = dist(rng);
  for (float& v : wv) v = dist(rng);
  const TensorMap got = check(
      ctx, g,
      {{"x", HostTensor::f32({7, 33}, xv)}, {"w", HostTensor::f32({7, 33}, wv)}, {kStepSeedInput, seed_tensor(21)}});
  const auto fwd = got.at("y").to_f64();
  const auto grad = got.at("grad.x").to_f64();
  std::size_t dropped = 0;
  for (std::size_t i = 0; i < fwd.size(); ++i) {
    EXPECT_EQ(fwd[i] == 0.0, grad[i] == 0.0) << "element " << i << ": the gradient's mask differs";
    dropped += fwd[i] == 0.0 ? 1 : 0;
  }
  EXPECT_GT(dropped, 0u);
  EXPECT_LT(dropped, fwd.size());
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

}  // namespace
}  // namespace tg::vk
