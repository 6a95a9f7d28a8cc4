// Shape-rule helpers and the front-end plumbing shared by every op family.
#include <algorithm>

#include "rules.h"
#include "tensorgrad/ir/low_precision.h"
#include "tensorgrad/ir/ops/ids/creation.h"

namespace tg::rules {

Shape broadcast_shapes(std::span<const Shape> shapes) {
  std::size_t rank = 0;
  for (const auto& s : shapes) rank = std::max(rank, s.size());
  Shape out(rank, 1);
  for (std::size_t k = 0; k < rank; ++k) {  // k counts axes from the end
    for (const auto& s : shapes) {
      if (k >= s.size()) continue;
      const auto d = s[s.size() - 1 - k];
      auto& o = out[rank - 1 - k];
      if (d == o || d == 1) continue;
      if (o == 1) {
        o = d;
        continue;
      }
      std::string listed;
      for (const auto& t : shapes) listed += (listed.empty() ? "" : " and ") + shape_to_string(t);
      rule_broken("shapes " + listed + " do not broadcast: axis -" + std::to_string(k + 1) + " has sizes " +
                  std::to_string(o) + " and " + std::to_string(d));
    }
  }
  return out;
}

Shape broadcast_shapes(const Shape& a, const Shape& b) {
  const Shape both[] = {a, b};
  return broadcast_shapes(both);
}

std::int64_t normalize_axis(std::int64_t axis, std::int64_t rank) {
  const auto a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= rank) {
    rule_broken("axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
  }
  return a;
}

std::vector<std::int64_t> normalize_axes(std::span<const std::int64_t> axes, std::int64_t rank) {
  std::vector<std::int64_t> out;
  for (auto a : axes) out.push_back(normalize_axis(a, rank));
  std::sort(out.begin(), out.end());
  if (std::adjacent_find(out.begin(), out.end()) != out.end()) {
    rule_broken("axes " + axes_to_string(axes) + " name the same axis twice");
  }
  return out;
}

void require_dtype(const TensorType& t, DType dtype, std::string_view what) {
  if (t.dtype != dtype) {
    rule_broken(std::string(what) + " must be " + std::string(dtype_name(dtype)) + ", got " + t.to_string());
  }
}

void require_same_dtype(std::span<const TensorType> inputs) {
  for (const auto& t : inputs) {
    if (t.dtype != inputs.front().dtype) {
      rule_broken("inputs must have the same dtype, got " + inputs.front().to_string() + " and " + t.to_string());
    }
  }
}

void require_arity(std::span<const TensorType> inputs, std::size_t n) {
  if (inputs.size() != n) {
    rule_broken("takes " + std::to_string(n) + " input(s), got " + std::to_string(inputs.size()));
  }
}

std::string axes_to_string(std::span<const std::int64_t> axes) {
  std::string s = "[";
  for (std::size_t i = 0; i < axes.size(); ++i) s += (i ? "," : "") + std::to_string(axes[i]);
  return s + "]";
}

ValueDomain any_value_domain(DType dtype) {
  switch (dtype) {
    case DType::f32:
    case DType::f16:
    case DType::bf16:
      return ValueDomain::real_range(-2, 2);
    case DType::i32:
      return ValueDomain{ValueDomain::Kind::index, -8, 8, 0, false};
    case DType::boolean:
      return ValueDomain{ValueDomain::Kind::boolean, 0, 1, 0, false};
  }
  return ValueDomain::real_range(-2, 2);
}

}  // namespace tg::rules

namespace tg::frontend {

SourceLoc site(const CallSite& loc) { return SourceLoc::from(loc); }

GraphBuilder& builder_for(std::initializer_list<const Operand*> operands) {
  for (const Operand* op : operands) {
    if (const auto* t = std::get_if<Tensor>(&op->value())) return t->builder();
  }
  return current_builder();
}

Tensor as_tensor(const Operand& operand, GraphBuilder& builder, const SourceLoc& loc, DType dtype) {
  if (const auto* t = std::get_if<Tensor>(&operand.value())) return *t;
  // The constant is a value of its dtype: round it once here, so the f64 oracle and the f32 and
  // 16-bit backends see the same number.
  const double value = round_to_dtype(std::get<double>(operand.value()), dtype);
  Attrs attrs{{"dtype", dtype}, {"shape", std::vector<std::int64_t>{}}, {"value", value}};
  return builder.emit(op::Full, {}, std::move(attrs), loc);
}

DType scalar_dtype(std::initializer_list<const Operand*> operands) {
  for (const Operand* op : operands) {
    const auto* t = std::get_if<Tensor>(&op->value());
    if (t && is_float(t->dtype())) return t->dtype();
  }
  return DType::f32;
}

Tensor exact_constant(GraphBuilder& builder, double value, DType dtype, const CallSite& loc) {
  // f32 keeps the double: the f32 backends round it when they fill the buffer. A 16-bit constant is
  // a value of its dtype, rounded here.
  if (is_low_precision(dtype)) value = round_to_dtype(value, dtype);
  Attrs attrs{{"dtype", dtype}, {"shape", std::vector<std::int64_t>{}}, {"value", value}};
  return builder.emit(op::Full, {}, std::move(attrs), site(loc));
}

Tensor emit(OpId op, std::initializer_list<Tensor> inputs, Attrs attrs, const SourceLoc& loc) {
  GraphBuilder& builder = inputs.size() ? inputs.begin()->builder() : current_builder();
  return builder.emit(op, std::span<const Tensor>(inputs.begin(), inputs.size()), std::move(attrs), loc);
}

Tensor emit(OpId op, std::initializer_list<Tensor> inputs, Attrs attrs, const CallSite& loc) {
  return emit(op, inputs, std::move(attrs), site(loc));
}

Tensor emit_binary(OpId op, const Operand& a, const Operand& b, const CallSite& loc) {
  GraphBuilder& builder = builder_for({&a, &b});
  const SourceLoc where = site(loc);
  const DType dtype = scalar_dtype({&a, &b});
  const Tensor inputs[] = {as_tensor(a, builder, where, dtype), as_tensor(b, builder, where, dtype)};
  return builder.emit(op, inputs, Attrs{}, where);
}

}  // namespace tg::frontend

namespace tg {

Tensor operator+(OperandAt a, OperandAt b) { return add(a.operand, b.operand, a.site); }
Tensor operator-(OperandAt a, OperandAt b) { return sub(a.operand, b.operand, a.site); }
Tensor operator*(OperandAt a, OperandAt b) { return mul(a.operand, b.operand, a.site); }
Tensor operator/(OperandAt a, OperandAt b) { return div(a.operand, b.operand, a.site); }
Tensor operator-(TensorAt x) { return neg(x.tensor, x.site); }

}  // namespace tg
