#pragma once
// Shared by the vk tests that run a transformer training step (examples/models.h's W2 at any
// size) as a plain Program: compiling the step graph, inputs for one step, and the same-bits check.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>

#include "../../examples/models.h"
#include "support/library.h"
#include "tensorgrad/train/training.h"
#include "vk_oracle_check.h"

namespace tg::vk::testing {

inline Training compile_transformer(const examples::TransformerConfig& config, std::int64_t batch,
                                    Backend backend = Backend::interp_f32, std::shared_ptr<Context> context = nullptr) {
  examples::CharTransformer model(config);
  return compile(TrainingSpec<examples::CharTransformer>{
      .model = model,
      .loss = examples::transformer_loss,
      .inputs = {{"tokens", {{batch, config.context}, DType::i32}}, {"targets", {{batch, config.context}, DType::i32}}},
      .optimizer = {.kind = AdamWConfig{}},
      .lr = 1e-3,
      .backend = backend,
      .seed = 1,
      .vk_context = std::move(context)});
}

// Every input of the step graph: the training's params, random tokens and targets, ones for
// one-element state (a step count or a rate: no 0/0) and zeros for the rest of the state.
inline TensorMap transformer_step_inputs(const Training& t, std::int64_t vocab, std::uint32_t seed = 100) {
  const Graph& g = t.graph();
  const TensorMap params = t.download_param_tensors();
  TensorMap in;
  for (const GraphInput& i : g.inputs()) {
    const TensorType& type = g.type(i.value);
    if (params.contains(i.name)) {
      in.emplace(i.name, params.at(i.name));
    } else if (type.dtype == DType::i32) {
      in.emplace(i.name, random_indices(type.shape, vocab, seed++));
    } else if (type.size() == 1) {
      in.emplace(i.name, HostTensor::filled(type, 1.0));
    } else {
      in.emplace(i.name, HostTensor::filled(type, 0.0));
    }
  }
  return in;
}

// Every output of `got` has the same bits as in `want`.
inline void expect_same_bits(const TensorMap& want, const TensorMap& got, const std::string& what) {
  ASSERT_EQ(want.size(), got.size()) << what;
  for (const auto& [name, t] : want) {
    const HostTensor& g = got.at(name);
    ASSERT_EQ(t.type, g.type) << what << ": " << name;
    for (std::size_t i = 0; i < t.size(); ++i) {
      const auto x = static_cast<float>(t.at(i));
      const auto y = static_cast<float>(g.at(i));
      ASSERT_EQ(std::memcmp(&x, &y, sizeof(float)), 0)
          << what << ": " << name << "[" << i << "] " << t.at(i) << " vs " << g.at(i);
    }
  }
}

}  // namespace tg::vk::testing
