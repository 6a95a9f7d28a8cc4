// Dynamic loss scaling (include/tensorgrad/passes/loss_scaling.h), written operation by operation
// as torch.cuda.amp.GradScaler does it: scale * loss, grad * (1 / scale), the non-finite check,
// and _amp_update_scale_.
#include "tensorgrad/passes/loss_scaling.h"

#include <cmath>
#include <map>
#include <set>

#include "tensorgrad/ir/error.h"
#include "tensorgrad/ir/ops/api.h"
#include "tensorgrad/ir/tensor.h"
#include "tensorgrad/passes/autodiff.h"

namespace tg {

namespace {

constexpr const char* kScaledLoss = "optim.scaled_loss";
constexpr const char* kScaledGradPrefix = "optim.scaled_grad.";

// `g` with the same values (same ids) and its outputs relinked: an output named in `replace` now
// reads the given value, one named in `drop` is left out.
Graph relinked(const Graph& g, const std::map<std::string, ValueId>& replace, const std::set<std::string>& drop) {
  Graph out(g.name());
  for (std::size_t v = 0; v < g.values().size(); ++v) {
    const auto id = static_cast<ValueId>(v);
    ValueId copy = -1;
    if (const GraphInput* in = g.input_of_value(id)) {
      copy = out.add_input(in->name, in->kind, g.type(id));
    } else {
      const Node& node = g.node(g.value(id).producer);
      copy = out.add_node(node.op, node.inputs, node.attrs, g.type(id), node.loc);
      if (node.checkpoint != kNoCheckpoint) out.set_checkpoint(out.value(copy).producer, node.checkpoint);
    }
    if (copy != id) throw Error("loss scaling: value ids moved while copying graph '" + g.name() + "'");
  }
  for (const GraphOutput& o : g.outputs()) {
    if (drop.contains(o.name)) continue;
    const auto it = replace.find(o.name);
    out.add_output(o.name, it != replace.end() ? it->second : o.value);
  }
  return out;
}

std::string str(double v) { return std::to_string(v); }

}  // namespace

void check_loss_scaling(const LossScaling& c) {
  const auto require = [](bool ok, const std::string& what) {
    if (!ok) throw Error("loss scaling: " + what);
  };
  require(c.init_scale > 0 && std::isfinite(c.init_scale),
          "init_scale must be > 0 and finite, got " + str(c.init_scale));
  require(c.growth_factor >= 1 && std::isfinite(c.growth_factor),
          "growth_factor must be >= 1 and finite, got " + str(c.growth_factor));
  require(c.backoff_factor > 0 && c.backoff_factor <= 1,
          "backoff_factor must be in (0, 1], got " + str(c.backoff_factor));
  require(c.growth_interval >= 1 && c.growth_interval <= (std::int64_t{1} << 24),
          "growth_interval must be in [1, 2^24] (the good-step count is held in f32), got " +
              std::to_string(c.growth_interval));
}

Graph differentiate_scaled(const Graph& forward, const std::string& loss) {
  const auto loss_value = forward.find_output(loss);
  if (!loss_value || forward.type(*loss_value).rank() != 0 || !is_float(forward.type(*loss_value).dtype)) {
    throw Error("loss scaling: graph '" + forward.name() + "' has no 0-d float output '" + loss + "'");
  }
  if (forward.find_input(kLossScaleInput)) {
    throw Error("loss scaling: graph '" + forward.name() + "' already has an input '" + kLossScaleInput + "'");
  }
  Graph scaled_forward;
  {
    GraphBuilder builder(forward.name());
    builder.mutable_graph() = forward;
    TracingScope scope(builder);
    const Tensor scale = builder.input(kLossScaleInput, {DType::f32, {}}, InputKind::state);
    // scaler.scale(loss): outputs * scale, promoted to f32 as PyTorch promotes a 16-bit loss.
    builder.output(kScaledLoss, cast(builder.wrap(*loss_value), DType::f32) * scale);
    scaled_forward = builder.take();
  }
  const Graph with_grads = differentiate(scaled_forward, {.loss = kScaledLoss, .grad_prefix = kScaledGradPrefix});

  GraphBuilder builder(with_grads.name());
  builder.mutable_graph() = with_grads;
  TracingScope scope(builder);
  const Tensor scale = builder.wrap(*with_grads.find_input(kLossScaleInput));
  // GradScaler: inv_scale = scale.reciprocal(); _amp_foreach_non_finite_check_and_unscale_
  // multiplies each gradient by inv_scale and flags a non-finite one. The check reads the unscaled
  // gradients (PyTorch's reads the scaled ones): the same verdict, except that an unscale that
  // overflows (a scale below 1 after many backoffs) is caught too. x * 0 is 0 for a finite x and
  // NaN for Inf or NaN, so the sum of every gradient times 0 is 0 exactly when all are finite.
  const Tensor inv_scale = 1.0 / scale;
  std::set<std::string> drop{kScaledLoss};
  std::optional<Tensor> poison;
  for (const GraphOutput& o : with_grads.outputs()) {
    if (!o.name.starts_with(kScaledGradPrefix)) continue;
    drop.insert(o.name);
    const Tensor unscaled = builder.wrap(o.value) * inv_scale;
    const Tensor zeroed = sum(unscaled * 0.0);
    poison = poison ? *poison + zeroed : zeroed;
    builder.output("grad." + o.name.substr(std::string(kScaledGradPrefix).size()), unscaled);
  }
  if (!poison) throw Error("loss scaling: graph '" + forward.name() + "' has no param to differentiate");
  builder.output(kGradsFiniteOutput, cast(equal(*poison, 0.0), DType::f32));
  const Graph built = builder.take();
  return relinked(built, {}, drop);
}

ScaledUpdate guard_update(const Graph& graph, const std::vector<Writeback>& writebacks, const LossScaling& config) {
  check_loss_scaling(config);
  const auto finite_output = graph.find_output(kGradsFiniteOutput);
  if (!finite_output) throw Error("loss scaling: graph '" + graph.name() + "' has no output " + kGradsFiniteOutput);
  const auto scale_input = graph.find_input(kLossScaleInput);
  if (!scale_input) throw Error("loss scaling: graph '" + graph.name() + "' has no input " + kLossScaleInput);

  ScaledUpdate out;
  GraphBuilder builder(graph.name());
  builder.mutable_graph() = graph;
  TracingScope scope(builder);
  const Tensor finite = equal(builder.wrap(*finite_output), 1.0);
  std::map<std::string, ValueId> replace;
  for (const Writeback& w : writebacks) {
    const auto updated = graph.find_output(w.output);
    const auto held = graph.find_input(w.input);
    if (!updated || !held) {
      throw Error("loss scaling: graph '" + graph.name() + "' lacks writeback '" + w.output + "' -> '" + w.input + "'");
    }
    // A skipped step writes back what the input held: the same bits.
    replace[w.output] = where(finite, builder.wrap(*updated), builder.wrap(*held)).id();
  }
  // torch._amp_update_scale_: on a non-finite step scale *= backoff and the count restarts; else the
  // count grows, and when it reaches growth_interval the scale grows (if the grown scale is finite)
  // and the count restarts.
  const Tensor scale = builder.wrap(*scale_input);
  const Tensor good = builder.input(kGoodStepsInput, {DType::f32, {}}, InputKind::state);
  const Tensor counted = good + 1.0;
  const Tensor below_interval = less(counted, static_cast<double>(config.growth_interval));
  const Tensor grown = scale * config.growth_factor;
  const Tensor grown_finite = equal(grown * 0.0, 0.0);
  const Tensor after_good = where(below_interval, scale, where(grown_finite, grown, scale));
  const Tensor scale_new = where(finite, after_good, scale * config.backoff_factor);
  const Tensor good_new = where(finite, where(below_interval, counted, zeros({}, DType::f32)), zeros({}, DType::f32));
  builder.output(std::string(kLossScaleInput) + ".new", scale_new);
  builder.output(std::string(kGoodStepsInput) + ".new", good_new);
  out.graph = relinked(builder.take(), replace, {});
  out.writebacks = writebacks;
  out.writebacks.push_back({std::string(kLossScaleInput) + ".new", kLossScaleInput});
  out.writebacks.push_back({std::string(kGoodStepsInput) + ".new", kGoodStepsInput});
  out.state_inputs = {kLossScaleInput, kGoodStepsInput};
  return out;
}

}  // namespace tg
