#pragma once
// The training workloads of design.md as tensorgrad models, shared by the examples, the parity
// goldens (tests/golden/train) and the benchmarks (bench/), so all three train the same thing.
//   W1: MLP fitting y = sin(x): Linear(1,64)-relu-Linear(64,64)-relu-Linear(64,1), MSE.
//   W2: char transformer: token embedding + learned positions, pre-LayerNorm blocks (causal
//       tg::MultiHeadAttention on the fused attention op, GELU (tanh) MLP of 4x width), final LayerNorm, linear head,
//       cross-entropy. design.md's size: vocab 65, T 128, d 128, 4 layers, 4 heads.
//   W6: the same model at GPT-2-small size (kW6Config): byte-level vocab 256, T 1024, d 768,
//       12 layers, 12 heads (head width 64), MLP 4x: ~86M params (GPT-2 small's 124M less its
//       50257-token embedding; the head is not tied to the embedding). Benchmarks only
//       (bench/train_bench.cpp, bench/w6_capacity.cpp); the batch is theirs to choose.
//   W7: a small ResNet-style CNN on 32x32x3 images (no batch norm): stem conv3x3 3->32 + relu, two
//       residual blocks at 32 channels (conv3x3-relu-conv3x3, identity add, relu), max-pool 2,
//       conv3x3 32->64 + relu, one residual block at 64, max-pool 2, global mean over H and W,
//       linear 64->10, softmax cross-entropy; every conv pad 1. Benchmarks: batch 128, Adam.
//   W7_small: the convolution issue's small CNN on 8x8x1 images: conv3x3 1->16 + relu, conv3x3
//       16->32 + relu (pad 1), max-pool 2, flatten, linear 512->64 + relu, linear 64->10,
//       cross-entropy. Benchmarks: batch 64, Adam.
//   Both take "images" f32 [B, C, H, W] and "labels" i32 [B] (bench/cnn_setup.h compiles them).
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>

// Not tensorgrad/tensorgrad.h: the tests include this file, and the umbrella also pulls in every
// header generated from ops.def, which would recompile them whenever an op is added.
#include "tensorgrad/ir/checkpoint.h"
#include "tensorgrad/ir/ops/api.h"
#include "tensorgrad/train/module.h"
#include "tensorgrad/train/nn.h"
#include "tensorgrad/train/training.h"

