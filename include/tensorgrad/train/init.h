#pragma once
// Param init specs and the deterministic initializer. A spec is a value (what to draw), not a
// closure, so it can be printed, compared and stored with the model. The values of one param are a
// pure function of (seed, the param's dotted name, element index): Philox4x32-10 keyed by the seed,
// with a stable hash of the name in the counter, and Box-Muller normals. So one param's init never
// depends on which other params exist or in which order they were registered.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tensorgrad/interp/host_tensor.h"
#include "tensorgrad/ir/shape.h"

namespace tg {

class Module;

enum class InitKind : std::uint8_t { randn, zeros, ones, kaiming, literal };

inline constexpr double kSqrt2 = 1.4142135623730950488;

struct InitSpec {
  InitKind kind = InitKind::randn;
  double scale = 0.02;   // randn: the standard deviation
  double gain = kSqrt2;  // kaiming: std = gain / sqrt(fan_in)
  // kaiming: the fan-in; when unset, kaiming_fan_in(shape) (see there).
  std::optional<std::int64_t> fan_in;
  std::vector<float> data;  // literal: row-major values, exactly one per element

  std::string to_string() const;  // "randn(scale=0.02)", "kaiming(gain=1.41421, fan_in=64)", ...
  friend bool operator==(const InitSpec&, const InitSpec&) = default;
};

namespace init {

InitSpec randn(double scale = 0.02);  // N(0, scale^2)
InitSpec zeros();
InitSpec ones();
struct KaimingOptions {
  double gain = kSqrt2;                // sqrt(2) suits relu
  std::optional<std::int64_t> fan_in;  // default: kaiming_fan_in(shape)
};
InitSpec kaiming(KaimingOptions options = {});  // N(0, (gain / sqrt(fan_in))^2), PyTorch's kaiming_normal_
InitSpec literal(std::vector<float> data);

}  // namespace init

// Kaiming's default fan-in: the number of inputs each output element sums over, under this
// library's layouts. Rank 0: 1. Rank 1 and 2: shape[0] (a matmul weight is [in, out], y = x W,
// so an Embedding table [vocab, dim] counts vocab, as one_hot(idx) W would). Rank >= 3: the product
// of shape[1..] (a convolution weight is [out, in, kh, kw], fan_in = in * kh * kw, as in PyTorch).
std::int64_t kaiming_fan_in(const Shape& shape);

// Whether weight decay applies by default: true for randn, kaiming and literal, false for zeros and
// ones (biases and norm gains), as in the seed.
bool default_decay(const InitSpec& spec);

// A param as the rest of the training API sees it.
struct ParamInfo {
  std::string name;  // dotted: "l1.W", "layers.0.attn.q.W"
  Shape shape;
  InitSpec init;
  bool decay = true;
  friend bool operator==(const ParamInfo&, const ParamInfo&) = default;
};

// Throws tg::Error naming `param_name` when `spec` cannot initialize `shape`: a literal of the wrong
// size, a negative or non-finite scale or gain, a fan-in below 1.
void check_init(const InitSpec& spec, const Shape& shape, const std::string& param_name);

// The f32 initial value of one param (values rounded to float, so every backend starts from the same
// numbers). The same (seed, name, spec, shape) gives the same bits on every run and thread count.
HostTensor init_value(const ParamInfo& param, std::uint64_t seed);
// Every param of the model, keyed by dotted name.
TensorMap init_params(const Module& model, std::uint64_t seed);

}  // namespace tg
