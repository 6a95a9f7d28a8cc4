// Optimizers as Graph -> Graph passes. The input graph is copied into a builder and the update ops
// are appended with the tracing front-end. Each update is written in the operation order of
// torch.optim's single-tensor code path (torch 1.13). Every hyperparameter, and every combination
// of them that PyTorch computes in double on the host (1 - beta1, the bias corrections,
// 1 - lr * weight_decay), is computed in double by scalars_for_step and enters the graph as a 0-d
// input, so the graph rounds where PyTorch rounds: nowhere extra in float64, at each Python
// scalar's conversion to float in float32.
#include "tensorgrad/passes/optimizer.h"

#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <string>

#include "tensorgrad/ir/error.h"
#include "tensorgrad/ir/ops/api.h"
#include "tensorgrad/ir/tensor.h"

namespace tg {

namespace {

std::string str(double v) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%g", v);
  return buffer;
}

// A ParamGrad checked against the graph.
struct ResolvedParam {
  ParamGrad entry;
  ValueId param = -1;
  ValueId grad = -1;
  TensorType type;
};

std::vector<ResolvedParam> resolve(const Graph& graph, const std::vector<ParamGrad>& grads, const std::string& pass) {
  const std::string where = pass + " on graph '" + graph.name() + "': ";
  if (grads.empty()) throw Error(where + "no params to update");
  std::vector<ResolvedParam> resolved;
  std::set<std::string, std::less<>> seen;
  for (const ParamGrad& pg : grads) {
    const std::string about = where + "param '" + pg.param + "': ";
    if (!seen.insert(pg.param).second) throw Error(about + "listed twice");
    const auto param = graph.find_input(pg.param);
    if (!param) throw Error(about + "the graph has no input of that name");
    if (graph.input_of_value(*param)->kind != InputKind::param) {
      throw Error(about + "the input is a " + std::string(input_kind_name(graph.input_of_value(*param)->kind)) +
                  " input, not a param");
    }
    const TensorType& type = graph.type(*param);
    if (type.dtype != DType::f32) throw Error(about + "is " + type.to_string() + "; only f32 params are trained");
    const auto grad = graph.find_output(pg.grad);
    if (!grad) {
      throw Error(about + "the graph has no gradient output '" + pg.grad +
                  "' (differentiate the graph with respect to it first)");
    }
    if (graph.type(*grad) != type) {
      throw Error(about + "its gradient output '" + pg.grad + "' is " + graph.type(*grad).to_string() +
                  ", the param is " + type.to_string());
    }
    resolved.push_back({pg, *param, *grad, type});
  }
  return resolved;
}

void require_unused_input(const Graph& graph, const std::string& name, const std::string& pass) {
  if (graph.find_input(name)) {
    throw Error(pass + " on graph '" + graph.name() + "': the graph already has an input named '" + name + "'");
  }
}
void require_unused_output(const Graph& graph, const std::string& name, const std::string& pass) {
  if (graph.find_output(name)) {
    throw Error(pass + " on graph '" + graph.name() + "': the graph already has an output named '" + name + "'");
  }
}

// Throws "<pass>: <what>" unless ok.
void require(bool ok, const std::string& pass, const std::string& what) {
  if (!ok) throw Error(pass + ": " + what);
}

void check_betas(const std::string& pass, const std::string& kind, double beta1, double beta2, double eps) {
  require(beta1 >= 0 && beta1 < 1, pass, kind + " beta1 must be in [0, 1), got " + str(beta1));
  require(beta2 >= 0 && beta2 < 1, pass, kind + " beta2 must be in [0, 1), got " + str(beta2));
  require(eps >= 0 && std::isfinite(eps), pass, kind + " eps must be >= 0, got " + str(eps));
}

void check_config(const OptimizerConfig& config, const std::string& pass) {
  if (const auto* adam = std::get_if<AdamConfig>(&config.kind)) {
    check_betas(pass, "Adam", adam->beta1, adam->beta2, adam->eps);
  }
  if (const auto* adamw = std::get_if<AdamWConfig>(&config.kind)) {
    check_betas(pass, "AdamW", adamw->beta1, adamw->beta2, adamw->eps);
    require(adamw->weight_decay >= 0 && std::isfinite(adamw->weight_decay), pass,
            "AdamW weight_decay must be >= 0, got " + str(adamw->weight_decay));
  }
  if (const auto* sgd = std::get_if<SgdConfig>(&config.kind)) {
    require(sgd->momentum >= 0 && std::isfinite(sgd->momentum), pass,
            "SGD momentum must be >= 0, got " + str(sgd->momentum));
    require(sgd->weight_decay >= 0 && std::isfinite(sgd->weight_decay), pass,
            "SGD weight_decay must be >= 0, got " + str(sgd->weight_decay));
    require(!sgd->nesterov || sgd->momentum > 0, pass, "SGD with nesterov needs momentum > 0 (PyTorch refuses it too)");
  }
  if (config.clip_grad_norm) {
    require(*config.clip_grad_norm > 0 && std::isfinite(*config.clip_grad_norm), pass,
            "clip_grad_norm must be > 0, got " + str(*config.clip_grad_norm));
  }
}

using NamedValues = std::vector<std::pair<std::string, double>>;

// The scalar inputs of `config` and their values at `step` and `lr`, in the order the passes add
// them (the clipping input first: append_grad_clip adds it before the update).
NamedValues step_scalars(const OptimizerConfig& config, std::int64_t step, double lr) {
  NamedValues out;
  if (config.clip_grad_norm) out.emplace_back(kMaxNormInput, *config.clip_grad_norm);
  if (const auto* sgd = std::get_if<SgdConfig>(&config.kind)) {
    out.emplace_back(kLrInput, lr);
    if (sgd->momentum != 0) out.emplace_back(kMomentumInput, sgd->momentum);
    if (sgd->weight_decay != 0) out.emplace_back(kWeightDecayInput, sgd->weight_decay);
    return out;
  }
  // torch.optim.adam: step = step_t.item() is a float, and beta ** step is C's pow.
  const auto adam = [&](double beta1, double beta2, double eps) {
    const auto t = static_cast<double>(step);
    const double bias_correction1 = 1 - std::pow(beta1, t);
    const double bias_correction2 = 1 - std::pow(beta2, t);
    out.emplace_back(kBeta1Input, beta1);
    out.emplace_back(kOneMinusBeta1Input, 1 - beta1);
    out.emplace_back(kBeta2Input, beta2);
    out.emplace_back(kOneMinusBeta2Input, 1 - beta2);
    out.emplace_back(kEpsInput, eps);
    out.emplace_back(kStepSizeInput, lr / bias_correction1);
    out.emplace_back(kBiasCorrection2SqrtInput, std::sqrt(bias_correction2));
  };
  if (const auto* c = std::get_if<AdamConfig>(&config.kind)) adam(c->beta1, c->beta2, c->eps);
  if (const auto* c = std::get_if<AdamWConfig>(&config.kind)) {
    adam(c->beta1, c->beta2, c->eps);
    out.emplace_back(kDecayFactorInput, 1 - lr * c->weight_decay);
  }
  return out;
}

// Appends the update ops of one optimizer kind; shared by the per-param loop of append_optimizer.
class UpdateWriter {
 public:
  UpdateWriter(GraphBuilder& builder, OptimizedGraph& result, const std::map<std::string, Tensor>& scalars)
      : builder_(builder), result_(result), scalars_(scalars) {}

