#pragma once
// What the benchmarks share about W7 and W7_small (examples/models.h's ResNetCnn and SmallCnn), so
// tg_train_bench, tg_profile_step and the W7 test compile the same training and feed it the same
// kind of batch:
//   compile_resnet / compile_small_cnn   Adam, lr 1e-3 unless given (the other Adam defaults), params from `seed`
//   cnn_batch                            images uniform in [-1, 1), labels uniform in [0, classes)
//   kW7Batch, kW7SmallBatch              the benchmark batches: 128 and 64
// bench/pytorch_cnn.py is the PyTorch twin (same layers, same init distributions, same optimizer).
#include <cstdint>
#include <memory>
#include <random>
#include <utility>
#include <vector>

#include "../examples/models.h"
#include "tensorgrad/train/training.h"

namespace tg::bench {

inline constexpr std::int64_t kW7Batch = 128;
inline constexpr std::int64_t kW7SmallBatch = 64;

inline Training compile_resnet(const examples::ResNetCnn& model, std::int64_t batch, Backend backend,
                               std::shared_ptr<vk::Context> ctx, std::uint64_t seed = 7, double lr = 1e-3) {
  const examples::CnnConfig& c = model.config;
  return compile(TrainingSpec<examples::ResNetCnn>{
      .model = model,
      .loss = examples::resnet_loss,
      .inputs = {{"images", {{batch, c.in_channels, c.image, c.image}}}, {"labels", {{batch}, DType::i32}}},
      .optimizer = {.kind = AdamConfig{}},
      .lr = lr,
      .backend = backend,
      .seed = seed,
      .vk_context = std::move(ctx)});
}

inline Training compile_small_cnn(const examples::SmallCnn& model, std::int64_t batch, Backend backend,
                                  std::shared_ptr<vk::Context> ctx, std::uint64_t seed = 7, double lr = 1e-3) {
  return compile(
      TrainingSpec<examples::SmallCnn>{.model = model,
                                       .loss = examples::small_cnn_loss,
                                       .inputs = {{"images", {{batch, 1, 8, 8}}}, {"labels", {{batch}, DType::i32}}},
                                       .optimizer = {.kind = AdamConfig{}},
                                       .lr = lr,
                                       .backend = backend,
                                       .seed = seed,
                                       .vk_context = std::move(ctx)});
}

// Random images [B, C, H, H] and labels [B]: the same batch every step, made from `seed`.
inline TensorMap cnn_batch(std::int64_t batch, std::int64_t channels, std::int64_t image, std::int64_t classes,
                           std::uint32_t seed = 7) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> pixel(-1.f, 1.f);
  std::uniform_int_distribution<std::int32_t> label(0, static_cast<std::int32_t>(classes) - 1);
  std::vector<float> images(static_cast<std::size_t>(batch * channels * image * image));
  std::vector<std::int32_t> labels(static_cast<std::size_t>(batch));
  for (float& v : images) v = pixel(rng);
  for (std::int32_t& v : labels) v = label(rng);
  return {{"images", HostTensor::f32({batch, channels, image, image}, images)},
          {"labels", HostTensor::i32({batch}, labels)}};
}

inline TensorMap resnet_batch(const examples::CnnConfig& c, std::int64_t batch) {
  return cnn_batch(batch, c.in_channels, c.image, c.classes);
}
inline TensorMap small_cnn_batch(std::int64_t batch) { return cnn_batch(batch, 1, 8, 10); }

}  // namespace tg::bench
