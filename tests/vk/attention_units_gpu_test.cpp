// The matrix-unit attention forward (shaders/attention_coopmat.comp) against the f64 oracle on a
// device that has matrix units: f16 and bf16 q, k, v; attention and attention_lse; causal and not;
// both sides of the 64-row query tiles and 64-key tiles (T = 1, 63, 64, 65, 200, 1100), Tq != Tk,
// head_dim and Dv of 16, 32, 48 and 64, batch and head axes, scores of 1e2 magnitude; and the
// gradient graph (lse, dq and [dk | dv] on the units too). Each case checks
// that the unit path ran. CI's lavapipe has no cooperative matrices: these skip there, saying so.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "matrix_units_test_support.h"
#include "support/library.h"
#include "tensorgrad/ir/ops/attention.h"
#include "tensorgrad/runtime/tolerance.h"
#include "tensorgrad/vk/executor.h"
#include "vk/kernels/matmul_units.h"
#include "vk_oracle_check.h"
#include "vk_test_support.h"

namespace tg::vk {
namespace {

using testing::VkTest;

struct Case {
  Shape batch;
  std::int64_t tq, tk, d, dv;
  bool causal;
  float magnitude = 1.f;
};

Shape with(Shape batch, std::int64_t rows, std::int64_t cols) {
  batch.push_back(rows);
  batch.push_back(cols);
  return batch;
}

class AttentionUnitsTest : public testing::MatrixUnitsFixture {
 protected:
  HostTensor input(DType dtype, const Shape& shape, std::uint32_t seed, float magnitude) {
    const HostTensor f = testing::random_f32(shape, seed, -magnitude, magnitude);
    return HostTensor::low_precision(dtype, shape, f.to_f32());
  }

  // Runs `g` (inputs q, k, v of `dtype`, w f32) on Vulkan and the oracle; every output within its
  // cone tolerance, and `unit_path` hit `hits` times.
  void check(const Graph& g, const Case& c, DType dtype, const std::string& unit_path, std::uint64_t hits) {
    TensorMap in{{"q", input(dtype, with(c.batch, c.tq, c.d), 1, c.magnitude)},
                 {"k", input(dtype, with(c.batch, c.tk, c.d), 2, c.magnitude)},
                 {"v", input(dtype, with(c.batch, c.tk, c.dv), 3, 1.f)}};
    if (g.find_input("w")) in.emplace("w", testing::random_f32(with(c.batch, c.tq, c.dv), 4));
    reset_launch_path_counts();
    Program program(ctx_, g);
    std::uint64_t unit_hits = 0;
    for (const LaunchPathCount& p : launch_path_counts()) {
      if (p.kernel + "/" + p.path == unit_path) unit_hits += p.hits;
    }
    EXPECT_EQ(unit_hits, hits) << unit_path;
    const TensorMap got = program.run(in);
    const InterpResult oracle = interpret(g, in, {.compute = ComputeType::f64, .keep_all_values = true});
    const std::vector<OutputTolerance> bounds = output_tolerances(g, oracle.values);
    for (std::size_t o = 0; o < g.outputs().size(); ++o) {
      const std::string& name = g.outputs()[o].name;
      const HostTensor& want = oracle.outputs.at(name);
      const HostTensor& out = got.at(name);
      std::size_t bad = 0;
      for (std::size_t i = 0; i < want.size(); ++i) {
        if (!(std::fabs(out.at(i) - want.at(i)) <= bounds[o].absolute()) && ++bad <= 5) {
          ADD_FAILURE() << name << "[" << i << "]: Vulkan " << out.at(i) << ", oracle " << want.at(i) << " (allowed "
                        << bounds[o].absolute() << ")";
        }
      }
      EXPECT_EQ(bad, 0u) << name;
    }
    EXPECT_NO_VALIDATION_MESSAGES(ctx_);
  }
};

std::vector<Case> cases() {
  std::vector<Case> out;
  for (std::int64_t t : {1, 63, 64, 65, 200, 1100}) out.push_back({{2}, t, t, 64, 64, true});
  for (std::int64_t t : {1, 64, 65, 130}) out.push_back({{1, 2}, t, t, 32, 48, false});
  out.push_back({{3}, 70, 129, 16, 16, false});  // Tq != Tk
  out.push_back({{2}, 129, 5, 48, 64, false});
  out.push_back({{}, 96, 96, 64, 32, true, 3.f});  // scores up to ~5e2
  return out;
}

TEST_F(AttentionUnitsTest, ForwardAndLseMatchTheOracle) {
  for (DType dtype : {DType::f16, DType::bf16}) {
    if (!(dtype == DType::f16 ? support_.f16 : support_.bf16)) continue;
    const std::string suffix = dtype == DType::f16 ? "f16" : "bf16";
    for (const Case& c : cases()) {
      SCOPED_TRACE(suffix + " T " + std::to_string(c.tq) + "x" + std::to_string(c.tk) + " D " + std::to_string(c.d) +
                   " Dv " + std::to_string(c.dv) + (c.causal ? " causal" : ""));
      GraphBuilder b("units");
      TracingScope scope(b);
      const Tensor q = b.input("q", {dtype, with(c.batch, c.tq, c.d)});
      const Tensor k = b.input("k", {dtype, with(c.batch, c.tk, c.d)});
      const Tensor v = b.input("v", {dtype, with(c.batch, c.tk, c.dv)});
      b.output("y", attention(q, k, v, {.causal = c.causal}));
      b.output("lse", attention_lse(q, k, {.causal = c.causal}));
      const Graph g = b.take();
      check(g, c, dtype, "attention/matrix_units_" + suffix, 1);
      check(g, c, dtype, "attention_lse/matrix_units_" + suffix, 1);
    }
  }
}

TEST_F(AttentionUnitsTest, GradientGraphMatchesTheOracle) {
  const DType dtype = support_.bf16 ? DType::bf16 : DType::f16;
  for (const Case& c : {Case{{2, 2}, 130, 130, 64, 64, true}, Case{{3}, 65, 100, 32, 16, false}}) {
    GraphBuilder b("units_grad");
    TracingScope scope(b);
    const Tensor q = b.input("q", {dtype, with(c.batch, c.tq, c.d)});
    const Tensor k = b.input("k", {dtype, with(c.batch, c.tk, c.d)});
    const Tensor v = b.input("v", {dtype, with(c.batch, c.tk, c.dv)});
    const Tensor w = b.input("w", {DType::f32, with(c.batch, c.tq, c.dv)});
    const Tensor y = attention(q, k, v, {.causal = c.causal});
    b.output("y", y);
    b.output("loss", sum(cast(y, DType::f32) * w));
    const Graph g = differentiate(b.take(), {.loss = "loss", .wrt = {"q", "k", "v"}});
    const std::string suffix = dtype == DType::f16 ? "f16" : "bf16";
    for (const char* op : {"attention", "attention_lse", "attention_grad_q", "attention_grad_kv"}) {
      check(g, c, dtype, std::string(op) + "/matrix_units_" + suffix, 1);
    }
  }
}

}  // namespace
}  // namespace tg::vk
