// Init specs and the deterministic initializer (see init.h for the scheme).
#include "tensorgrad/train/init.h"

#include <cmath>
#include <span>
#include <sstream>

#include "interp/parallel.h"
#include "interp/philox.h"
#include "tensorgrad/ir/error.h"
#include "tensorgrad/train/module.h"

namespace tg {

namespace init {

InitSpec randn(double scale) { return {.kind = InitKind::randn, .scale = scale}; }
InitSpec zeros() { return {.kind = InitKind::zeros}; }
InitSpec ones() { return {.kind = InitKind::ones}; }
InitSpec kaiming(KaimingOptions options) {
  return {.kind = InitKind::kaiming, .gain = options.gain, .fan_in = options.fan_in};
}
InitSpec literal(std::vector<float> data) { return {.kind = InitKind::literal, .data = std::move(data)}; }

}  // namespace init

std::string InitSpec::to_string() const {
  std::ostringstream out;
  switch (kind) {
    case InitKind::randn:
      out << "randn(scale=" << scale << ")";
      break;
    case InitKind::zeros:
      out << "zeros";
      break;
    case InitKind::ones:
      out << "ones";
      break;
    case InitKind::kaiming:
      out << "kaiming(gain=" << gain;
      if (fan_in) out << ", fan_in=" << *fan_in;
      out << ")";
      break;
    case InitKind::literal:
      out << "literal(" << data.size() << " values)";
      break;
  }
  return out.str();
}

std::int64_t kaiming_fan_in(const Shape &shape) {
  if (shape.empty()) return 1;
  if (shape.size() <= 2) return shape[0];
  return num_elements(Shape(shape.begin() + 1, shape.end()));
}

bool default_decay(const InitSpec &spec) { return spec.kind != InitKind::zeros && spec.kind != InitKind::ones; }

void check_init(const InitSpec &spec, const Shape &shape, const std::string &param_name) {
  const auto refuse = [&](const std::string &why) {
    throw Error("param '" + param_name + "' " + shape_to_string(shape) + ": init " + spec.to_string() + " " + why);
  };
  switch (spec.kind) {
    case InitKind::randn:
      if (!std::isfinite(spec.scale) || spec.scale < 0) refuse("needs a finite scale >= 0");
      break;
    case InitKind::kaiming:
      if (!std::isfinite(spec.gain) || spec.gain < 0) refuse("needs a finite gain >= 0");
      if (spec.fan_in && *spec.fan_in < 1) refuse("needs a fan_in >= 1");
      if (!spec.fan_in && num_elements(shape) > 0 && kaiming_fan_in(shape) < 1) refuse("has no inputs to fan in");
      break;
    case InitKind::literal:
      if (static_cast<std::int64_t>(spec.data.size()) != num_elements(shape)) {
        refuse("has " + std::to_string(spec.data.size()) + " values but the shape holds " +
               std::to_string(num_elements(shape)));
      }
      break;
    case InitKind::zeros:
    case InitKind::ones:
      break;
  }
}

namespace {

// FNV-1a, 64 bits: stable across platforms and runs (std::hash is neither),
// cheap, and good enough to separate param names, which are short and distinct.
std::uint64_t stable_name_hash(const std::string &name) {
  std::uint64_t h = 0xCBF29CE484222325ull;
  for (const char c : name) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001B3ull;
  }
  return h;
}

// Standard normals for element i: Philox keyed by the 64-bit seed; the counter
// holds the element index (low words) and the name hash (high words), so every
// (seed, name, i) is its own draw.
void fill_normals(std::span<float> values, double std_dev, std::uint64_t seed, const std::string &name) {
  const philox::Key key{static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32)};
  const std::uint64_t h = stable_name_hash(name);
  const auto n = static_cast<std::int64_t>(values.size());
  interp::parallel_chunks(n, 4096, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t i = begin; i < end; ++i) {
      const auto index = static_cast<std::uint64_t>(i);
      const philox::Counter words =
          philox::philox4x32_10({static_cast<std::uint32_t>(index), static_cast<std::uint32_t>(index >> 32),
                                 static_cast<std::uint32_t>(h), static_cast<std::uint32_t>(h >> 32)},
                                key);
      const double z = philox::box_muller<double>(words[0], words[1]);
      // Rounded to float: the param is f32 (and so is what the f64 oracle starts from).
      values[static_cast<std::size_t>(i)] = static_cast<float>(std_dev * z);
    }
  });
}

}  // namespace

HostTensor init_value(const ParamInfo &param, std::uint64_t seed) {
  const InitSpec &spec = param.init;
  check_init(spec, param.shape, param.name);
  const TensorType type{DType::f32, param.shape};
  switch (spec.kind) {
    case InitKind::zeros:
      return HostTensor::filled(type, 0.0);
    case InitKind::ones:
      return HostTensor::filled(type, 1.0);
    case InitKind::literal:
      return HostTensor::f32(param.shape, spec.data);
    case InitKind::randn:
    case InitKind::kaiming:
      break;
  }
  HostTensor out = HostTensor::filled(type, 0.0);
  if (out.size() == 0) return out;
  const double std_dev =
      spec.kind == InitKind::randn
          ? spec.scale
          : spec.gain / std::sqrt(static_cast<double>(spec.fan_in.value_or(kaiming_fan_in(param.shape))));
  fill_normals(out.mutable_f32(), std_dev, seed, param.name);
  return out;
}

TensorMap init_params(const Module &model, std::uint64_t seed) {
  TensorMap out;
  for (const ParamInfo &p : model.params()) out.emplace(p.name, init_value(p, seed));
  return out;
}

}  // namespace tg
