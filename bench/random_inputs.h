#pragma once
// Inputs shared by the interpreter benchmarks: uniform [-1, 1) floats from a seeded SampleRng, in
// f32 storage, so the timed interpret() call reads them in place with no conversion.
#include <cstdint>
#include <utility>
#include <vector>

#include "tensorgrad/interp/host_tensor.h"
#include "tensorgrad/ir/ops/sample.h"

namespace tg::bench {

inline HostTensor random_f32(const Shape& shape, std::uint64_t seed) {
  SampleRng rng(seed);
  std::vector<float> values(static_cast<std::size_t>(num_elements(shape)));
  for (float& v : values) v = static_cast<float>(rng.uniform(-1.0, 1.0));
  return HostTensor::f32(shape, std::move(values));
}

}  // namespace tg::bench
