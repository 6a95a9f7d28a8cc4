#pragma once
// The one-op cases of the per-op benchmarks, shared by interp_ops_bench.cpp and vk_ops_bench.cpp so
// that "interp_f32/<op>/<shape>" and "vk/<op>/<shape>" name the same graph on the same inputs and
// bench/compare.py can pair them.
//
// Each op runs on one sample from its own generator, offered a given first input of a realistic
// size (the op refuses what it cannot take), with values drawn from the sample's domains. Two sizes:
// large (the default: ~4M-element operands, so that a GPU's figures mean something) and small
// (--tg_small or TG_BENCH_SMALL=1: 64K-element operands, for smoke runs on lavapipe). The generators
// keep every operand but the first small, which leaves the compute-bound ops (matmul, conv2d and its
// gradients) with nothing to compute and some data movers with trivial attributes, so those get a
// hand-made problem of the same size class (hand_made_sample).
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "tensorgrad/interp/host_tensor.h"
#include "tensorgrad/ir/ops/ids/image.h"
#include "tensorgrad/ir/ops/ids/indexing.h"
#include "tensorgrad/ir/ops/ids/layout.h"
#include "tensorgrad/ir/ops/ids/matmul.h"
#include "tensorgrad/ir/ops/ids/random.h"
#include "tensorgrad/ir/ops/ids/structure.h"
#include "tensorgrad/ir/ops/op_def.h"
#include "tensorgrad/ir/tensor.h"

namespace tg::bench {

enum class CaseSize { large, small };

// Removes --tg_small from argv (call after benchmark::Initialize, before
// ReportUnrecognizedArguments); small when it was there or the environment has TG_BENCH_SMALL=1.
inline CaseSize take_size_flag(int& argc, char** argv) {
  bool small = false;
  int kept = 1;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--tg_small") == 0) {
      small = true;
    } else {
      argv[kept++] = argv[i];
    }
  }
  argc = kept;
  const char* env = std::getenv("TG_BENCH_SMALL");
  if (env && std::strcmp(env, "1") == 0) small = true;
  return small ? CaseSize::small : CaseSize::large;
}

inline constexpr std::uint64_t kCaseSeed = 0xbe7c4000ULL;
inline constexpr int kPlainDraws = 50;     // samples drawn without a given first input
inline constexpr int kDrawsPerFirst = 16;  // samples drawn per candidate first input (they are random too)

// Inputs + output, at most: keeps memory sane (the f64 interpreter holds every value as doubles).
inline std::int64_t max_case_elements(CaseSize size) {
  return size == CaseSize::small ? std::int64_t{1} << 23 : std::int64_t{1} << 25;
}

// First inputs to offer each op's generator, biggest first. Ops refuse the ones they cannot take
// (rank, dtype, or their own size caps) and fall back to smaller ones or plain samples; the large
// list ends with the small one for the ops whose output grows too much from a large input.
inline const std::vector<TensorType>& first_candidates(CaseSize size) {
  static const std::vector<TensorType> small = {
      {DType::f32, {256, 256}},     {DType::f32, {64, 64, 64}}, {DType::f32, {8, 16, 32, 32}},
      {DType::f32, {65536}},        {DType::i32, {256, 256}},   {DType::i32, {65536}},
      {DType::boolean, {256, 256}}, {DType::f32, {16, 16}},     {DType::i32, {}},
  };
  static const std::vector<TensorType> large = [] {
    std::vector<TensorType> l = {
        {DType::f32, {2048, 2048}},     {DType::f32, {64, 256, 256}}, {DType::f32, {16, 64, 64, 64}},
        {DType::f32, {1 << 22}},        {DType::i32, {2048, 2048}},   {DType::i32, {1 << 22}},
        {DType::boolean, {2048, 2048}},
    };
    l.insert(l.end(), small.begin(), small.end());
    return l;
  }();
  return size == CaseSize::small ? small : large;
}

struct OpCase {
  OpId op{};
  OpSample sample;
  TensorType output;
  std::int64_t input_elements = 0;
  std::int64_t elements = 0;  // inputs + output
  bool identity = false;      // the output has an input's type: maybe a no-op (pad by 0, sum over no axes)

