#pragma once
// The tracing front-end's core: a GraphBuilder (the tracing context) and the Tensor handle that
// ops append nodes through. The free functions and operators are in tensorgrad/ir/ops/api.h.
#include <optional>
#include <source_location>
#include <span>
#include <string>

#include "tensorgrad/ir/graph.h"

namespace tg {

class GraphBuilder;

inline constexpr const char* kStepSeedInput = "step_seed";

// A value in the graph being traced. Cheap to copy; valid while its builder lives.
class Tensor {
 public:
  Tensor() = default;
  Tensor(GraphBuilder* builder, ValueId id) : builder_(builder), id_(id) {}

  bool valid() const { return builder_ != nullptr; }
  GraphBuilder& builder() const;
  ValueId id() const { return id_; }
  const TensorType& type() const;
  DType dtype() const { return type().dtype; }
  const Shape& shape() const { return type().shape; }
  std::int64_t rank() const { return type().rank(); }
  std::int64_t size() const { return type().size(); }
  // Length of one axis; negative axes count from the end.
  std::int64_t dim(std::int64_t axis) const;

 private:
  GraphBuilder* builder_ = nullptr;
  ValueId id_ = -1;
};

class GraphBuilder {
 public:
  explicit GraphBuilder(std::string name = "main") : graph_(std::move(name)) {}
  GraphBuilder(const GraphBuilder&) = delete;
  GraphBuilder& operator=(const GraphBuilder&) = delete;

  // A named graph input. Refuses a duplicate name, the reserved kStepSeedInput with another type than
  // i32[], and a shape past the size limits (ShapeError); each error names the caller's line.
  Tensor input(std::string name, TensorType type, InputKind kind = InputKind::data,
               std::source_location loc = std::source_location::current());
  Tensor param(std::string name, TensorType type, std::source_location loc = std::source_location::current()) {
    return input(std::move(name), std::move(type), InputKind::param, loc);
  }
  void output(std::string name, const Tensor& value);

  // Runs the op's shape rule and appends the node; throws ShapeError (op, input types, rule, call
  // site) when the rule refuses.
  Tensor emit(OpId op, std::span<const Tensor> inputs, Attrs attrs, const SourceLoc& loc);
  Tensor wrap(ValueId id) { return Tensor(this, id); }

  // The step seed of stochastic ops: a 0-d i32 data input named kStepSeedInput, created on first use.
  // A runtime feeds a new value each step; within one run every randn/dropout draw is keyed by it.
  Tensor step_seed();
  // A fresh salt for each stochastic call traced, so two dropout calls draw different masks.
  std::int64_t next_salt() { return next_salt_++; }

  const Graph& graph() const { return graph_; }
  Graph& mutable_graph() { return graph_; }
  Graph take() { return std::move(graph_); }

  // While set, emitted nodes carry this location instead of their caller's: autodiff points every
  // gradient node at the forward call it differentiates.
  void set_location_override(std::optional<SourceLoc> loc) { location_override_ = std::move(loc); }

 private:
  Graph graph_;
  std::optional<SourceLoc> location_override_;
  std::int64_t next_salt_ = 0;
};

// Makes a builder this thread's current tracing context for as long as the scope lives; ops with no
// tensor inputs (zeros, arange, scalars) append to it. Scopes nest.
class TracingScope {
 public:
  explicit TracingScope(GraphBuilder& builder);
  ~TracingScope();
  TracingScope(const TracingScope&) = delete;
  TracingScope& operator=(const TracingScope&) = delete;

 private:
  GraphBuilder* previous_;
};

// The innermost active TracingScope's builder; throws tg::Error when none is active.
GraphBuilder& current_builder();

}  // namespace tg