  Tensor state(const ResolvedParam& p, const std::string& suffix) {
    const std::string name = p.entry.param + suffix;
    require_unused_input(builder_.graph(), name, "append_optimizer");
    result_.state_inputs.push_back(name);
    return builder_.input(name, p.type, InputKind::state);
  }
  void write_back(const std::string& input, const Tensor& value) {
    const std::string output = input + ".new";
    require_unused_output(builder_.graph(), output, "append_optimizer");
    builder_.output(output, value);
    result_.writebacks.push_back({output, input});
  }
  const Tensor& scalar(const char* name) const { return scalars_.at(name); }

  // torch.optim.adam._single_tensor_adam / adamw._single_tensor_adamw (amsgrad off, maximize off).
  void adam(const ResolvedParam& p, const Tensor& grad, bool decoupled_decay) {
    Tensor param = builder_.wrap(p.param);
    Tensor m = state(p, ".adam.m");
    Tensor v = state(p, ".adam.v");
    if (decoupled_decay) param = param * scalar(kDecayFactorInput);  // param.mul_(1 - lr * weight_decay)
    // exp_avg.mul_(beta1).add_(grad, alpha=1 - beta1)
    Tensor m_new = m * scalar(kBeta1Input) + grad * scalar(kOneMinusBeta1Input);
    // exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2): addcmul computes self + value * t1 * t2
    Tensor v_new = v * scalar(kBeta2Input) + grad * scalar(kOneMinusBeta2Input) * grad;
    // denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(eps)
    Tensor denom = sqrt(v_new) / scalar(kBiasCorrection2SqrtInput) + scalar(kEpsInput);
    // param.addcdiv_(exp_avg, denom, value=-step_size): addcdiv computes self + value * t1 / t2
    Tensor param_new = param - scalar(kStepSizeInput) * m_new / denom;
    write_back(p.entry.param, param_new);
    write_back(p.entry.param + ".adam.m", m_new);
    write_back(p.entry.param + ".adam.v", v_new);
  }