  // Better: more input elements, then a sample that changes the type (so a reduction reduces and a
  // pad pads), then more elements in all.
  bool better_than(const OpCase& other) const {
    if (input_elements != other.input_elements) return input_elements > other.input_elements;
    if (identity != other.identity) return !identity;
    return elements > other.elements;
  }
};

// The sample with its output type, or nullopt when the shape rule refuses it or it is too big.
inline std::optional<OpCase> typed_case(OpId op, OpSample sample, CaseSize size) {
  try {
    TensorType out = infer_type(op, sample.attrs, sample.inputs);
    std::int64_t input_elements = 0;
    bool identity = false;
    for (const auto& t : sample.inputs) {
      input_elements += t.size();
      identity = identity || t == out;
    }
    const std::int64_t elements = input_elements + out.size();
    if (elements > max_case_elements(size)) return std::nullopt;
    return OpCase{op, std::move(sample), std::move(out), input_elements, elements, identity};
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

// Ops whose size lives in an attribute (creation ops, randn) have only 0-d inputs: offer them a
// bigger "shape" / "n" and keep it when the shape rule accepts it.
inline std::optional<OpSample> scaled_attrs(const OpSample& sample, CaseSize size) {
  for (const auto& t : sample.inputs)
    if (t.rank() != 0) return std::nullopt;
  const bool small = size == CaseSize::small;
  OpSample scaled = sample;
  bool changed = false;
  if (const auto* shape = scaled.attrs.find("shape");
      shape && std::holds_alternative<std::vector<std::int64_t>>(*shape)) {
    scaled.attrs.set("shape", small ? std::vector<std::int64_t>{256, 256} : std::vector<std::int64_t>{2048, 2048});
    changed = true;
  }
  if (const auto* n = scaled.attrs.find("n"); n && std::holds_alternative<std::int64_t>(*n)) {
    scaled.attrs.set("n", small ? std::int64_t{65536} : std::int64_t{1} << 22);
    changed = true;
  }
  return changed ? std::optional<OpSample>(std::move(scaled)) : std::nullopt;
}

// Ops sized by hand, where the generators keep every operand but the first tiny (or draw trivial
// attributes) and the figure would say little: matmul [n,n] x [n,n]; conv2d 3x3, stride 1,
// padding 1, on [N,C,S,S] with C in and out channels, and its two gradients on the same
// convolution; 2x2 pooling with stride 2; an embedding lookup of many rows; dropout, a transpose,
// a two-input concat, a pad and a broadcast on the size of an elementwise operand.
inline std::optional<OpSample> hand_made_sample(OpId op, CaseSize size) {
  const bool small = size == CaseSize::small;
  const auto f32 = [](Shape s) { return TensorType{DType::f32, std::move(s)}; };
  const auto real = ValueDomain::real_range(-2, 2);
  const auto integer = [](std::int64_t v) { return AttrValue{v}; };
  const std::int64_t n = small ? 64 : 1024;
  const std::int64_t batch = small ? 2 : 8, channels = small ? 8 : 64, side = small ? 16 : 64;
  const Shape image{batch, channels, side, side};
  const Shape weight{channels, channels, 3, 3};
  const std::int64_t square = small ? 256 : 2048;  // the side of an elementwise operand
  const AttrValue ones{std::vector<std::int64_t>{1, 1}};
  const Attrs conv{{"dilation", ones}, {"groups", integer(1)}, {"padding", ones}, {"stride", ones}};
  const Attrs pool{{"kernel", integer(2)}, {"padding", integer(0)}, {"stride", integer(2)}};
  const Shape pool_image = small ? Shape{8, 16, 32, 32} : Shape{16, 64, 64, 64};
  switch (op) {
    case op::Matmul:
      return OpSample{{}, {f32({n, n}), f32({n, n})}, {real, real}};
    case op::Conv2d:
      return OpSample{conv, {f32(image), f32(weight)}, {real, real}};
    case op::Conv2dInputGrad: {
      Attrs attrs = conv;
      attrs.set("height", side);
      attrs.set("width", side);
      return OpSample{std::move(attrs), {f32(image), f32(weight)}, {real, real}};
    }
    case op::Conv2dWeightGrad: {
      Attrs attrs = conv;
      attrs.set("kernel_h", integer(3));
      attrs.set("kernel_w", integer(3));
      return OpSample{std::move(attrs), {f32(image), f32(image)}, {real, real}};
    }
    case op::MaxPool2d:  // untied: no window holds two equal values
      return OpSample{pool, {f32(pool_image)}, {ValueDomain::untied()}};
    case op::MaxPool2dGrad: {
      const Shape pooled{pool_image[0], pool_image[1], pool_image[2] / 2, pool_image[3] / 2};
      return OpSample{pool, {f32(pool_image), f32(pooled)}, {ValueDomain::untied(), real}};
    }
    case op::Embedding: {  // a [V, 128] table, [B, T] indices: a row gather into a ~2M-element output
      const std::int64_t rows = small ? 512 : 32768, width = small ? 64 : 128;
      const Shape indices = small ? Shape{16, 64} : Shape{64, 256};
      return OpSample{{},
                      {f32({rows, width}), {DType::i32, indices}},
                      {real, ValueDomain::indices(0, static_cast<double>(rows - 1))}};
    }
    case op::Dropout:  // the seed is a 0-d i32 input, as the front end emits it
      return OpSample{{{"p", AttrValue{0.5}}, {"salt", integer(1)}},
                      {f32({square, square}), {DType::i32, {}}},
                      {real, ValueDomain::indices(-8, 8)}};
    case op::SwapAxes:
      return OpSample{{{"axis0", integer(0)}, {"axis1", integer(1)}}, {f32({square, square})}, {real}};
    case op::Concat:
      return OpSample{{{"axis", integer(1)}}, {f32({square, square / 2}), f32({square, square / 2})}, {real, real}};
    case op::Pad:
      return OpSample{
          {{"axis", integer(1)}, {"before", integer(8)}, {"after", integer(8)}}, {f32({square, square})}, {real}};
    case op::BroadcastTo:
      return OpSample{{{"shape", AttrValue{std::vector<std::int64_t>{square, square}}}}, {f32({1, square})}, {real}};
    default:
      return std::nullopt;
  }
}

// The case an op is benchmarked on: the hand-made one where there is one (and the shape rule takes
// it), else the biggest valid sample among candidate first inputs, plain draws and attribute
// scaling. Deterministic: a fixed seed per op.
inline std::optional<OpCase> pick_case(OpId op, CaseSize size) {
  if (auto sample = hand_made_sample(op, size)) {
    if (auto c = typed_case(op, std::move(*sample), size)) return c;
  }
  const OpDef& def = op_def(op);
  if (!def.samples) return std::nullopt;
  SampleRng rng(kCaseSeed + static_cast<std::uint64_t>(op));
  std::optional<OpCase> best;
  const auto consider = [&](std::optional<OpSample> sample) {
    if (!sample) return;
    if (auto c = typed_case(op, *sample, size); c && (!best || c->better_than(*best))) best = std::move(c);
    if (auto scaled = scaled_attrs(*sample, size)) {
      if (auto c = typed_case(op, *scaled, size); c && (!best || c->better_than(*best))) best = std::move(c);
    }
  };
  for (const auto& first : first_candidates(size))
    for (int i = 0; i < kDrawsPerFirst; ++i) consider(def.samples(rng, first));
  for (int i = 0; i < kPlainDraws; ++i) consider(def.samples(rng, std::nullopt));
  return best;
}

inline std::string dims_name(const Shape& shape) {
  if (shape.empty()) return "scalar";
  std::string s;
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? "x" : "") + std::to_string(shape[i]);
  return s;
}

// The <shape> part of a benchmark name: the input shapes, "2048x2048,2048x8"; for an op with only
// scalar inputs (creation ops), the output's: "to2048x2048". No brackets, so filters stay plain.
inline std::string case_name(const OpCase& c) {
  bool sized = false;
  std::string name;
  for (std::size_t i = 0; i < c.sample.inputs.size(); ++i) {
    name += (i ? "," : "") + dims_name(c.sample.inputs[i].shape);
    sized = sized || c.sample.inputs[i].rank() > 0;
  }
  return sized ? name : "to" + dims_name(c.output.shape);
}

// Input and output types and the attributes, for the benchmark's label.
inline std::string case_label(const OpCase& c) {
  std::string label;
  for (std::size_t i = 0; i < c.sample.inputs.size(); ++i) label += (i ? " " : "") + c.sample.inputs[i].to_string();
  label += (label.empty() ? "-> " : " -> ") + c.output.to_string();
  if (!c.sample.attrs.empty()) label += " " + c.sample.attrs.to_string();
  return label;
}

// Inputs + output at 4 bytes per element (every dtype is a 32-bit word on the Vulkan side), for
// every compute type, so rows of one op compare directly. Whole tensors, even where an op reads
// part of one (embedding, narrow).
inline double case_bytes(const OpCase& c) { return 4.0 * static_cast<double>(c.elements); }

// Multiply-adds x 2 of the compute-bound ops; 0 for the others (their figure is GB/s).
inline double case_flops(const OpCase& c) {
  const auto& in = c.sample.inputs;
  const auto& out = c.output.shape;
  const auto product = [](const Shape& s, std::size_t from) {
    double p = 1;
    for (std::size_t i = from; i < s.size(); ++i) p *= static_cast<double>(s[i]);
    return p;
  };
  const double out_size = static_cast<double>(c.output.size());
  switch (c.op) {
    case op::Matmul:  // every output element is a dot product of the lhs's last extent
      return in[0].shape.empty() ? 0 : 2 * out_size * static_cast<double>(in[0].shape.back());
    case op::Conv2d:  // y [N,O,OH,OW] from w [O,C,KH,KW]: C*KH*KW terms per output
      return 2 * out_size * product(in[1].shape, 1);
    case op::Conv2dInputGrad:  // the forward's terms: g [N,O,OH,OW] x w [O,C,KH,KW]
      return 2 * static_cast<double>(in[0].size()) * product(in[1].shape, 1);
    case op::Conv2dWeightGrad:  // g [N,O,OH,OW] x dw [O,C,KH,KW]
      return out.size() == 4 ? 2 * static_cast<double>(in[1].size()) * product(out, 1) : 0;
    default:
      return 0;
  }
}

// A one-node graph "x0, x1, ... -> y" and its inputs drawn from the sample's value domains
// (rounded to f32 for f32 inputs, so every backend sees the same values).
struct PreparedCase {
  Graph graph;
  TensorMap inputs;
};

inline PreparedCase prepare_case(const OpCase& c) {
  PreparedCase p;
  SampleRng rng(kCaseSeed ^ (static_cast<std::uint64_t>(c.op) << 32));
  GraphBuilder builder(std::string(op_name(c.op)));
  std::vector<Tensor> operands;
  for (std::size_t i = 0; i < c.sample.inputs.size(); ++i) {
    const TensorType& type = c.sample.inputs[i];
    const std::string name = "x" + std::to_string(i);
    operands.push_back(builder.input(name, type));
    std::vector<double> values = c.sample.domains[i].draw(rng, type.size());
    if (type.dtype == DType::f32) {
      for (double& v : values) v = static_cast<double>(static_cast<float>(v));
    }
    // In the dtype's own storage (exact: f32 values are rounded above), as a user's inputs would be.
    p.inputs.emplace(name, HostTensor::of(type, std::move(values)).narrowed());
  }
  builder.output("y", builder.emit(c.op, operands, c.sample.attrs, SourceLoc{"op_cases.h", 1, 0}));
  p.graph = builder.take();
  return p;
}

// The prepared case of `c`, built on first use and kept until another op's is asked for: large
// cases are drawn only when their benchmark runs (not for filtered-out ones), and only one op's
// inputs are held at a time (consecutive benchmarks of one op share them).
inline std::shared_ptr<const PreparedCase> prepared(const OpCase& c) {
  static std::optional<OpId> held_op;
  static std::shared_ptr<const PreparedCase> held;
  if (!held || held_op != c.op) {
    held.reset();  // free the previous op's inputs before drawing the next
    held = std::make_shared<const PreparedCase>(prepare_case(c));
    held_op = c.op;
  }
  return held;
}

// The convolutions of the CNN workloads (W7_small: batch 64 of 8x8 images, 1->16 and 16->32
// channels; W7: batch 128 of 32x32, 16->16 and 64->64; 3x3 kernels, stride 1, padding 1), each op
// followed by the matmul of the shape interp_f32 runs it as (src/interp/kernels/conv_gemm.cpp), so
// their GFLOP/s compare directly (P = N*H*W output positions, K = C*9 taps):
//   conv2d               matmul [O, K] x [K, P]       (w . im2col(x))
//   conv2d_input_grad    matmul [K, O] x [O, P]       (w^T . g, then col2im), or with C >= O
//                        matmul [C, O*9] x [O*9, P]   (the forward of g with w's taps flipped)
//   conv2d_weight_grad   matmul [K, P] x [P, O]       (im2col(x) . g^T)
// Not typed_case: its element cap would drop the largest weight gradient's matmul, whose [K, P]
// operand is the 75M-element im2col matrix the convolution never stores whole.
inline std::vector<OpCase> conv_gemm_cases() {
  struct Conv {
    std::int64_t n, c, o, side;
  };
  const Conv convs[] = {{64, 1, 16, 8}, {64, 16, 32, 8}, {128, 16, 16, 32}, {128, 64, 64, 32}};
  const auto f32 = [](Shape s) { return TensorType{DType::f32, std::move(s)}; };
  const auto real = ValueDomain::real_range(-2, 2);
  const auto pair = [](std::int64_t v) { return AttrValue{std::vector<std::int64_t>{v, v}}; };
  const Attrs conv{
      {"dilation", pair(1)}, {"groups", AttrValue{std::int64_t{1}}}, {"padding", pair(1)}, {"stride", pair(1)}};
  std::vector<OpCase> cases;
  const auto add = [&](OpId op, OpSample sample) {
    TensorType out = infer_type(op, sample.attrs, sample.inputs);
    std::int64_t inputs = 0;
    for (const TensorType& t : sample.inputs) inputs += t.size();
    const std::int64_t elements = inputs + out.size();
    cases.push_back(OpCase{op, std::move(sample), std::move(out), inputs, elements, false});
  };
  for (const Conv& s : convs) {
    const Shape image{s.n, s.c, s.side, s.side}, grad{s.n, s.o, s.side, s.side}, weight{s.o, s.c, 3, 3};
    const std::int64_t p = s.n * s.side * s.side, k = s.c * 9;
    add(op::Conv2d, OpSample{conv, {f32(image), f32(weight)}, {real, real}});
    add(op::Matmul, OpSample{{}, {f32({s.o, k}), f32({k, p})}, {real, real}});
    Attrs input_grad = conv;
    input_grad.set("height", s.side);
    input_grad.set("width", s.side);
    add(op::Conv2dInputGrad, OpSample{std::move(input_grad), {f32(grad), f32(weight)}, {real, real}});
    if (s.c >= s.o) {
      add(op::Matmul, OpSample{{}, {f32({s.c, s.o * 9}), f32({s.o * 9, p})}, {real, real}});
    } else {
      add(op::Matmul, OpSample{{}, {f32({k, s.o}), f32({s.o, p})}, {real, real}});
    }
    Attrs weight_grad = conv;
    weight_grad.set("kernel_h", std::int64_t{3});
    weight_grad.set("kernel_w", std::int64_t{3});
    add(op::Conv2dWeightGrad, OpSample{std::move(weight_grad), {f32(image), f32(grad)}, {real, real}});
    add(op::Matmul, OpSample{{}, {f32({k, p}), f32({p, s.o})}, {real, real}});
  }
  return cases;
}

}  // namespace tg::bench
