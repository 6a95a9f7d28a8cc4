// The built-in layers: params with the seed's defaults, and forwards traced
// from registry ops and composites at the caller's call site, after a
// layer-level check that names the layer.
#include "tensorgrad/train/nn.h"

#include <vector>

#include "tensorgrad/ir/error.h"
#include "tensorgrad/ir/ops/attention.h"

namespace tg {

namespace {

std::string layer_label(std::string_view kind, const Module &layer) {
  return std::string(kind) + " '" + layer.path() + "'";
}

void require_positive(std::string_view kind, const Module &layer, std::string_view what, std::int64_t value) {
  if (value < 1) {
    throw Error(layer_label(kind, layer) + ": " + std::string(what) + " must be >= 1, got " + std::to_string(value));
  }
}

// A refused input, reported like a shape rule's refusal: the layer, the input
// and param types, the rule and the user's call site.
[[noreturn]] void refuse(std::string_view kind, const Module &layer, std::vector<TensorType> types, std::string rule,
                         const CallSite &loc) {
  throw ShapeError(layer_label(kind, layer), std::move(types), std::move(rule), SourceLoc::from(loc));
}

std::vector<TensorType> types_of(const Tensor &x, std::initializer_list<const Param *> params) {
  std::vector<TensorType> types{x.type()};
  for (const Param *p : params) {
    if (p != nullptr) types.push_back({DType::f32, p->shape()});
  }
  return types;
}

const Param *maybe(const std::optional<Param> &p) { return p ? &*p : nullptr; }

std::optional<Tensor> maybe_tensor(const std::optional<Param> &p) {
  if (!p) return std::nullopt;
  return p->tensor();
}

ParamOptions weight_options(const InitSpec &init, std::optional<bool> decay) { return {.init = init, .decay = decay}; }

// Checks the input of a normalization over the last axis of length `dim`.
void check_normalized_input(std::string_view kind, const Module &layer, const Tensor &x, std::int64_t dim,
                            std::initializer_list<const Param *> params, const CallSite &loc) {
  if (x.dtype() != DType::f32) refuse(kind, layer, types_of(x, params), "the input must be f32", loc);
  if (x.rank() == 0 || x.dim(-1) != dim) {
    refuse(kind, layer, types_of(x, params),
           "the input's last axis must have length " + std::to_string(dim) + " (the normalized dim)", loc);
  }
}

}  // namespace

// ---- Linear ----

Linear::Linear(Module &parent, std::string name, std::int64_t in_features, std::int64_t out_features,
               LinearOptions options)
    : Module(parent, std::move(name)),
      W(*this, "W", {in_features, out_features}, weight_options(options.init, options.decay)) {
  require_positive("Linear", *this, "in_features", in_features);
  require_positive("Linear", *this, "out_features", out_features);
  if (options.bias) b.emplace(*this, "b", Shape{out_features}, ParamOptions{.init = init::zeros()});
}

Tensor Linear::operator()(const Tensor &x, CallSite loc) const {
  const std::int64_t in = in_features();
  if (x.dtype() != DType::f32) refuse("Linear", *this, types_of(x, {&W, maybe(b)}), "the input must be f32", loc);
  if (x.rank() == 0 || x.dim(-1) != in) {
    refuse("Linear", *this, types_of(x, {&W, maybe(b)}),
           "the input's last axis must have length " + std::to_string(in) + " (in_features)", loc);
  }
  // A single vector [in] goes through matmul as a one-row matrix.
  const bool vector = x.rank() == 1;
  Tensor y = matmul(vector ? reshape(x, {1, in}, loc) : x, W.tensor(), loc);
  if (vector) y = reshape(y, {out_features()}, loc);
  if (b) y = add(y, b->tensor(), loc);
  return y;
}

// ---- LayerNorm ----

LayerNorm::LayerNorm(Module &parent, std::string name, std::int64_t dim, LayerNormOptions options)
    : Module(parent, std::move(name)),
      g(*this, "g", {dim}, {.init = init::ones(), .decay = options.decay}),
      eps_(options.eps) {
  require_positive("LayerNorm", *this, "dim", dim);
  if (options.bias) b.emplace(*this, "b", Shape{dim}, ParamOptions{.init = init::zeros(), .decay = options.decay});
}

Tensor LayerNorm::operator()(const Tensor &x, CallSite loc) const {
  check_normalized_input("LayerNorm", *this, x, g.shape()[0], {&g, maybe(b)}, loc);
  return layer_norm(x, g.tensor(), maybe_tensor(b), eps_, loc);
}

// ---- RMSNorm ----

RMSNorm::RMSNorm(Module &parent, std::string name, std::int64_t dim, RMSNormOptions options)
    : Module(parent, std::move(name)),
      g(*this, "g", {dim}, {.init = init::ones(), .decay = options.decay}),
      eps_(options.eps) {
  require_positive("RMSNorm", *this, "dim", dim);
}

Tensor RMSNorm::operator()(const Tensor &x, CallSite loc) const {
  check_normalized_input("RMSNorm", *this, x, g.shape()[0], {&g}, loc);
  return rms_norm(x, g.tensor(), eps_, loc);
}

// ---- Embedding ----

Embedding::Embedding(Module &parent, std::string name, std::int64_t vocab, std::int64_t dim, EmbeddingOptions options)
    : Module(parent, std::move(name)), W(*this, "W", {vocab, dim}, weight_options(options.init, options.decay)) {
  require_positive("Embedding", *this, "vocab", vocab);
  require_positive("Embedding", *this, "dim", dim);
}

Tensor Embedding::operator()(const Tensor &indices, CallSite loc) const {
  if (indices.dtype() != DType::i32) {
    refuse("Embedding", *this, types_of(indices, {&W}), "the indices must be i32", loc);
  }
  return embedding(W.tensor(), indices, loc);
}

// ---- Conv2d ----

namespace {

// The weight's shape [out, in / groups, kh, kw], after checking every argument, so a bad one is
// named before the parameter is made.
Shape conv2d_weight_shape(const Module &layer, std::int64_t in_channels, std::int64_t out_channels, Pair2d kernel,
                          const Conv2dLayerOptions &options) {
  require_positive("Conv2d", layer, "in_channels", in_channels);
  require_positive("Conv2d", layer, "out_channels", out_channels);
  require_positive("Conv2d", layer, "kernel height", kernel.h);
  require_positive("Conv2d", layer, "kernel width", kernel.w);
  require_positive("Conv2d", layer, "stride height", options.stride.h);
  require_positive("Conv2d", layer, "stride width", options.stride.w);
  require_positive("Conv2d", layer, "dilation height", options.dilation.h);
  require_positive("Conv2d", layer, "dilation width", options.dilation.w);
  require_positive("Conv2d", layer, "groups", options.groups);
  const auto fail = [&](const std::string &why) { throw Error(layer_label("Conv2d", layer) + ": " + why); };
  if (options.padding.h < 0 || options.padding.w < 0) {
    fail("padding must be >= 0, got [" + std::to_string(options.padding.h) + ", " + std::to_string(options.padding.w) +
         "]");
  }
  if (options.padding.same && (options.stride.h != 1 || options.stride.w != 1)) {
    fail("padding = same needs stride 1, as in PyTorch");
  }
  if (in_channels % options.groups != 0 || out_channels % options.groups != 0) {
    fail("groups " + std::to_string(options.groups) + " must divide in_channels " + std::to_string(in_channels) +
         " and out_channels " + std::to_string(out_channels));
  }
  return {out_channels, in_channels / options.groups, kernel.h, kernel.w};
}

}  // namespace

Conv2d::Conv2d(Module &parent, std::string name, std::int64_t in_channels, std::int64_t out_channels, Pair2d kernel,
               Conv2dLayerOptions options)
    : Module(parent, std::move(name)),
      W(*this, "W", conv2d_weight_shape(*this, in_channels, out_channels, kernel, options),
        weight_options(options.init, options.decay)),
      conv_{.stride = options.stride,
            .padding = options.padding,
            .dilation = options.dilation,
            .groups = options.groups} {
  if (options.bias) b.emplace(*this, "b", Shape{out_channels}, ParamOptions{.init = init::zeros()});
}

Tensor Conv2d::operator()(const Tensor &x, CallSite loc) const {
  if (x.dtype() != DType::f32 || x.rank() != 4 || x.dim(1) != in_channels()) {
    refuse("Conv2d", *this, types_of(x, {&W, maybe(b)}),
           "the input must be f32 [N, " + std::to_string(in_channels()) + ", H, W] (NCHW, in_channels " +
               std::to_string(in_channels()) + ")",
           loc);
  }
  // Height and width too small for the kernel: conv2d's own ShapeError, at the
  // same call site.
  Tensor y = conv2d(x, W.tensor(), conv_, loc);
  if (b) y = add(y, reshape(b->tensor(), {1, out_channels(), 1, 1}, loc), loc);
  return y;
}

// ---- MultiHeadAttention ----

namespace {

LinearOptions projection_options(const MultiHeadAttentionOptions &options) {
  return {.bias = options.bias, .init = options.init, .decay = options.decay};
}

}  // namespace

MultiHeadAttention::MultiHeadAttention(Module &parent, std::string name, std::int64_t width, std::int64_t heads,
                                       MultiHeadAttentionOptions options)
    : Module(parent, std::move(name)),
      q(*this, "q", width, width, projection_options(options)),
      k(*this, "k", width, width, projection_options(options)),
      v(*this, "v", width, width, projection_options(options)),
      proj(*this, "proj", width, width, projection_options(options)),
      heads_(heads),
      causal_(options.causal) {
  require_positive("MultiHeadAttention", *this, "width", width);
  require_positive("MultiHeadAttention", *this, "heads", heads);
  if (width % heads != 0) {
    throw Error(layer_label("MultiHeadAttention", *this) + ": width " + std::to_string(width) +
                " must be a multiple of heads " + std::to_string(heads));
  }
}

Tensor MultiHeadAttention::operator()(const Tensor &x, CallSite loc) const { return (*this)(x, x, loc); }

Tensor MultiHeadAttention::operator()(const Tensor &x, const Tensor &context, CallSite loc) const {
  const std::int64_t w = width();
  for (const Tensor *input : {&x, &context}) {
    if (input->rank() < 2 || input->dim(-1) != w) {
      refuse("MultiHeadAttention", *this, types_of(*input, {&q.W, &k.W, &v.W, &proj.W}),
             "the input must be [..., T, " + std::to_string(w) + "] (width " + std::to_string(w) + ")", loc);
    }
  }
  if (causal_ && x.dim(-2) != context.dim(-2)) {
    refuse("MultiHeadAttention", *this, {x.type(), context.type()},
           "causal attention needs as many queries as keys, got " + std::to_string(x.dim(-2)) + " and " +
               std::to_string(context.dim(-2)),
           loc);
  }
  const Tensor heads_q = split_heads(q(x, loc), heads_, loc);
  const Tensor heads_k = split_heads(k(context, loc), heads_, loc);
  const Tensor heads_v = split_heads(v(context, loc), heads_, loc);
  return proj(merge_heads(attention(heads_q, heads_k, heads_v, {.causal = causal_}, loc), loc), loc);
}

}  // namespace tg