  // torch.optim.sgd._single_tensor_sgd with dampening 0 (maximize off).
  void sgd(const ResolvedParam& p, const Tensor& grad, const SgdConfig& config, bool decays) {
    Tensor param = builder_.wrap(p.param);
    Tensor step = grad;
    if (decays && config.weight_decay != 0)
      step = grad + param * scalar(kWeightDecayInput);  // d_p.add(param, alpha=wd)
    if (config.momentum != 0) {
      // A zero-initialised buffer makes PyTorch's first step (buf = clone(d_p)) the general formula:
      // 0 * momentum + d_p is d_p exactly.
      Tensor buf = state(p, ".sgd.momentum");
      Tensor buf_new = buf * scalar(kMomentumInput) + step;  // buf.mul_(momentum).add_(d_p, alpha=1 - dampening)
      step = config.nesterov ? step + buf_new * scalar(kMomentumInput) : buf_new;  // d_p.add(buf, alpha=momentum)
      write_back(p.entry.param, param - scalar(kLrInput) * step);                  // param.add_(d_p, alpha=-lr)
      write_back(p.entry.param + ".sgd.momentum", buf_new);
      return;
    }
    write_back(p.entry.param, param - scalar(kLrInput) * step);
  }

 private:
  GraphBuilder& builder_;
  OptimizedGraph& result_;
  const std::map<std::string, Tensor>& scalars_;
};

}  // namespace

std::vector<ParamGrad> param_grads(const Graph& graph, std::string_view grad_prefix) {
  std::vector<ParamGrad> out;
  for (const GraphInput& in : graph.inputs()) {
    if (in.kind != InputKind::param) continue;
    std::string grad = std::string(grad_prefix) + in.name;
    if (graph.find_output(grad)) out.push_back({in.name, std::move(grad), true});
  }
  return out;
}

