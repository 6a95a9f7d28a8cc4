#pragma once
// The built-in layers: Linear, LayerNorm, RMSNorm, Embedding, Conv2d, MultiHeadAttention. Each is a Module holding its
// params and a const call operator (the seed's .fwd) that traces its forward; call it inside a
// ParamBinding of the model. Each call takes the user's call site as a defaulted last argument: a
// wrong input throws tg::ShapeError naming the layer (kind and dotted name), the input and weight
// types, the rule and that call site, and the nodes it traces carry that call site too.
//
// Defaults follow the seed: weights init::randn(0.02), biases zeros, norm gains ones. The decay
// option of Linear, Embedding and Conv2d sets the weight's decay flag only (biases keep their zeros
// default: no decay); LayerNorm's and RMSNorm's decay (default false) sets all of their params.
// The losses (cross_entropy, nll_loss) are op-API functions in tensorgrad/ir/ops/api.h.
#include <cstdint>
#include <optional>
#include <string>

#include "tensorgrad/ir/ops/api.h"
#include "tensorgrad/train/init.h"
#include "tensorgrad/train/module.h"

namespace tg {

struct LinearOptions {
  bool bias = true;
  InitSpec init = init::randn();  // of W
  std::optional<bool> decay;      // of W; default: default_decay(init)
};

// y = x W + b over the last axis: W [in, out], b [out]; x [..., in] -> [..., out] (x may be [in]).
class Linear : public Module {
 public:
  Linear(Module& parent, std::string name, std::int64_t in_features, std::int64_t out_features,
         LinearOptions options = {});
  Tensor operator()(const Tensor& x, TG_CALL_SITE) const;

  std::int64_t in_features() const { return W.shape()[0]; }
  std::int64_t out_features() const { return W.shape()[1]; }

  Param W;
  std::optional<Param> b;  // absent with bias = false
};

struct LayerNormOptions {
  double eps = 1e-5;  // PyTorch's default
  bool bias = true;
  bool decay = false;  // of g and b
};

// (x - mean) / sqrt(var + eps) * g + b over the last axis (biased variance, as PyTorch): g [dim]
// (ones), b [dim] (zeros). Traced with the layer_norm composite.
class LayerNorm : public Module {
 public:
  LayerNorm(Module& parent, std::string name, std::int64_t dim, LayerNormOptions options = {});
  Tensor operator()(const Tensor& x, TG_CALL_SITE) const;
  double eps() const { return eps_; }

  Param g;
  std::optional<Param> b;  // absent with bias = false

 private:
  double eps_;
};

struct RMSNormOptions {
  double eps = 1e-6;   // the rms_norm composite's default (Llama's)
  bool decay = false;  // of g
};

// x / sqrt(mean(x^2) + eps) * g over the last axis, g [dim] (ones); Llama-style, no bias.
class RMSNorm : public Module {
 public:
  RMSNorm(Module& parent, std::string name, std::int64_t dim, RMSNormOptions options = {});
  Tensor operator()(const Tensor& x, TG_CALL_SITE) const;
  double eps() const { return eps_; }

  Param g;

 private:
  double eps_;
};

struct EmbeddingOptions {
  InitSpec init = init::randn();
  std::optional<bool> decay;  // default: default_decay(init)
};

// Rows of W [vocab, dim] picked by i32 indices: [...] -> [..., dim]. An out-of-range index fails the
// run (not the trace), as the embedding op does.
class Embedding : public Module {
 public:
  Embedding(Module& parent, std::string name, std::int64_t vocab, std::int64_t dim, EmbeddingOptions options = {});
  Tensor operator()(const Tensor& indices, TG_CALL_SITE) const;

  std::int64_t vocab() const { return W.shape()[0]; }
  std::int64_t dim() const { return W.shape()[1]; }

  Param W;
};

// Named apart from the op's tg::Conv2dOptions, which it passes on (stride, padding, dilation, groups).
struct Conv2dLayerOptions {
  Pair2d stride = 1;
  Conv2dPadding padding = 0;  // or tg::kPaddingSame (stride 1 only)
  Pair2d dilation = 1;
  std::int64_t groups = 1;  // divides in_channels and out_channels; in_channels for depthwise
  bool bias = true;
  InitSpec init = init::randn();  // of W
  std::optional<bool> decay;      // of W; default: default_decay(init)
};

// 2-D convolution, NCHW, as torch.nn.Conv2d: x [N, in, H, W] -> [N, out, H', W'];
// W [out, in / groups, kh, kw], b [out]. A single kernel number makes a square kernel.
class Conv2d : public Module {
 public:
  Conv2d(Module& parent, std::string name, std::int64_t in_channels, std::int64_t out_channels, Pair2d kernel,
         Conv2dLayerOptions options = {});
  Tensor operator()(const Tensor& x, TG_CALL_SITE) const;

  std::int64_t in_channels() const { return W.shape()[1] * conv_.groups; }
  std::int64_t out_channels() const { return W.shape()[0]; }
  std::int64_t kernel() const { return W.shape()[2]; }
  const Conv2dOptions& conv_options() const { return conv_; }

  Param W;
  std::optional<Param> b;  // absent with bias = false

 private:
  Conv2dOptions conv_;
};

struct MultiHeadAttentionOptions {
  bool causal = false;            // query i sees keys j <= i (self-attention only)
  bool bias = true;               // of the four projections
  InitSpec init = init::randn();  // of the projections' W
  std::optional<bool> decay;      // of the projections' W
};

// Multi-head scaled dot-product attention: q, k and v projections [width, width], the heads split
// from the last axis ([..., T, width] -> [..., heads, T, width / heads]), tg::attention (the fused op,
// scale 1/sqrt(width / heads)), the heads merged back and the output projection.
class MultiHeadAttention : public Module {
 public:
  MultiHeadAttention(Module& parent, std::string name, std::int64_t width, std::int64_t heads,
                     MultiHeadAttentionOptions options = {});
  // Self-attention: x [..., T, width] -> [..., T, width].
  Tensor operator()(const Tensor& x, TG_CALL_SITE) const;
  // Attention of x [..., Tq, width] over context [..., Tk, width] (not causal unless Tq == Tk).
  Tensor operator()(const Tensor& x, const Tensor& context, TG_CALL_SITE) const;

  std::int64_t width() const { return proj.out_features(); }
  std::int64_t heads() const { return heads_; }
  bool causal() const { return causal_; }

  Linear q, k, v, proj;

 private:
  std::int64_t heads_;
  bool causal_;
};

}  // namespace tg
