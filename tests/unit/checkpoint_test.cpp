// Gradient checkpointing: tg::checkpoint marks a segment's nodes, the text format keeps the marks,
// and autodiff recomputes marked segments in the backward. The gradients must be bit-identical to
// the unmarked graph's on the interpreter (f32 and f64) on random chains with random segments, the
// backward must read no forward intermediate of a segment, and the Vulkan plan of a deep chain must
// hold fewer bytes at its peak.
#include "tensorgrad/ir/checkpoint.h"

#include <gtest/gtest.h>

#include <iostream>
#include <random>
#include <set>

#include "../../examples/models.h"
#include "support/checkpoint_chain.h"
#include "support/library.h"
#include "tensorgrad/vk/executor.h"

namespace tg {
namespace {

using testing::Chain;
using testing::chain_inputs;
using testing::random_chain;

vk::DeviceInfo plan_only_device() {
  vk::DeviceInfo info;
  info.name = "plan only";
  info.max_storage_buffer_range = 1u << 30;
  info.max_memory_allocation_size = 1u << 30;
  info.min_storage_buffer_offset_alignment = 16;
  info.max_per_stage_storage_buffers = 64;
  info.device_heap_bytes = std::uint64_t{1} << 34;
  return info;
}

TEST(Checkpoint, MarksTheSegmentsNodesAndOnlyThem) {
  GraphBuilder b("marks");
  TracingScope scope(b);
  Tensor x = b.param("x", {DType::f32, {3}});
  Tensor before = exp(x);
  const auto out = checkpoint(
      [](const std::vector<Tensor>& in) {
        return std::vector<Tensor>{tanh(in[0]) * in[1], in[0]};
      },
      {before, x});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[1].id(), before.id()) << "a returned input comes back as it was";
  Tensor second = checkpoint([](const Tensor& t) { return sin(t); }, out[0]);
  b.output("loss", sum(second + cos(out[0])));
  const Graph g = b.take();
  std::vector<std::int32_t> marks;  // exp, tanh, mul, sin, cos, add, sum
  for (const Node& node : g.nodes()) marks.push_back(node.checkpoint);
  constexpr std::int32_t none = kNoCheckpoint;
  EXPECT_EQ(marks, (std::vector<std::int32_t>{none, 0, 0, 1, none, none, none}));
  EXPECT_EQ(checkpoint_segment_count(g), 2u);
}

TEST(Checkpoint, MarksSurvivePrintAndParseOfTheForwardAndTheGradientGraph) {
  for (std::uint32_t seed = 1; seed <= 5; ++seed) {
    const Chain chain = random_chain(seed, 6, true);
    for (const Graph& g : {chain.forward, differentiate(chain.forward)}) {
      const std::string text = print_graph(g);
      const Graph back = parse_graph(text);
      EXPECT_EQ(back, g) << text;
      EXPECT_EQ(print_graph(back), text);
    }
  }
  const Graph parsed = parse_graph(
      "graph g(param %x: f32[2]) {\n  %0 = exp(%x) : f32[2] checkpoint 7 @\"a.cpp\":1:2\n"
      "  %1 = sum(%0) {axes=[0], keep_dims=false} : f32[]\n  return loss=%1\n}\n");
  EXPECT_EQ(parsed.nodes()[0].checkpoint, 7);
  EXPECT_EQ(parsed.nodes()[0].loc.line, 1u);
  EXPECT_EQ(parsed.nodes()[1].checkpoint, kNoCheckpoint);
  // DOT export names the segment under the node's type; unmarked nodes say nothing.
  const std::string dot = to_dot(parsed);
  EXPECT_NE(dot.find("f32[2]\\ncheckpoint 7\""), std::string::npos) << dot;
  EXPECT_EQ(dot.find("checkpoint", dot.find("n1 [")), std::string::npos) << dot;
}

TEST(Checkpoint, TheParserRefusesABadSegmentNumber) {
  for (const char* bad : {"-1", "x", "2147483648", ""}) {
    const std::string text =
        std::string("graph g(%x: f32[2]) {\n  %0 = exp(%x) : f32[2] checkpoint ") + bad + "\n  return y=%0\n}\n";
    try {
      parse_graph(text);
      ADD_FAILURE() << "accepted: " << text;
    } catch (const ParseError& e) {
      // A missing number is found missing at the next token, on the next line.
      EXPECT_EQ(e.line(), std::string(bad).empty() ? 3u : 2u) << e.what();
      EXPECT_NE(std::string(e.what()).find("checkpoint segment"), std::string::npos) << e.what();
    }
  }
}

TEST(Checkpoint, RefusesAnEmptySegmentANestedOneAndForeignTensors) {
  GraphBuilder b("errors");
  TracingScope scope(b);
  Tensor x = b.param("x", {DType::f32, {3}});
  const auto message = [](const auto& call) -> std::string {
    try {
      call();
    } catch (const CheckpointError& e) {
      return e.what();
    }
    return "";
  };
  const std::string empty =
      message([&] { checkpoint([](const std::vector<Tensor>&) { return std::vector<Tensor>{}; }, {x}); });
  EXPECT_NE(empty.find("returned no tensor"), std::string::npos) << empty;
  EXPECT_NE(empty.find("checkpoint_test.cpp"), std::string::npos) << empty;
  const std::string nested = message([&] {
    checkpoint([](const Tensor& t) { return checkpoint([](const Tensor& u) { return exp(u); }, tanh(t)); }, x);
  });
  EXPECT_NE(nested.find("nested"), std::string::npos) << nested;
  GraphBuilder other("other");
  Tensor y = other.param("y", {DType::f32, {3}});
  const std::string foreign_in = message([&] { checkpoint([](const std::vector<Tensor>& in) { return in; }, {x, y}); });
  EXPECT_NE(foreign_in.find("input 1 belongs to another graph"), std::string::npos) << foreign_in;
  const std::string foreign_out = message([&] { checkpoint([&](const Tensor&) { return y; }, x); });
  EXPECT_NE(foreign_out.find("output 0 of the segment is a tensor of another graph"), std::string::npos) << foreign_out;
  // After the refusals the builder traces on: the nesting guard was released.
  EXPECT_NO_THROW(checkpoint([](const Tensor& t) { return exp(t); }, x));
}

// The property: on random chains with random segments checkpointed, every output of the gradient
// graph (loss and grads) has the same bits as the unmarked graph's, in f32 and in f64.
TEST(Checkpoint, GradientsAreBitIdenticalToTheUnmarkedGraphOnTheInterpreter) {
  int graphs_with_segments = 0;
  for (std::uint32_t seed = 1; seed <= 40; ++seed) {
    const Chain marked = random_chain(seed, 2 + static_cast<int>(seed % 6), true);
    const Chain plain = random_chain(seed, 2 + static_cast<int>(seed % 6), false);
    graphs_with_segments += !marked.segments.empty();
    const Graph with = differentiate(marked.forward);
    const Graph without = differentiate(plain.forward);
    if (!marked.segments.empty()) {
      EXPECT_GT(with.nodes().size(), without.nodes().size()) << "seed " << seed << ": nothing was recomputed";
    }
    const TensorMap inputs = chain_inputs(with, seed);
    for (ComputeType compute : {ComputeType::f32, ComputeType::f64}) {
      const TensorMap a = interpret(with, inputs, {.compute = compute}).outputs;
      const TensorMap b = interpret(without, inputs, {.compute = compute}).outputs;
      ASSERT_EQ(a.size(), b.size());
      for (const auto& [name, value] : b) {
        EXPECT_TRUE(a.at(name) == value) << "seed " << seed << ", " << name << ", compute "
                                         << (compute == ComputeType::f32 ? "f32" : "f64");
      }
    }
  }
  EXPECT_GE(graphs_with_segments, 30) << "the generator should mark segments in most chains";
}

// What checkpointing is for: no backward node reads a forward value computed inside a segment,
// except the segment's results that nodes outside it read anyway (they live on regardless).
TEST(Checkpoint, TheBackwardReadsNoForwardIntermediateOfASegment) {
  for (std::uint32_t seed = 1; seed <= 10; ++seed) {
    const Chain chain = random_chain(seed, 6, true);
    const Graph& f = chain.forward;
    const Graph g = differentiate(f);
    std::vector<bool> kept(f.values().size(), false);  // read outside its segment in the forward, or an output
    for (const GraphOutput& o : f.outputs()) kept[static_cast<std::size_t>(o.value)] = true;
    for (const Node& node : f.nodes()) {
      for (ValueId in : node.inputs) {
        const NodeId producer = f.value(in).producer;
        if (producer != kNoNode && f.node(producer).checkpoint != node.checkpoint)
          kept[static_cast<std::size_t>(in)] = true;
      }
    }
    std::size_t intermediates = 0;
    for (const Node& node : f.nodes()) {
      if (node.checkpoint == kNoCheckpoint || kept[static_cast<std::size_t>(node.output)]) continue;
      ++intermediates;
      for (std::size_t n = f.nodes().size(); n < g.nodes().size(); ++n) {
        for (ValueId in : g.nodes()[n].inputs) {
          EXPECT_NE(in, node.output) << "seed " << seed << ": backward node %" << n << " reads intermediate %"
                                     << f.value(node.output).producer;
        }
      }
    }
    if (!chain.segments.empty()) {
      EXPECT_GT(intermediates, 0u) << "seed " << seed;
    }
  }
}

// A deep chain of matmul/elementwise blocks, every block checkpointed or none: the Vulkan plan's
// bytes alive at the peak step drop (planned without a device).
TEST(Checkpoint, APlanOfADeepChainHoldsFewerBytesAtItsPeak) {
  const auto chain = [](bool mark) {
    GraphBuilder b("deep");
    TracingScope scope(b);
    Tensor h = b.input("x", {DType::f32, {64, 128}});
    for (int i = 0; i < 8; ++i) {
      Tensor w = b.param("w" + std::to_string(i), {DType::f32, {128, 128}});
      const auto block = [&](const Tensor& x) { return tanh(sigmoid(exp(tanh(matmul(x, w))) * x) + x); };
      h = mark ? checkpoint(block, h) : block(h);
    }
    b.output("loss", mean(h * h));
    return differentiate(b.take());
  };
  const vk::ProgramStats plain = vk::plan_memory(chain(false), plan_only_device());
  const vk::ProgramStats marked = vk::plan_memory(chain(true), plan_only_device());
  const std::uint64_t activation = 64 * 128 * 4;
  // Unmarked, each block keeps about four activations for its backward; checkpointed, one.
  EXPECT_LT(marked.peak_live_bytes + 8 * 2 * activation, plain.peak_live_bytes)
      << "checkpointed " << marked.peak_live_bytes << " bytes, plain " << plain.peak_live_bytes;
}

// A user-defined block with a call operator, as tg::checkpointed takes it.
struct MlpBlock : Module {
  MlpBlock(Module& parent, std::string name) : Module(parent, std::move(name)) {}
  Linear l1{*this, "l1", 4, 8};
  Linear l2{*this, "l2", 8, 4};
  Tensor operator()(const Tensor& x) const { return l2(tanh(l1(x))) + x; }
};

struct TwoBlocks : Module {
  MlpBlock a{*this, "a"};
  MlpBlock b{*this, "b"};
};

// tg::checkpointed(layer) marks one module call: one segment per call, the backward recomputes
// what the block's gradient reads (l1's output for tanh's gradient, tanh's for l2's), and training
// follows the unmarked model's bits. (A lone Linear call would recompute nothing: its gradient
// reads only its input and weight, which are the segment's inputs.)
TEST(Checkpoint, CheckpointedMarksOneModuleCall) {
  const auto compile_mlp = [](bool mark) {
    TwoBlocks model;
    const auto loss = [mark](const TwoBlocks& m, const Inputs& in) {
      const Tensor h = mark ? checkpointed(m.a)(in.at("x")) : m.a(in.at("x"));
      const Tensor y = mark ? checkpointed(m.b)(h) : m.b(h);
      return mean((y - in.at("y")) * (y - in.at("y")));
    };
    return compile(TrainingSpec<TwoBlocks>{.model = model,
                                           .loss = loss,
                                           .inputs = {{"x", {{16, 4}}}, {"y", {{16, 4}}}},
                                           .optimizer = {.kind = AdamConfig{}},
                                           .lr = 1e-2,
                                           .backend = Backend::interp_f64,
                                           .seed = 5});
  };
  Training plain = compile_mlp(false);
  Training marked = compile_mlp(true);
  EXPECT_EQ(checkpoint_segment_count(marked.graph()), 2u);
  EXPECT_GT(marked.graph().nodes().size(), plain.graph().nodes().size()) << "the backward recomputes";
  std::mt19937 rng(2);
  std::normal_distribution<float> normal;
  for (int step = 0; step < 3; ++step) {
    std::vector<float> x(64), y(64);
    for (float& v : x) v = normal(rng);
    for (float& v : y) v = normal(rng);
    const TensorMap batch{{"x", HostTensor::f32({16, 4}, x)}, {"y", HostTensor::f32({16, 4}, y)}};
    const StepResult a = plain.step(batch);
    const StepResult b = marked.step(batch);
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(a.loss(), b.loss()) << "step " << step;
  }
  EXPECT_EQ(plain.download_params(), marked.download_params());
}

// The char transformer with every block checkpointed (TransformerConfig::checkpoint_blocks) trains
// to the same bits as without, step after step, and its training step plans fewer peak bytes.
TEST(Checkpoint, TheCheckpointedCharTransformerTrainsToTheSameBits) {
  const auto compile_w2 = [](bool mark) {
    // Activations (the [B, H, T, T] attention scores above all) outweigh the params and Adam's
    // state here, as in W2, so what checkpointing saves shows in the peak.
    examples::TransformerConfig config{.vocab = 13, .context = 32, .width = 16, .layers = 3, .heads = 2};
    config.checkpoint_blocks = mark;
    examples::CharTransformer model(config);
    return compile(TrainingSpec<examples::CharTransformer>{
        .model = model,
        .loss = examples::transformer_loss,
        .inputs = {{"tokens", {{4, 32}, DType::i32}}, {"targets", {{4, 32}, DType::i32}}},
        .optimizer = {.kind = AdamConfig{}},
        .lr = 1e-2,
        .backend = Backend::interp_f32,
        .seed = 3});
  };
  Training plain = compile_w2(false);
  Training marked = compile_w2(true);
  EXPECT_EQ(checkpoint_segment_count(marked.graph()), 3u);
  EXPECT_EQ(checkpoint_segment_count(plain.graph()), 0u);
  std::mt19937 rng(11);
  std::uniform_int_distribution<std::int32_t> token(0, 12);
  for (int step = 0; step < 3; ++step) {
    std::vector<std::int32_t> tokens(4 * 32), targets(4 * 32);
    for (auto& t : tokens) t = token(rng);
    for (auto& t : targets) t = token(rng);
    const TensorMap batch{{"tokens", HostTensor::i32({4, 32}, tokens)}, {"targets", HostTensor::i32({4, 32}, targets)}};
    const StepResult a = plain.step(batch);
    const StepResult b = marked.step(batch);
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(a.loss(), b.loss()) << "step " << step;
  }
  EXPECT_EQ(plain.download_params(), marked.download_params());
  const vk::ProgramStats p = vk::plan_memory(plain.graph(), plan_only_device());
  const vk::ProgramStats m = vk::plan_memory(marked.graph(), plan_only_device());
  EXPECT_LT(m.peak_live_bytes, p.peak_live_bytes);
  std::cout << "char transformer step, peak plan bytes: " << p.peak_live_bytes << " plain, " << m.peak_live_bytes
            << " with every block checkpointed\n";
}

}  // namespace
}  // namespace tg
