// attention against the computation it replaces, on random shapes and every float dtype: the graph
// y = attention(q, k, v), loss = sum(y * w), differentiated for q, k and v, next to the same graph
// with y composed from the older ops (matmul, softmax / softmax_causal) in f32 between casts.
//   1. The f64 oracle of both graphs agrees (1e-9 of the scale in f32; in f16/bf16 the fused
//      backward reads the stored, rounded output for its row term, so a few units of the dtype).
//   2. The fused graph on the f32 interpreter and on Vulkan matches its f64 oracle within each
//      output's tolerance (tg::output_tolerances), and a second Vulkan run repeats the bits.
// Sizes reach past the flash kernels' tiles (T up to 80, head_dim around 16, 32 and 64), T = 1,
// Tq != Tk, empty batches excluded (tests/unit/attention_test.cpp covers those).
#include <rapidcheck.h>

#include <cmath>
#include <string>
#include <vector>

#include "property/property_support.h"
#include "tensorgrad/ir/ops/attention.h"
#include "tensorgrad/runtime/tolerance.h"
#include "tensorgrad/vk/executor.h"
#include "vk_oracle_check.h"
#include "vk_test_support.h"

namespace tg::vk {
namespace {

using testing::VkTest;

struct Draw {
  Shape batch;
  std::int64_t tq = 1, tk = 1, d = 1, dv = 1;
  bool causal = false;
  std::optional<double> scale;
  DType dtype = DType::f32;
  std::uint32_t seed = 0;

