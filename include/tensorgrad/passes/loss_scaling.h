#pragma once
// Dynamic loss scaling inside a training step graph, with torch.cuda.amp.GradScaler's semantics:
// the loss is multiplied by a scale before the backward, the gradients are divided by it (in f32)
// before the optimizer, and when any gradient element is Inf or NaN the update is skipped (every
// param and optimizer state keeps its value) and the scale is multiplied by backoff_factor;
// after growth_interval consecutive good steps it is multiplied by growth_factor. The scale and
// the good-step count are state inputs of the graph, read and written back like optimizer state.
#include <cstdint>
#include <string>
#include <vector>

#include "tensorgrad/ir/graph.h"

namespace tg {

struct LossScaling {
  bool enabled = true;
  double init_scale = 65536.0;  // 2^16, GradScaler's default
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  std::int64_t growth_interval = 2000;
};

// The state inputs (0-d f32) and the output the passes add.
inline constexpr const char* kLossScaleInput = "optim.loss_scale";
inline constexpr const char* kGoodStepsInput = "optim.loss_scale_good_steps";
// 1 when every gradient element was finite and the update applied, 0 when it was skipped.
inline constexpr const char* kGradsFiniteOutput = "optim.grads_finite";

// Throws tg::Error naming the field unless init_scale > 0 and finite, growth_factor >= 1,
// backoff_factor in (0, 1], growth_interval in [1, 2^24] (the count is held in f32).
void check_loss_scaling(const LossScaling& config);

// `forward` (whose output `loss` is a 0-d float) differentiated with the loss scaled: adds the
// state input kLossScaleInput, differentiates f32(loss) * scale w.r.t. every param, and outputs
// "grad.<param>" = d(loss * scale)/d param * (1 / scale) plus kGradsFiniteOutput. The result's
// outputs are the forward's, the unscaled gradients and kGradsFiniteOutput.
Graph differentiate_scaled(const Graph& forward, const std::string& loss);

// Makes the update of an optimized graph conditional: every writeback output in `guarded` (name
// of an output) becomes where(grads finite, new value, the input it writes back to), and the scale
// update (adding kGoodStepsInput and the writebacks of both state inputs to `writebacks` and
// `state_inputs`) is appended. Throws tg::Error if the graph lacks kGradsFiniteOutput or an output.
struct ScaledUpdate {
  Graph graph;
  std::vector<Writeback> writebacks;
  std::vector<std::string> state_inputs;
};
ScaledUpdate guard_update(const Graph& graph, const std::vector<Writeback>& writebacks, const LossScaling& config);

}  // namespace tg
