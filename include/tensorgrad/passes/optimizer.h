#pragma once
// Optimizers as Graph -> Graph passes. Given a graph that already computes gradients (from
// tg::differentiate), append_optimizer appends one update step: new state inputs (zero-initialised
// by whoever runs the graph), per-step scalar data inputs, the update ops, outputs "<param>.new" and
// "<state>.new", and the writebacks that carry each of them into its param or state input after a
// run. The formulas follow torch.optim.Adam / AdamW / SGD (their single-tensor code paths) operation
// by operation, so a float64 run reproduces PyTorch's float64 trajectory to rounding.
// docs/training/optimizers.md describes the graph each one appends.
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "tensorgrad/ir/graph.h"

namespace tg {

// A param to update and the graph output holding its gradient.
struct ParamGrad {
  std::string param;  // a param input (f32)
  std::string grad;   // an output of the param's type: d loss / d param
  bool decay = true;  // whether weight decay applies to it (AdamW, SGD with weight_decay)
  friend bool operator==(const ParamGrad&, const ParamGrad&) = default;
};

// One ParamGrad per param input of `graph` that has an output named grad_prefix + its name (what
// tg::differentiate produces), in input order, each with decay = true.
std::vector<ParamGrad> param_grads(const Graph& graph, std::string_view grad_prefix = "grad.");

// torch.optim.Adam without weight decay.
struct AdamConfig {
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
};
// torch.optim.AdamW: Adam plus decoupled decay p *= 1 - lr * weight_decay before the Adam step, on
// the params whose decay flag is set.
struct AdamWConfig {
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.01;
};
// torch.optim.SGD with dampening 0: g += weight_decay * p (L2, on the params whose decay flag is
// set); with momentum, buf = momentum * buf + g and the step uses buf (or g + momentum * buf with
// Nesterov). Plain SGD when momentum is 0.
struct SgdConfig {
  double momentum = 0;
  bool nesterov = false;
  double weight_decay = 0;
};
using OptimizerKind = std::variant<AdamConfig, AdamWConfig, SgdConfig>;

// The hyperparameters of one optimizer. The learning rate is not among them: it comes with each
// step (scalars_for_step), so it can follow a schedule.
struct OptimizerConfig {
  OptimizerKind kind = AdamConfig{};
  // Global L2-norm gradient clipping before the update (append_grad_clip); none when empty.
  std::optional<double> clip_grad_norm;
  // Which params decay: a param decays when its ParamGrad::decay flag is set AND (when set) the
  // filter returns true for its name. Only AdamW and SGD with weight_decay use it.
  std::function<bool(const std::string&)> decay_filter;
};

// The scalar inputs (0-d f32 data inputs) the passes add. Every float the update uses arrives this
// way rather than as a graph constant, because the IR rounds f32 constants to float even in the f64
// oracle: as inputs they stay doubles in a float64 run and round to float in a float32 run, exactly
// as PyTorch's Python-float hyperparameters do. scalars_for_step gives all their values.
inline constexpr const char* kLrInput = "optim.lr";                                      // SGD: lr
inline constexpr const char* kMomentumInput = "optim.momentum";                          // SGD, momentum != 0
inline constexpr const char* kWeightDecayInput = "optim.weight_decay";                   // SGD, weight_decay != 0
inline constexpr const char* kBeta1Input = "optim.beta1";                                // Adam, AdamW
inline constexpr const char* kOneMinusBeta1Input = "optim.one_minus_beta1";              // 1 - beta1
inline constexpr const char* kBeta2Input = "optim.beta2";                                //
inline constexpr const char* kOneMinusBeta2Input = "optim.one_minus_beta2";              // 1 - beta2
inline constexpr const char* kEpsInput = "optim.eps";                                    //
inline constexpr const char* kStepSizeInput = "optim.step_size";                         // lr / (1 - beta1^t)
inline constexpr const char* kBiasCorrection2SqrtInput = "optim.bias_correction2_sqrt";  // sqrt(1 - beta2^t)
inline constexpr const char* kDecayFactorInput = "optim.decay_factor";                   // AdamW: 1 - lr * weight_decay
inline constexpr const char* kMaxNormInput = "optim.max_norm";                           // clipping: max_norm
// The output append_grad_clip adds: the global gradient norm before clipping.
inline constexpr const char* kGradNormOutput = "optim.grad_norm";

// Values for scalar inputs, by input name.
struct OptimizerStepScalars {
  std::map<std::string, double, std::less<>> values;
};

struct OptimizedGraph {
  Graph graph;
  std::vector<Writeback> writebacks;       // "<param>.new" -> param, "<state>.new" -> state
  std::vector<std::string> state_inputs;   // the state inputs added: set them to zeros before step 1
  std::vector<std::string> scalar_inputs;  // the scalar data inputs added: feed scalars_for_step every run
};

// Appends one update step of `config` for every ParamGrad. The input graph's outputs stay (the
// gradient outputs too). State inputs: "<param>.adam.m" and "<param>.adam.v" (Adam, AdamW),
// "<param>.sgd.momentum" (SGD with momentum). Throws tg::Error naming the param for: an unknown
// param or one that is not a param input, a param listed twice or not f32, a missing gradient
// output or one whose type differs from the param's, a name the graph already uses for an input
// or output, an empty list, and bad hyperparameters (beta outside [0, 1), eps / weight_decay /
// momentum < 0, Nesterov without momentum, clip_grad_norm <= 0).
OptimizedGraph append_optimizer(const Graph& graph, const std::vector<ParamGrad>& grads, const OptimizerConfig& config);

struct ClippedGraph {
  Graph graph;
  std::vector<ParamGrad> grads;  // the input list with each grad renamed to its clipped output
  OptimizerStepScalars scalars;  // {kMaxNormInput: max_norm}: feed it with every run
};

// torch.nn.utils.clip_grad_norm_ as a pass (the extension hook a custom optimizer calls before its
// own update): total = ||(||g_1||, ..., ||g_n||)||, coef = min(max_norm / (total + 1e-6), 1), and
// one output "<grad>.clipped" = g * coef per gradient, plus kGradNormOutput = total. max_norm comes
// through the scalar input kMaxNormInput. Throws tg::Error for max_norm <= 0 or not finite and the
// errors append_optimizer names for params and gradients.
ClippedGraph append_grad_clip(const Graph& graph, const std::vector<ParamGrad>& grads, double max_norm);

// The values of every scalar input append_optimizer adds for `config` (exactly the names of
// OptimizedGraph::scalar_inputs), for training step `step` (1 = the first) at learning rate `lr`,
// computed in double as torch.optim computes them on the host. Throws tg::Error for step < 1, a
// negative or non-finite lr, or bad hyperparameters.
OptimizerStepScalars scalars_for_step(const OptimizerConfig& config, std::int64_t step, double lr);

}  // namespace tg