ClippedGraph append_grad_clip(const Graph& graph, const std::vector<ParamGrad>& grads, double max_norm) {
  const std::string pass = "append_grad_clip";
  if (!(max_norm > 0) || !std::isfinite(max_norm)) {
    throw Error(pass + " on graph '" + graph.name() + "': max_norm must be > 0, got " + str(max_norm));
  }
  const std::vector<ResolvedParam> resolved = resolve(graph, grads, pass);
  require_unused_input(graph, kMaxNormInput, pass);
  require_unused_output(graph, kGradNormOutput, pass);
  for (const ResolvedParam& p : resolved) require_unused_output(graph, p.entry.grad + ".clipped", pass);

  GraphBuilder builder(graph.name());
  builder.mutable_graph() = graph;
  TracingScope scope(builder);
  Tensor max_norm_input = builder.input(kMaxNormInput, {DType::f32, {}}, InputKind::data);
  // torch.nn.utils.clip_grad_norm_: total_norm = torch.norm(torch.stack([torch.norm(g) for g in grads]))
  std::vector<Tensor> norms;
  for (const ResolvedParam& p : resolved) norms.push_back(sqrt(sum(square(builder.wrap(p.grad)))));
  Tensor total = sqrt(sum(square(stack(norms))));
  // clip_coef = max_norm / (total_norm + 1e-6): a float divided by a tensor is tensor.reciprocal() * float.
  // 1e-6 stays a constant: its rounding to float (by 2.5e-15) moves the coefficient by
  // 2.5e-15 / (total + 1e-6) relative, far below what a float64 comparison with PyTorch resolves.
  Tensor coef = minimum((1.0 / (total + 1e-6)) * max_norm_input, 1.0);  // torch.clamp(clip_coef, max=1.0)
  builder.output(kGradNormOutput, total);
  ClippedGraph result;
  result.scalars.values.emplace(kMaxNormInput, max_norm);
  for (const ResolvedParam& p : resolved) {
    ParamGrad clipped = p.entry;
    clipped.grad = p.entry.grad + ".clipped";
    builder.output(clipped.grad, builder.wrap(p.grad) * coef);  // g.mul_(clip_coef_clamped)
    result.grads.push_back(std::move(clipped));
  }
  result.graph = builder.take();
  return result;
}

OptimizedGraph append_optimizer(const Graph& graph, const std::vector<ParamGrad>& grads,
                                const OptimizerConfig& config) {
  const std::string pass = "append_optimizer";
  check_config(config, pass);
  resolve(graph, grads, pass);  // so that errors name this pass, not the clipping one
  std::vector<ParamGrad> entries = grads;
  Graph source = graph;
  if (config.clip_grad_norm) {
    ClippedGraph clipped = append_grad_clip(graph, grads, *config.clip_grad_norm);
    source = std::move(clipped.graph);
    entries = std::move(clipped.grads);
  }
  const std::vector<ResolvedParam> resolved = resolve(source, entries, pass);

  OptimizedGraph result;
  GraphBuilder builder(source.name());
  builder.mutable_graph() = std::move(source);
  TracingScope scope(builder);
  std::map<std::string, Tensor> scalars;
  for (const auto& [name, value] : step_scalars(config, 1, 0.0)) {
    result.scalar_inputs.push_back(name);
    if (name == kMaxNormInput) continue;  // added by append_grad_clip
    require_unused_input(builder.graph(), name, pass);
    scalars.emplace(name, builder.input(name, {DType::f32, {}}, InputKind::data));
  }

  UpdateWriter writer(builder, result, scalars);
  for (const ResolvedParam& p : resolved) {
    const bool decays = p.entry.decay && (!config.decay_filter || config.decay_filter(p.entry.param));
    const Tensor grad = builder.wrap(p.grad);
    if (std::holds_alternative<AdamConfig>(config.kind)) writer.adam(p, grad, false);
    if (const auto* adamw = std::get_if<AdamWConfig>(&config.kind)) {
      // PyTorch multiplies by 1 - lr * 0 == 1 for a param group without decay: leaving the op out is exact.
      writer.adam(p, grad, decays && adamw->weight_decay != 0);
    }
    if (const auto* sgd = std::get_if<SgdConfig>(&config.kind)) writer.sgd(p, grad, *sgd, decays);
  }
  result.graph = builder.take();
  return result;
}

OptimizerStepScalars scalars_for_step(const OptimizerConfig& config, std::int64_t step, double lr) {
  check_config(config, "scalars_for_step");
  if (step < 1) throw Error("scalars_for_step: step must be >= 1 (1 is the first step), got " + std::to_string(step));
  if (!(lr >= 0) || !std::isfinite(lr)) throw Error("scalars_for_step: lr must be >= 0 and finite, got " + str(lr));
  OptimizerStepScalars out;
  for (auto& [name, value] : step_scalars(config, step, lr)) out.values.emplace(std::move(name), value);
  return out;
}

}  // namespace tg