  std::string label() const {
    return "batch " + TensorType{DType::f32, batch}.to_string() + " Tq " + std::to_string(tq) + " Tk " +
           std::to_string(tk) + " D " + std::to_string(d) + " Dv " + std::to_string(dv) + (causal ? " causal" : "") +
           " " + std::string(dtype_name(dtype)) + (scale ? " scale " + std::to_string(*scale) : "");
  }
};

rc::Gen<std::int64_t> gen_length() {
  return rc::gen::weightedOneOf<std::int64_t>({{3, rc::gen::inRange<std::int64_t>(1, 9)},
                                               {2, rc::gen::inRange<std::int64_t>(9, 81)},
                                               {1, rc::gen::element<std::int64_t>(1, 31, 32, 33, 63, 64, 65)}});
}

rc::Gen<std::int64_t> gen_head_dim() {
  return rc::gen::weightedOneOf<std::int64_t>(
      {{3, rc::gen::inRange<std::int64_t>(1, 9)}, {2, rc::gen::element<std::int64_t>(15, 16, 17, 31, 33, 63, 64, 65)}});
}

Draw draw_case() {
  Draw c;
  c.batch = *rc::gen::container<Shape>(*rc::gen::inRange(0, 3), rc::gen::inRange<std::int64_t>(1, 4));
  c.causal = *rc::gen::arbitrary<bool>();
  c.tq = *gen_length();
  c.tk = c.causal ? c.tq : *gen_length();
  c.d = *gen_head_dim();
  c.dv = *gen_head_dim();
  if (*rc::gen::arbitrary<bool>()) c.scale = static_cast<float>(*rc::gen::inRange(-150, 150) / 100.0);
  c.dtype = *rc::gen::element(DType::f32, DType::f16, DType::bf16);
  c.seed = *rc::gen::arbitrary<std::uint32_t>();
  return c;
}

Shape with(Shape batch, std::int64_t rows, std::int64_t cols) {
  batch.push_back(rows);
  batch.push_back(cols);
  return batch;
}

// y and its gradients; `fused` picks attention or the composed math (f32 between casts).
Graph case_graph(const Draw& c, bool fused) {
  GraphBuilder b(fused ? "fused" : "composed");
  TracingScope scope(b);
  const Tensor q = b.input("q", {c.dtype, with(c.batch, c.tq, c.d)});
  const Tensor k = b.input("k", {c.dtype, with(c.batch, c.tk, c.d)});
  const Tensor v = b.input("v", {c.dtype, with(c.batch, c.tk, c.dv)});
  const Tensor w = b.input("w", {DType::f32, with(c.batch, c.tq, c.dv)});
  Tensor y;
  if (fused) {
    y = attention(q, k, v, {.causal = c.causal, .scale = c.scale});
  } else {
    const double scale = c.scale ? *c.scale : static_cast<float>(1 / std::sqrt(static_cast<double>(c.d)));
    const Tensor qf = cast(q, DType::f32), kf = cast(k, DType::f32), vf = cast(v, DType::f32);
    const Tensor scores = matmul(qf, swap_axes(kf, -1, -2)) * static_cast<float>(scale);
    y = cast(matmul(c.causal ? softmax_causal(scores) : softmax(scores, -1), vf), c.dtype);
  }
  b.output("y", y);
  b.output("loss", sum(cast(y, DType::f32) * w));
  return differentiate(b.take(), {.loss = "loss", .wrt = {"q", "k", "v"}});
}

TensorMap case_inputs(const Draw& c) {
  const auto of = [&](const char* name, Shape shape, std::uint32_t salt, DType dtype) {
    const HostTensor f = testing::random_f32(shape, c.seed * 7 + salt);
    return std::pair<std::string, HostTensor>(
        name, dtype == DType::f32 ? f : HostTensor::low_precision(dtype, shape, f.to_f32()));
  };
  TensorMap in;
  in.insert(of("q", with(c.batch, c.tq, c.d), 1, c.dtype));
  in.insert(of("k", with(c.batch, c.tk, c.d), 2, c.dtype));
  in.insert(of("v", with(c.batch, c.tk, c.dv), 3, c.dtype));
  in.insert(of("w", with(c.batch, c.tq, c.dv), 4, DType::f32));
  return in;
}

double roundoff_of(DType dtype) {
  return dtype == DType::f16 ? std::ldexp(1.0, -11) : dtype == DType::bf16 ? std::ldexp(1.0, -8) : 1e-9;
}

class AttentionProperty : public VkTest {};

TEST_F(AttentionProperty, FusedMatchesComposedOnTheOracleAndRunsWithinTolerance) {
  const std::shared_ptr<Context> ctx = make_context();
  const bool sixteen = ctx->info().storage_buffer_16bit_access;
  tg::testing::check_property(
      [&] {
        Draw c = draw_case();
        if (!sixteen) c.dtype = DType::f32;
        RC_TAG(dtype_name(c.dtype));
        const TensorMap in = case_inputs(c);
        const Graph fused = case_graph(c, true), composed = case_graph(c, false);
        const InterpResult oracle = interpret(fused, in, {.compute = ComputeType::f64, .keep_all_values = true});
        const InterpResult reference = interpret(composed, in, {.compute = ComputeType::f64});
        const std::vector<OutputTolerance> bounds = output_tolerances(fused, oracle.values);
        Program program(ctx, fused, {.fuse_elementwise = false});
        const TensorMap gpu = program.run(in), again = program.run(in);
        const TensorMap f32_run = interpret(fused, in, {.compute = ComputeType::f32}).outputs;
        for (std::size_t o = 0; o < fused.outputs().size(); ++o) {
          const std::string& name = fused.outputs()[o].name;
          const auto want = oracle.outputs.at(name).to_f64();
          const auto composed_value = reference.outputs.at(name).to_f64();
          const auto vk = gpu.at(name).to_f64(), interp = f32_run.at(name).to_f64();
          RC_ASSERT(testing::same_bits(vk, again.at(name).to_f64()));
          const double agree = 16 * roundoff_of(c.dtype) * bounds[o].scale;
          for (std::size_t i = 0; i < want.size(); ++i) {
            if (std::fabs(want[i] - composed_value[i]) > agree || std::fabs(vk[i] - want[i]) > bounds[o].absolute() ||
                std::fabs(interp[i] - want[i]) > bounds[o].absolute()) {
              RC_FAIL(c.label() + ": " + name + "[" + std::to_string(i) + "] oracle " + std::to_string(want[i]) +
                      ", composed oracle " + std::to_string(composed_value[i]) + " (allowed " + std::to_string(agree) +
                      "), Vulkan " + std::to_string(vk[i]) + ", f32 interpreter " + std::to_string(interp[i]) +
                      " (allowed " + std::to_string(bounds[o].absolute()) + ")");
            }
          }
        }
      },
      40);
  EXPECT_NO_VALIDATION_MESSAGES(ctx);
}

}  // namespace
}  // namespace tg::vk
