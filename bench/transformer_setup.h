#pragma once
// What bench/train_bench.cpp and bench/w6_capacity.cpp share, so both compile the same transformer
// training (examples/models.h's CharTransformer with W2's optimizer settings) and feed it the same
// kind of batch:
//   compile_transformer   AdamW lr 1e-3, weight decay 0.01 (tensorgrad's default decay flags)
//   transformer_batch     random tokens [B, T] (i32), targets = each row's tokens shifted by one
//   w6_batch              the W6 batch: TG_W6_BATCH, default 8
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "../examples/models.h"
#include "tensorgrad/train/training.h"

namespace tg::bench {

// TG_MATMUL_PRECISION=split|fast: the f32 matmuls' vk::MatmulPrecision (default ieee), so one
// binary measures every mode in separate runs.
inline vk::MatmulPrecision matmul_precision_from_env() {
  const char* env = std::getenv("TG_MATMUL_PRECISION");
  const std::string mode = env ? env : "";
  return mode == "split"  ? vk::MatmulPrecision::split
         : mode == "fast" ? vk::MatmulPrecision::fast
                          : vk::MatmulPrecision::ieee;
}

// `precision`: the step's mixed-precision policy (TrainingSpec::precision; f32 by default);
// `communicator`: the data-parallel group (TrainingSpec::communicator; none by default).
inline Training compile_transformer(const examples::CharTransformer& model, std::int64_t batch, Backend backend,
                                    std::shared_ptr<vk::Context> ctx, std::uint64_t seed = 2,
                                    PrecisionPolicy precision = {},
                                    std::shared_ptr<Communicator> communicator = nullptr,
                                    std::uint64_t reduce_bucket_bytes = kDefaultReduceBucketBytes) {
  const std::int64_t T = model.config.context;
  TrainingSpec<examples::CharTransformer> spec{
      .model = model,
      .loss = examples::transformer_loss,
      .inputs = {{"tokens", {{batch, T}, DType::i32}}, {"targets", {{batch, T}, DType::i32}}},
      .optimizer = {.kind = AdamWConfig{.weight_decay = 0.01}},
      .lr = 1e-3,
      .backend = backend,
      .seed = seed,
      .vk_context = std::move(ctx),
      .precision = precision};
  spec.matmul_precision = matmul_precision_from_env();
  spec.communicator = std::move(communicator);  // data parallel (bench/dp_bench.cpp)
  spec.reduce_bucket_bytes = reduce_bucket_bytes;
  return compile(std::move(spec));
}

// Random tokens; each row's targets are its tokens shifted by one, as in a text batch.
inline TensorMap transformer_batch(const examples::TransformerConfig& config, std::int64_t batch,
                                   std::uint32_t seed = 2) {
  const std::int64_t B = batch, T = config.context;
  std::mt19937 rng(seed);
  std::uniform_int_distribution<std::int32_t> pick(0, static_cast<std::int32_t>(config.vocab) - 1);
  std::vector<std::int32_t> tokens(B * T), targets(B * T);
  for (std::int64_t b = 0; b < B; ++b) {
    std::int32_t next = pick(rng);
    for (std::int64_t t = 0; t < T; ++t) {
      tokens[b * T + t] = next;
      next = pick(rng);
      targets[b * T + t] = next;
    }
  }
  return {{"tokens", HostTensor::i32({B, T}, tokens)}, {"targets", HostTensor::i32({B, T}, targets)}};
}

// A positive integer from the environment, or `fallback` when unset or not a positive integer.
inline std::int64_t env_count(const char* name, std::int64_t fallback) {
  const char* env = std::getenv(name);
  if (!env || !*env) return fallback;
  char* end = nullptr;
  const long long value = std::strtoll(env, &end, 10);
  return (end && *end == '\0' && value > 0) ? value : fallback;
}

inline std::int64_t w6_batch() { return env_count("TG_W6_BATCH", 8); }

}  // namespace tg::bench
