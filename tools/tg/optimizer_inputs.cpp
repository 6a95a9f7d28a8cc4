#include "optimizer_inputs.h"

#include <algorithm>
#include <string_view>

#include "tensorgrad/passes/optimizer.h"

namespace tg::cli {

namespace {

constexpr double kLearningRate = 1e-3;
// The state append_optimizer adds per param (Adam/AdamW moments, SGD momentum).
constexpr std::string_view kStateSuffixes[] = {".adam.m", ".adam.v", ".sgd.momentum"};

// The optimizer whose scalar inputs `graph` takes, with the defaults of its config.
OptimizerConfig optimizer_of(const Graph& graph) {
  OptimizerConfig config;
  if (graph.find_input(kDecayFactorInput)) {
    config.kind = AdamWConfig{};
  } else if (graph.find_input(kBeta1Input)) {
    config.kind = AdamConfig{};
  } else {
    // SGD's defaults leave momentum and decay off; a graph that takes them needs values that are on.
    config.kind = SgdConfig{.momentum = graph.find_input(kMomentumInput) ? 0.9 : 0.0,
                            .weight_decay = graph.find_input(kWeightDecayInput) ? 1e-4 : 0.0};
  }
  if (graph.find_input(kMaxNormInput)) config.clip_grad_norm = 1.0;
  return config;
}

}  // namespace

void adjust_optimizer_input(const Graph& graph, const GraphInput& input, std::vector<float>& values) {
  if (graph.type(input.value).dtype != DType::f32) return;
  const std::string_view name = input.name;
  if (input.kind == InputKind::state) {
    for (std::string_view suffix : kStateSuffixes) {
      if (name.ends_with(suffix)) std::fill(values.begin(), values.end(), 0.0f);
    }
    return;
  }
  if (input.kind != InputKind::data || values.size() != 1 || !name.starts_with("optim.")) return;
  const OptimizerStepScalars scalars = scalars_for_step(optimizer_of(graph), 1, kLearningRate);
  if (const auto found = scalars.values.find(input.name); found != scalars.values.end()) {
    values[0] = static_cast<float>(found->second);
  }
}

}  // namespace tg::cli
