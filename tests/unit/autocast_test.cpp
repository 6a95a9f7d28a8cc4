// The autocast pass (tensorgrad/passes/autocast.h) and mixed-precision training
// (PrecisionPolicy): where the casts go, that f32 changes nothing, that a mixed step graph on
// interp_f32 agrees with its f64 oracle, that W2 trains in bf16, and W2's bf16 losses against
// PyTorch 1.13's CPU autocast (tests/golden/train_mixed/, from tools/goldens_train.py).
#include "tensorgrad/passes/autocast.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "support/library.h"
#include "support/train_parity.h"
#include "tensorgrad/ir/ops/ids/indexing.h"
#include "tensorgrad/ir/ops/ids/matmul.h"
#include "tensorgrad/ir/ops/ids/precision.h"
#include "tensorgrad/ir/ops/ids/softmax.h"
#include "tensorgrad/runtime/tolerance.h"

namespace tg {

// gtest prints dtypes and types by name (found by argument-dependent lookup in tg).
static void PrintTo(DType dtype, std::ostream* os) { *os << dtype_name(dtype); }
static void PrintTo(const TensorType& type, std::ostream* os) { *os << type.to_string(); }

namespace {

namespace fs = std::filesystem;
using namespace tg::testing;

// The nodes of op `op` in g.
std::vector<const Node*> nodes_of(const Graph& g, OpId op) {
  std::vector<const Node*> out;
  for (const Node& n : g.nodes())
    if (n.op == op) out.push_back(&n);
  return out;
}
DType dtype_of(const Graph& g, ValueId v) { return g.type(v).dtype; }

// x [4, 8] -> matmul W1 -> relu -> matmul W2 -> * 0.5 -> softmax -> log -> mean: two matrix
// products with an activation between them, a scalar constant, a softmax and a reduction.
Graph small_forward() {
  GraphBuilder b("small");
  TracingScope scope(b);
  const Tensor w1 = b.input("W1", {DType::f32, {8, 8}}, InputKind::param);
  const Tensor w2 = b.input("W2", {DType::f32, {8, 8}}, InputKind::param);
  const Tensor x = b.input("x", {DType::f32, {4, 8}});
  const Tensor h = relu(matmul(x, w1));
  const Tensor p = softmax(matmul(h, w2) * 0.5, -1);
  b.output("loss", mean(log(p)));
  return b.take();
}

TEST(Autocast, F32LeavesTheGraphIdentical) {
  const Graph g = small_forward();
  EXPECT_EQ(autocast(g, DType::f32), g);
  EXPECT_THROW(autocast(g, DType::i32), Error);
}

TEST(Autocast, MatmulsRunInTheComputeDtypeAndSoftmaxAndReductionsInF32) {
  for (const DType compute : {DType::bf16, DType::f16}) {
    SCOPED_TRACE(std::string(dtype_name(compute)));
    const Graph g = autocast(small_forward(), compute);
    const auto matmuls = nodes_of(g, op::Matmul);
    ASSERT_EQ(matmuls.size(), 2u);
    for (const Node* m : matmuls) {
      EXPECT_EQ(dtype_of(g, m->inputs[0]), compute);
      EXPECT_EQ(dtype_of(g, m->inputs[1]), compute);
      EXPECT_EQ(dtype_of(g, m->output), compute);
    }
    // relu between the matmuls stays in the compute dtype: the second matmul reads it uncast.
    const Node& relu_node = g.node(g.value(matmuls[1]->inputs[0]).producer);
    EXPECT_EQ(op_name(relu_node.op), "relu");
    const auto softmaxes = nodes_of(g, op::Softmax);
    ASSERT_EQ(softmaxes.size(), 1u);
    EXPECT_EQ(dtype_of(g, softmaxes[0]->inputs[0]), DType::f32);
    EXPECT_EQ(dtype_of(g, softmaxes[0]->output), DType::f32);
    // The scaled scores: a 16-bit matmul result times an f32 constant runs in f32 and is cast back
    // (one rounding, PyTorch's opmath), so the softmax reads an f32 cast of a 16-bit value.
    const Node& softmax_input = g.node(g.value(softmaxes[0]->inputs[0]).producer);
    ASSERT_EQ(op_name(softmax_input.op), "cast");
    EXPECT_EQ(dtype_of(g, softmax_input.inputs[0]), compute);
    const Node& scaled = g.node(g.value(softmax_input.inputs[0]).producer);
    ASSERT_EQ(op_name(scaled.op), "cast");
    const Node& mul = g.node(g.value(scaled.inputs[0]).producer);
    EXPECT_EQ(op_name(mul.op), "mul");
    EXPECT_EQ(dtype_of(g, mul.inputs[0]), DType::f32);
    EXPECT_EQ(dtype_of(g, mul.inputs[1]), DType::f32);
    EXPECT_EQ(dtype_of(g, mul.output), DType::f32);
    for (const Node& n : g.nodes()) {
      const std::string_view name = op_name(n.op);
      if (name == "mean" || name == "log") {
        EXPECT_EQ(dtype_of(g, n.inputs[0]), DType::f32) << name;
      }
    }
    // Params and data inputs, and the loss, keep their dtype.
    for (const GraphInput& in : g.inputs()) EXPECT_EQ(dtype_of(g, in.value), DType::f32) << in.name;
    EXPECT_EQ(g.type(*g.find_output("loss")), (TensorType{DType::f32, {}}));
    EXPECT_NO_THROW(verify(g));
  }
}

// A computed bf16 value meeting a computed f32 one (a bias param) is widened to f32, as PyTorch
// promotes bf16 + f32.
TEST(Autocast, ComputedInputsMeetingInTwoDtypesRunInF32) {
  GraphBuilder b("bias");
  {
    TracingScope scope(b);
    const Tensor w = b.input("W", {DType::f32, {8, 8}}, InputKind::param);
    const Tensor bias = b.input("b", {DType::f32, {8}}, InputKind::param);
    const Tensor x = b.input("x", {DType::f32, {4, 8}});
    b.output("loss", sum(matmul(x, w) + bias));
  }
  const Graph g = autocast(b.take(), DType::bf16);
  const auto adds = [&] {
    std::vector<const Node*> out;
    for (const Node& n : g.nodes())
      if (op_name(n.op) == "add") out.push_back(&n);
    return out;
  }();
  ASSERT_EQ(adds.size(), 1u);
  EXPECT_EQ(dtype_of(g, adds[0]->inputs[0]), DType::f32);
  EXPECT_EQ(dtype_of(g, adds[0]->output), DType::f32);
  EXPECT_EQ(op_name(g.node(g.value(adds[0]->inputs[0]).producer).op), "cast");
}

// differentiate takes a 16-bit loss (seeded with 1 in its dtype), and an input the loss does not
// read gets zeros of its own dtype.
TEST(Autocast, DifferentiateTakesA16BitLossAndGivesUnusedInputsZerosOfTheirDtype) {
  GraphBuilder b("bf16_loss");
  {
    TracingScope scope(b);
    const Tensor p = b.input("p", {DType::bf16, {3}}, InputKind::param);
    b.input("unused", {DType::bf16, {2}}, InputKind::param);
    b.output("loss", sum(p * p));
  }
  const Graph g = differentiate(b.take());
  EXPECT_EQ(g.type(*g.find_output("grad.p")), (TensorType{DType::bf16, {3}}));
  EXPECT_EQ(g.type(*g.find_output("grad.unused")), (TensorType{DType::bf16, {2}}));
  const TensorMap out = interpret(g,
                                  {{"p", HostTensor::of({DType::bf16, {3}}, {1.0, -2.0, 0.5})},
                                   {"unused", HostTensor::of({DType::bf16, {2}}, {3.0, 4.0})}},
                                  {.compute = ComputeType::f32})
                            .outputs;
  EXPECT_EQ(out.at("grad.p").to_f64(), (std::vector<double>{2.0, -4.0, 1.0}));
  EXPECT_EQ(out.at("grad.unused").to_f64(), (std::vector<double>{0.0, 0.0}));
}

// A small transformer trained with a bf16 policy: the step graph's params, gradients and Adam
// state are f32, its matmuls bf16 and its softmaxes read f32; with f32 the step graph is the one
// compiled without a policy.
examples::TransformerConfig tiny_config() { return {.vocab = 11, .context = 4, .width = 8, .layers = 1, .heads = 2}; }
InputSpecs tiny_inputs() { return {{"tokens", {{2, 4}, DType::i32}}, {"targets", {{2, 4}, DType::i32}}}; }
Training tiny_training(const examples::CharTransformer& model, PrecisionPolicy precision,
                       Backend backend = Backend::interp_f32) {
  return compile(TrainingSpec<examples::CharTransformer>{.model = model,
                                                         .loss = examples::transformer_loss,
                                                         .inputs = tiny_inputs(),
                                                         .optimizer = {.kind = AdamWConfig{}},
                                                         .lr = 1e-2,
                                                         .backend = backend,
                                                         .seed = 3,
                                                         .precision = precision});
}
TensorMap tiny_batch(std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> token(0, 10);
  std::vector<std::int32_t> tokens(8), targets(8);
  for (auto& t : tokens) t = token(rng);
  for (auto& t : targets) t = token(rng);
  return {{"tokens", HostTensor::i32({2, 4}, tokens)}, {"targets", HostTensor::i32({2, 4}, targets)}};
}

TEST(MixedPrecisionTraining, F32PolicyCompilesTheSameStepGraph) {
  const examples::CharTransformer model(tiny_config());
  EXPECT_EQ(tiny_training(model, {}).graph(), tiny_training(model, {.compute = DType::f32}).graph());
  EXPECT_EQ(nodes_of(tiny_training(model, {}).graph(), op::Cast).size(), 0u);
}

TEST(MixedPrecisionTraining, StepGraphKeepsParamsGradientsAndStateInF32) {
  const examples::CharTransformer model(tiny_config());
  const Training train = tiny_training(model, {.compute = DType::bf16});
  const Graph& g = train.graph();
  const auto matmuls = nodes_of(g, op::Matmul);
  ASSERT_FALSE(matmuls.empty());
  std::size_t forward_bf16 = 0;
  for (const Node* m : matmuls) forward_bf16 += dtype_of(g, m->output) == DType::bf16 ? 1 : 0;
  // 4 projections + 2 attention products + fc + out + head in the forward, their gradients too.
  EXPECT_GE(forward_bf16, 9u);
  for (const Node* s : nodes_of(g, op::SoftmaxCausal)) EXPECT_EQ(dtype_of(g, s->inputs[0]), DType::f32);
  for (const GraphInput& in : g.inputs()) {
    if (in.kind != InputKind::data) {
      EXPECT_EQ(dtype_of(g, in.value), DType::f32) << in.name;
    }
  }
  for (const GraphOutput& o : g.outputs()) {
    if (o.name.starts_with("grad.") || o.name.ends_with(".new")) {
      EXPECT_EQ(dtype_of(g, o.value), DType::f32) << o.name;
    }
  }
  // bf16 has f32's range: no loss scaling unless asked for.
  EXPECT_FALSE(g.find_input(kLossScaleInput).has_value());
  EXPECT_EQ(train.loss_scale(), 1.0);
  // The casts show in the graph's text.
  EXPECT_NE(print_graph(g).find("cast("), std::string::npos);
}

// The mixed step graph computed on interp_f32 against the f64 oracle of the same graph (which
// rounds every 16-bit value on store as interp_f32 does), under the runtime's cone bounds.
TEST(MixedPrecisionTraining, StepOnInterpF32AgreesWithTheOracle) {
  const examples::CharTransformer model(tiny_config());
  for (const DType compute : {DType::bf16, DType::f16}) {
    SCOPED_TRACE(std::string(dtype_name(compute)));
    Training train = tiny_training(model, {.compute = compute});
    const Graph& g = train.graph();
    TensorMap in = optimizer_step_inputs(OptimizerConfig{.kind = AdamWConfig{}}, 1e-2, 1);
    for (auto& [name, value] : tiny_batch(1)) in.insert_or_assign(name, value);
    for (auto& [name, value] : train.download_param_tensors()) in.insert_or_assign(name, value);
    for (auto& [name, value] : train.download_optimizer_state()) in.insert_or_assign(name, value);
    for (const GraphInput& input : g.inputs()) {
      if (!in.contains(input.name)) in.emplace(input.name, HostTensor::filled(g.type(input.value), 0.0));
    }
    const auto oracle = interpret(g, in, {.compute = ComputeType::f64, .keep_all_values = true}).values;
    const TensorMap got = interpret(g, in, {.compute = ComputeType::f32}).outputs;
    std::size_t compared = 0;
    for (const OutputComparison& c : compare_with_oracle(g, got, oracle)) {
      EXPECT_TRUE(c.ok()) << c.name << ": " << c.elements_off << " elements off, largest error " << c.largest_error
                          << ", bound " << c.tolerance.absolute();
      ++compared;
    }
    EXPECT_EQ(compared, g.outputs().size());
  }
}

// W2 (shrunk as the parity goldens shrink it) learns in bf16: over 30 steps on one repeated batch the
// loss falls well below its start.
// The f32 run of the same model and seed is printed beside it (the figures of docs/training.md).
TEST(MixedPrecisionTraining, W2SmallTrainsInBf16) {
  const examples::CharTransformer model({.vocab = 65, .context = 16, .width = 32, .layers = 2, .heads = 4});
  const auto training = [&](DType compute) {
    return compile(TrainingSpec<examples::CharTransformer>{
        .model = model,
        .loss = examples::transformer_loss,
        .inputs = {{"tokens", {{4, 16}, DType::i32}}, {"targets", {{4, 16}, DType::i32}}},
        .optimizer = {.kind = AdamWConfig{}},
        .lr = 3e-3,
        .seed = 5,
        .precision = {.compute = compute}});
  };
  Training train = training(DType::bf16), train_f32 = training(DType::f32);
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> token(0, 64);
  std::vector<std::int32_t> stream(4 * 17);
  for (auto& t : stream) t = token(rng);
  std::vector<std::int32_t> tokens, targets;
  for (int b = 0; b < 4; ++b) {
    tokens.insert(tokens.end(), stream.begin() + b * 17, stream.begin() + b * 17 + 16);
    targets.insert(targets.end(), stream.begin() + b * 17 + 1, stream.begin() + b * 17 + 17);
  }
  const TensorMap batch{{"tokens", HostTensor::i32({4, 16}, tokens)}, {"targets", HostTensor::i32({4, 16}, targets)}};
  std::vector<double> losses;
  for (int step = 0; step < 30; ++step) {
    const StepResult r = train.step(batch), r32 = train_f32.step(batch);
    ASSERT_TRUE(r.ok()) << r.failure().message;
    ASSERT_TRUE(r32.ok()) << r32.failure().message;
    losses.push_back(r.loss());
    if (step % 5 == 0 || step == 29) {
      std::printf("[ measured ] W2 small step %2d: bf16 %.4f, f32 %.4f\n", step + 1, r.loss(), r32.loss());
    }
  }
  EXPECT_LT(losses.back(), 0.5 * losses.front());
}

// ---- W2 bf16 against PyTorch 1.13 CPU autocast ----
//
// Both sides run the matmuls on bf16-rounded operands with f32 accumulation and a bf16 result, and
// the bias adds, GELU, LayerNorm, embedding and cross-entropy in f32 (a bf16 product plus an f32
// bias promotes to f32 on both). The op lists differ inside attention: PyTorch's CPU autocast runs
// scores * scale, the mask and softmax on bf16 tensors (each computing in float and rounding its
// result to bf16), we run the scale in f32 rounded to bf16 and softmax in f32 (rounded to bf16 as
// the next matmul's operand): the same forward values up to f32 summation order, but PyTorch's
// softmax backward rounds its gradients to bf16 where ours stay f32. So each side is its own bf16
// approximation of the f32 trajectory, each rounding an f32-level difference to a different bf16
// neighbour now and then (a relative 2^-8 step of one element, which the loss feels far less).
// PyTorch's own bf16-vs-f32 distance D (the largest loss difference over the run; 1.5e-3 here,
// about 2^-12 of the loss: thousands of 2^-8 roundings averaging out) measures how far bf16
// rounding carries this trajectory; ours may be as far on the other side: the bound is 2 D. Taken
// over the run rather than up to each step, since on the first steps D is one sample (measured:
// step 2's difference is already 2 D of steps 1-2). A run that ignored the policy (all f32) would
// be within D too, so our bf16 losses must also differ from PyTorch's f32 ones by more than f32
// drift (1e-5).
constexpr double kBf16DriftFactor = 2.0;
constexpr double kF32Drift = 1e-5;

TEST(MixedPrecisionTraining, W2SmallBf16FollowsPyTorchCpuAutocast) {
  const fs::path dir = fs::path(TG_SOURCE_DIR) / "tests/golden/train_mixed";
  const fs::path path = dir / "w2_small_bf16.json";
  ASSERT_TRUE(fs::exists(path)) << path << " is missing (regenerate: /usr/bin/python3 tools/goldens_train.py)";
  const nlohmann::json doc = nlohmann::json::parse(read_text(path));
  const TrainGolden base = load_train_golden(fs::path(TG_SOURCE_DIR) / "tests/golden/train", "w2_small");
  const std::vector<double> want = numbers(at(doc, "autocast_loss"));
  const std::vector<double> f32 = numbers(at(at(doc, "float32"), "loss"));
  const nlohmann::json& m = at(base.doc, "model");
  const examples::CharTransformer model(examples::TransformerConfig{
      integer(m, "vocab"), integer(m, "context"), integer(m, "width"), integer(m, "layers"), integer(m, "heads")});
  InputSpecs inputs;
  for (const auto& [name, value] : golden_batch(base, 0))
    inputs.emplace(name, InputSpec{value.type.shape, value.type.dtype});
  Training train = compile(TrainingSpec<examples::CharTransformer>{.model = model,
                                                                   .loss = examples::transformer_loss,
                                                                   .inputs = inputs,
                                                                   .optimizer = golden_optimizer(base),
                                                                   .lr = number(base.doc, "lr"),
                                                                   .seed = 0,
                                                                   .precision = {.compute = DType::bf16}});
  // Our own f32 run beside it, for the figures.
  Training train_f32 = compile(TrainingSpec<examples::CharTransformer>{.model = model,
                                                                       .loss = examples::transformer_loss,
                                                                       .inputs = inputs,
                                                                       .optimizer = golden_optimizer(base),
                                                                       .lr = number(base.doc, "lr"),
                                                                       .seed = 0});
  ParamValues init;
  for (const std::string& name : golden_param_names(base)) init.emplace(name, base.tensors.at("init." + name).to_f32());
  train.upload_params(init);
  train_f32.upload_params(init);
  ASSERT_EQ(want.size(), static_cast<std::size_t>(base.steps));
  ASSERT_EQ(f32.size(), want.size());
  double drift = 0, worst = 0, from_f32 = 0;
  for (std::size_t t = 0; t < want.size(); ++t) drift = std::max(drift, std::abs(want[t] - f32[t]));
  const double bound = kBf16DriftFactor * drift;
  for (std::size_t t = 0; t < want.size(); ++t) {
    const StepResult r = train.step(golden_batch(base, static_cast<std::int64_t>(t)));
    ASSERT_TRUE(r.ok()) << r.failure().message;
    from_f32 = std::max(from_f32, std::abs(r.loss() - f32[t]));
    worst = std::max(worst, std::abs(r.loss() - want[t]) / bound);
    EXPECT_NEAR(r.loss(), want[t], bound) << "step " << t << " (PyTorch float32: " << f32[t] << ")";
    const StepResult r32 = train_f32.step(golden_batch(base, static_cast<std::int64_t>(t)));
    ASSERT_TRUE(r32.ok()) << r32.failure().message;
    std::printf("[ measured ] step %2zu: tensorgrad bf16 %.6f f32 %.6f | PyTorch autocast bf16 %.6f f32 %.6f\n", t + 1,
                r.loss(), r32.loss(), want[t], f32[t]);
  }
  EXPECT_GT(from_f32, kF32Drift) << "the bf16 run follows PyTorch's f32 run: nothing ran in bf16";
  std::printf(
      "[ measured ] W2 small bf16 vs PyTorch CPU autocast: at most %.2f of the bound %.2g (D %.2g); "
      "vs PyTorch f32 up to %.2g\n",
      worst, bound, drift, from_f32);
}

}  // namespace
}  // namespace tg