namespace tg::examples {

// ---- W1 ----

struct Mlp : Module {
  Linear l1{*this, "l1", 1, 64};
  Linear l2{*this, "l2", 64, 64};
  Linear l3{*this, "l3", 64, 1};
};

inline Tensor mlp_predict(const Mlp& m, const Inputs& in) { return m.l3(relu(m.l2(relu(m.l1(in.at("x")))))); }

inline Tensor mlp_loss(const Mlp& m, const Inputs& in) {
  const Tensor r = mlp_predict(m, in) - in.at("y");
  return mean(r * r);
}

// ---- W2 ----

struct TransformerConfig {
  std::int64_t vocab = 65;
  std::int64_t context = 128;  // T
  std::int64_t width = 128;    // d
  std::int64_t layers = 4;
  std::int64_t heads = 4;
  // Gradient checkpointing of every block (tg::checkpoint): the backward recomputes each block's
  // forward from its input instead of keeping its activations alive. Same gradients, less memory,
  // one more forward per step.
  bool checkpoint_blocks = false;
};

// W6 (see the top of this file): CharTransformer(kW6Config).
inline constexpr TransformerConfig kW6Config{.vocab = 256, .context = 1024, .width = 768, .layers = 12, .heads = 12};

struct Block : Module {
  Block(Module& parent, std::string name, std::int64_t width, std::int64_t heads)
      : Module(parent, std::move(name)),
        ln1(*this, "ln1", width),
        attn(*this, "attn", width, heads, {.causal = true}),
        ln2(*this, "ln2", width),
        fc(*this, "fc", width, 4 * width),
        out(*this, "out", 4 * width, width) {}
  LayerNorm ln1;
  MultiHeadAttention attn;  // causal; the fused attention op
  LayerNorm ln2;
  Linear fc, out;
};

struct CharTransformer : Module {
  explicit CharTransformer(const TransformerConfig& c = {})
      : config(c),
        tokens(*this, "tokens", c.vocab, c.width),
        positions(*this, "positions", {c.context, c.width}),
        blocks(*this, "blocks", c.layers, c.width, c.heads),
        ln(*this, "ln", c.width),
        head(*this, "head", c.width, c.vocab) {}
  TransformerConfig config;
  Embedding tokens;
  Param positions;
  ModuleList<Block> blocks;
  LayerNorm ln;
  Linear head;
};

// Logits [B, T, vocab] for tokens [B, T] (i32).
inline Tensor transformer_logits(const CharTransformer& m, const Inputs& in) {
  Tensor h = m.tokens(in.at("tokens")) + m.positions;
  for (const Block& b : m.blocks) {
    const auto block = [&](const Tensor& x) {
      const Tensor y = x + b.attn(b.ln1(x));
      return y + b.out(gelu(b.fc(b.ln2(y))));
    };
    h = m.config.checkpoint_blocks ? checkpoint(block, h) : block(h);
  }
  return m.head(m.ln(h));
}

inline Tensor transformer_loss(const CharTransformer& m, const Inputs& in) {
  return cross_entropy(transformer_logits(m, in), in.at("targets"));
}

// ---- W7 and W7_small ----

// W7's size; the unit test shrinks it.
struct CnnConfig {
  std::int64_t image = 32;  // H = W
  std::int64_t in_channels = 3;
  std::int64_t width = 32;  // channels of the first stage; the second has twice as many
  std::int64_t classes = 10;
};

// conv3x3-relu-conv3x3 with an identity add, then relu (no batch norm).
struct ResidualBlock : Module {
  ResidualBlock(Module& parent, std::string name, std::int64_t channels)
      : Module(parent, std::move(name)),
        c1(*this, "c1", channels, channels, 3, {.padding = 1, .init = init::kaiming()}),
        c2(*this, "c2", channels, channels, 3, {.padding = 1, .init = init::kaiming()}) {}
  Conv2d c1, c2;
  Tensor operator()(const Tensor& x) const { return relu(x + c2(relu(c1(x)))); }
};

struct ResNetCnn : Module {
  explicit ResNetCnn(const CnnConfig& c = {})
      : config(c),
        stem(*this, "stem", c.in_channels, c.width, 3, {.padding = 1, .init = init::kaiming()}),
        stage1(*this, "stage1", 2, c.width),
        widen(*this, "widen", c.width, 2 * c.width, 3, {.padding = 1, .init = init::kaiming()}),
        stage2(*this, "stage2", 2 * c.width),
        head(*this, "head", 2 * c.width, c.classes, {.init = init::kaiming({.gain = 1.0})}) {}
  CnnConfig config;
  Conv2d stem;
  ModuleList<ResidualBlock> stage1;
  Conv2d widen;
  ResidualBlock stage2;
  Linear head;
};

// Logits [B, classes] for images [B, C, H, W].
inline Tensor resnet_logits(const ResNetCnn& m, const Inputs& in) {
  Tensor h = relu(m.stem(in.at("images")));
  for (const ResidualBlock& b : m.stage1) h = b(h);
  h = relu(m.widen(max_pool2d(h, 2)));
  h = max_pool2d(m.stage2(h), 2);
  return m.head(mean(h, {2, 3}));
}

inline Tensor resnet_loss(const ResNetCnn& m, const Inputs& in) {
  return cross_entropy(resnet_logits(m, in), in.at("labels"));
}

struct SmallCnn : Module {
  Conv2d c1{*this, "c1", 1, 16, 3, {.padding = 1, .init = init::kaiming()}};
  Conv2d c2{*this, "c2", 16, 32, 3, {.padding = 1, .init = init::kaiming()}};
  Linear fc1{*this, "fc1", 32 * 4 * 4, 64, {.init = init::kaiming()}};
  Linear fc2{*this, "fc2", 64, 10, {.init = init::kaiming({.gain = 1.0})}};
};

// Logits [B, 10] for images [B, 1, 8, 8].
inline Tensor small_cnn_logits(const SmallCnn& m, const Inputs& in) {
  const Tensor h = max_pool2d(relu(m.c2(relu(m.c1(in.at("images"))))), 2);
  return m.fc2(relu(m.fc1(flatten(h, 1))));
}

inline Tensor small_cnn_loss(const SmallCnn& m, const Inputs& in) {
  return cross_entropy(small_cnn_logits(m, in), in.at("labels"));
}

}  // namespace tg::examples
