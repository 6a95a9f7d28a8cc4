// GraphBuilder, Tensor and the per-thread tracing context.
#include "tensorgrad/ir/tensor.h"

#include <vector>

#include "tensorgrad/ir/error.h"
#include "tensorgrad/ir/ops/op_def.h"

namespace tg {

namespace {
thread_local GraphBuilder* current_tracing_builder = nullptr;
}

GraphBuilder& Tensor::builder() const {
  if (!builder_) throw Error("use of an empty tg::Tensor (default-constructed, never assigned)");
  return *builder_;
}

const TensorType& Tensor::type() const { return builder().graph().type(id_); }

std::int64_t Tensor::dim(std::int64_t axis) const {
  const auto r = rank();
  const auto a = axis < 0 ? axis + r : axis;
  if (a < 0 || a >= r) {
    throw Error("axis " + std::to_string(axis) + " is out of range for a tensor of type " + type().to_string());
  }
  return shape()[static_cast<std::size_t>(a)];
}

Tensor GraphBuilder::input(std::string name, TensorType type, InputKind kind, std::source_location loc) {
  // Graph::add_input makes the same checks, but cannot know the caller's line; these say where.
  const SourceLoc where = SourceLoc::from(loc);
  if (graph_.find_input(name)) {
    throw Error("graph '" + graph_.name() + "' already has an input named '" + name + "' (called at " +
                where.to_string() + ")");
  }
  if (name == kStepSeedInput && type != TensorType{DType::i32, {}}) {
    throw Error(std::string("input '") + kStepSeedInput + "' is reserved for the step seed and must be i32[], not " +
                type.to_string() + " (called at " + where.to_string() + ")");
  }
  if (std::string problem = shape_limit_problem(type.shape); !problem.empty()) {
    throw ShapeError("input '" + name + "'", {type}, problem, where);
  }
  return Tensor(this, graph_.add_input(std::move(name), kind, std::move(type)));
}

void GraphBuilder::output(std::string name, const Tensor& value) {
  if (&value.builder() != this) throw Error("output '" + name + "' is a tensor of another graph");
  graph_.add_output(std::move(name), value.id());
}

Tensor GraphBuilder::emit(OpId op, std::span<const Tensor> inputs, Attrs attrs, const SourceLoc& loc) {
  const SourceLoc& where = location_override_ ? *location_override_ : loc;
  std::vector<TensorType> types;
  std::vector<ValueId> ids;
  types.reserve(inputs.size());
  ids.reserve(inputs.size());
  for (const Tensor& t : inputs) {
    if (&t.builder() != this) {
      throw ShapeError(std::string(op_name(op)), {}, "an input belongs to another graph being traced", where);
    }
    types.push_back(t.type());
    ids.push_back(t.id());
  }
  TensorType out;
  try {
    out = infer_type(op, attrs, types);
  } catch (const RuleBroken& broken) {
    throw ShapeError(std::string(op_name(op)), std::move(types), broken.rule, where);
  }
  return Tensor(this, graph_.add_node(op, std::move(ids), std::move(attrs), std::move(out), where));
}

Tensor GraphBuilder::step_seed() {
  if (auto existing = graph_.find_input(kStepSeedInput)) {
    if (graph_.type(*existing) != TensorType{DType::i32, {}}) {
      throw Error(std::string("input '") + kStepSeedInput + "' is reserved for the step seed and must be i32[]");
    }
    return Tensor(this, *existing);
  }
  return input(kStepSeedInput, TensorType{DType::i32, {}});
}

TracingScope::TracingScope(GraphBuilder& builder) : previous_(current_tracing_builder) {
  current_tracing_builder = &builder;
}

TracingScope::~TracingScope() { current_tracing_builder = previous_; }

GraphBuilder& current_builder() {
  if (!current_tracing_builder) {
    throw Error("no graph is being traced: create a tg::GraphBuilder and a tg::TracingScope first");
  }
  return *current_tracing_builder;
}

}  // namespace tg
