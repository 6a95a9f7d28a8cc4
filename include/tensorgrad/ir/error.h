#pragma once
// Typed errors. Everything tensorgrad throws derives from tg::Error, so a caller can catch one type;
// the subclasses say which stage refused the input.
#include <cstddef>
#include <stdexcept>
#include <string>
#include <vector>

#include "tensorgrad/ir/shape.h"
#include "tensorgrad/ir/source_loc.h"

namespace tg {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A shape rule refused its inputs, at trace time or in the verifier. The message names the op, the
// input types, the rule broken and the user's call site.
class ShapeError : public Error {
 public:
  ShapeError(std::string op, std::vector<TensorType> inputs, std::string rule, SourceLoc loc);
  const std::string& op() const { return op_; }
  const std::vector<TensorType>& inputs() const { return inputs_; }
  const std::string& rule() const { return rule_; }
  const SourceLoc& location() const { return loc_; }

 private:
  std::string op_;
  std::vector<TensorType> inputs_;
  std::string rule_;
  SourceLoc loc_;
};

// Malformed graph text: the message carries the 1-based line and column.
class ParseError : public Error {
 public:
  ParseError(std::string what, std::size_t line, std::size_t column);
  std::size_t line() const { return line_; }
  std::size_t column() const { return column_; }

 private:
  std::size_t line_;
  std::size_t column_;
};

// The verifier rejected a graph (dangling value, wrong attribute, shape mismatch, ...).
class VerifyError : public Error {
 public:
  using Error::Error;
};

// Running a graph failed: missing or misshapen inputs, or a kernel refused a value.
class RuntimeError : public Error {
 public:
  using Error::Error;
};

// Compiling was refused because of what the caller asked for: a training spec (compile / attach /
// replace_model: an input the loss reads but nobody declared, a non-scalar loss, a model without
// params, ...) or a graph's options on a backend (a writeback or device output naming no output,
// commit_if_finite on a non-float output, an op or operand layout the backend has no kernel for). The message names
// the input, param, output or op that is wrong.
class CompileError : public Error {
 public:
  using Error::Error;
};

// Thrown by shape rules (and infer_type) with just the rule that was broken; the builder, the
// parser and the verifier catch it and rethrow an error that adds the op, the inputs and the call
// site. It derives from Error so that nothing tensorgrad throws escapes a catch of tg::Error.
class RuleBroken : public Error {
 public:
  explicit RuleBroken(std::string broken) : Error(broken), rule(std::move(broken)) {}
  std::string rule;
};
[[noreturn]] void rule_broken(std::string rule);

}  // namespace tg
