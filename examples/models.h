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

}  // namespace tg::examples
