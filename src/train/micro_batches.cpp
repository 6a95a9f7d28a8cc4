// Gradient accumulation (TrainingSpec::micro_batches): the step graph of k micro-batches, built
// from the graph of one. Each micro-batch's forward and backward are spliced in turn (micro-batch
// 1's, then 2's, ...), so the memory plan can give micro-batch 2 the memory of micro-batch 1's
// activations: the step holds one micro-batch's activations and the running gradient sums, not k
// batches' activations.
#include <map>
#include <string>
#include <vector>

#include "tensorgrad/ir/error.h"
#include "tensorgrad/ir/ops/api.h"
#include "tensorgrad/passes/loss_scaling.h"
#include "training_impl.h"

namespace tg::detail {

InputSpecs micro_batch_inputs(const InputSpecs& inputs, int micro_batches) {
  if (micro_batches < 1) {
    throw CompileError("compile: micro_batches is " + std::to_string(micro_batches) +
                       "; it must be >= 1 (1: no gradient accumulation)");
  }
  if (micro_batches == 1) return inputs;
  InputSpecs micro = inputs;
  for (auto& [name, spec] : micro) {
    const std::string about = "compile: micro_batches = " + std::to_string(micro_batches) +
                              " splits every input along dim 0, but input '" + name + "' ";
    if (spec.shape.empty())
      throw CompileError(about + "is 0-d (" + TensorType{spec.dtype, spec.shape}.to_string() + ")");
    if (spec.shape[0] % micro_batches != 0) {
      throw CompileError(about + "has shape " + shape_to_string(spec.shape) + ", whose dim 0 (" +
                         std::to_string(spec.shape[0]) + ") is not a multiple of " + std::to_string(micro_batches));
    }
    spec.shape[0] /= micro_batches;
  }
  return micro;
}

std::string micro_seed_input(int micro_batch) {
  return std::string(kStepSeedInput) + "." + std::to_string(micro_batch);
}

namespace {

// How one output of the micro-batch graph combines over the micro-batches.
enum class Combine { mean, all_finite, first };

Combine combine_of(const std::string& output) {
  if (output == "loss" || output.starts_with("grad.")) return Combine::mean;
  if (output == kGradsFiniteOutput) return Combine::all_finite;
  if (output.starts_with(kCapturePrefix)) return Combine::first;
  throw Error("compile: internal error: the micro-batch graph has an output '" + output +
              "' that gradient accumulation does not know how to combine");
}

}  // namespace

Graph accumulate_micro_batches(const Graph& micro, const InputSpecs& inputs, int micro_batches) {
  GraphBuilder builder(micro.name());
  TracingScope scope(builder);
  // The full-batch data inputs, and the inputs every micro-batch shares (params, state).
  std::map<std::string, Tensor> full, shared;
  std::vector<Tensor> seeds;  // one per micro-batch when the graph draws random numbers
  for (const GraphInput& in : micro.inputs()) {
    const TensorType& type = micro.type(in.value);
    if (in.kind != InputKind::data) {
      shared.emplace(in.name, builder.input(in.name, type, in.kind));
    } else if (const auto spec = inputs.find(in.name); spec != inputs.end()) {
      full.emplace(in.name, builder.input(in.name, {spec->second.dtype, spec->second.shape}));
    } else if (in.name == kStepSeedInput) {
      seeds.push_back(builder.input(kStepSeedInput, type));
      for (int i = 1; i < micro_batches; ++i) seeds.push_back(builder.input(micro_seed_input(i), type));
    } else {
      // A patch site's value: one value cannot stand for k micro-batches' activations.
      throw CompileError("compile: micro_batches = " + std::to_string(micro_batches) +
                         " cannot run patch sites (input '" + in.name +
                         "'): patches apply to one batch's activations; step without patches or with "
                         "micro_batches = 1");
    }
  }
  std::map<std::string, Tensor> combined;
  for (int i = 0; i < micro_batches; ++i) {
    std::vector<Tensor> value(micro.values().size());
    for (const GraphInput& in : micro.inputs()) {
      Tensor& v = value[static_cast<std::size_t>(in.value)];
      if (const auto it = full.find(in.name); it != full.end()) {
        const std::int64_t rows = it->second.dim(0) / micro_batches;
        v = narrow(it->second, 0, i * rows, rows);
      } else if (in.name == kStepSeedInput) {
        v = seeds[static_cast<std::size_t>(i)];
      } else {
        v = shared.at(in.name);
      }
    }
    for (const Node& node : micro.nodes()) {
      std::vector<Tensor> args;
      args.reserve(node.inputs.size());
      for (const ValueId id : node.inputs) args.push_back(value[static_cast<std::size_t>(id)]);
      value[static_cast<std::size_t>(node.output)] = builder.emit(node.op, args, node.attrs, node.loc);
    }
    // Sums in micro-batch order: ((m1 + m2) + m3) + ..., so the bits do not depend on anything else.
    for (const GraphOutput& out : micro.outputs()) {
      const Tensor& v = value[static_cast<std::size_t>(out.value)];
      const auto [it, first] = combined.try_emplace(out.name, v);
      if (first) continue;
      switch (combine_of(out.name)) {
        case Combine::mean:
          it->second = it->second + v;
          break;
        case Combine::all_finite:
          it->second = minimum(it->second, v);
          break;
        case Combine::first:
          break;
      }
    }
  }
  for (const GraphOutput& out : micro.outputs()) {
    Tensor v = combined.at(out.name);
    if (combine_of(out.name) == Combine::mean) v = v / static_cast<double>(micro_batches);
    builder.output(out.name, v);
  }
  return builder.take();
}

}  // namespace tg::detail
