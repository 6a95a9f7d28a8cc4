// dtype names, shapes, tensor types, source locations, errors.
#include <sstream>

#include "tensorgrad/ir/dtype.h"
#include "tensorgrad/ir/error.h"
#include "tensorgrad/ir/shape.h"
#include "tensorgrad/ir/source_loc.h"

namespace tg {

std::string_view dtype_name(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return "f32";
    case DType::i32:
      return "i32";
    case DType::boolean:
      return "bool";
    case DType::f16:
      return "f16";
    case DType::bf16:
      return "bf16";
  }
  return "?";
}

std::size_t dtype_bytes(DType dtype) {
  switch (dtype) {
    case DType::f32:
    case DType::i32:
      return 4;
    case DType::boolean:
      return 1;
    case DType::f16:
    case DType::bf16:
      return 2;
  }
  return 4;
}

double unit_roundoff(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return 0x1p-24;
    case DType::f16:
      return 0x1p-11;
    case DType::bf16:
      return 0x1p-8;
    case DType::i32:
    case DType::boolean:
      return 0.0;
  }
  return 0.0;
}

std::optional<DType> parse_dtype(std::string_view text) {
  if (text == "f32") return DType::f32;
  if (text == "i32") return DType::i32;
  if (text == "bool") return DType::boolean;
  if (text == "f16") return DType::f16;
  if (text == "bf16") return DType::bf16;
  return std::nullopt;
}

std::string shape_limit_problem(const Shape& shape) {
  std::int64_t extent = 1;  // the product of the dims, a 0 dim counted as 1
  for (std::size_t i = 0; i < shape.size(); ++i) {
    const std::int64_t d = shape[i];
    if (d < 0)
      return "shape " + shape_to_string(shape) + " has a negative dimension " + std::to_string(d) + " (axis " +
             std::to_string(i) + ")";
    // Compare by division, so a huge d cannot overflow the test itself.
    if (d > 1 && extent > kMaxElements / d) {
      return "shape " + shape_to_string(shape) + " has too many elements: more than " + std::to_string(kMaxElements) +
             " (2^48), the limit of one tensor";
    }
    if (d > 1) extent *= d;
  }
  return {};
}

void check_shape_limits(const Shape& shape) {
  if (std::string problem = shape_limit_problem(shape); !problem.empty()) rule_broken(std::move(problem));
}

namespace {
[[noreturn]] void overflow(std::string_view what, std::int64_t a, char op, std::int64_t b) {
  rule_broken(std::string(what) + " overflows int64 (" + std::to_string(a) + " " + op + " " + std::to_string(b) + ")");
}
}  // namespace

std::int64_t checked_add(std::int64_t a, std::int64_t b, std::string_view what) {
  std::int64_t out = 0;
  if (__builtin_add_overflow(a, b, &out)) overflow(what, a, '+', b);
  return out;
}

std::int64_t checked_sub(std::int64_t a, std::int64_t b, std::string_view what) {
  std::int64_t out = 0;
  if (__builtin_sub_overflow(a, b, &out)) overflow(what, a, '-', b);
  return out;
}

std::int64_t checked_mul(std::int64_t a, std::int64_t b, std::string_view what) {
  std::int64_t out = 0;
  if (__builtin_mul_overflow(a, b, &out)) overflow(what, a, '*', b);
  return out;
}

std::int64_t num_elements(const Shape& shape) {
  std::int64_t extent = 1;
  bool empty = false;
  for (auto d : shape) {
    // The same test as shape_limit_problem, inline: this runs in kernels' hot paths.
    if (d < 0 || (d > 1 && extent > kMaxElements / d)) check_shape_limits(shape);
    if (d == 0) empty = true;
    if (d > 1) extent *= d;
  }
  return empty ? 0 : extent;
}

std::string shape_to_string(const Shape& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ',';
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

std::vector<std::int64_t> row_major_strides(const Shape& shape) {
  std::vector<std::int64_t> strides(shape.size(), 1);
  for (std::size_t i = shape.size(); i-- > 1;) strides[i - 1] = strides[i] * shape[i];
  return strides;
}

AxisSplit split_at_axis(const Shape& shape, std::int64_t axis) {
  AxisSplit s;
  for (std::int64_t a = 0; a < static_cast<std::int64_t>(shape.size()); ++a) {
    const std::int64_t d = shape[static_cast<std::size_t>(a)];
    if (a < axis) s.outer *= d;
    if (a == axis) s.length = d;
    if (a > axis) s.inner *= d;
  }
  return s;
}

std::string TensorType::to_string() const { return std::string(dtype_name(dtype)) + shape_to_string(shape); }

SourceLoc SourceLoc::from(const std::source_location& loc) {
  return SourceLoc{loc.file_name(), loc.line(), loc.column()};
}

std::string SourceLoc::to_string() const {
  if (!known()) return "<unknown>";
  return file + ":" + std::to_string(line);
}

namespace {
std::string shape_error_message(const std::string& op, const std::vector<TensorType>& inputs, const std::string& rule,
                                const SourceLoc& loc) {
  std::ostringstream out;
  out << op << "(";
  for (std::size_t i = 0; i < inputs.size(); ++i) out << (i ? ", " : "") << inputs[i].to_string();
  out << "): " << rule << " (called at " << loc.to_string() << ")";
  return out.str();
}
}  // namespace

ShapeError::ShapeError(std::string op, std::vector<TensorType> inputs, std::string rule, SourceLoc loc)
    : Error(shape_error_message(op, inputs, rule, loc)),
      op_(std::move(op)),
      inputs_(std::move(inputs)),
      rule_(std::move(rule)),
      loc_(std::move(loc)) {}

ParseError::ParseError(std::string what, std::size_t line, std::size_t column)
    : Error("parse error at line " + std::to_string(line) + ", column " + std::to_string(column) + ": " + what),
      line_(line),
      column_(column) {}

void rule_broken(std::string rule) { throw RuleBroken{std::move(rule)}; }

}  // namespace tg
