// Explicit golden calls of the elementwise_binary family (cases in tools/goldens/elementwise_binary.py).
// Every two-input op of the family, taken from the registry, also accepts the front-end's scalar
// operand: one input and a scalar attribute `rhs` (x op rhs) or `lhs` (lhs op x), which becomes a
// 0-d constant of the input's dtype, rounded to it, as the front-end's. where takes a scalar
// `if_true` or `if_false` the same way.
#include "golden_calls.h"
#include "tensorgrad/ir/ops/ids/elementwise_binary.h"

namespace tg::golden {

namespace {

constexpr std::string_view kFamily = "elementwise_binary";

Tensor scalar_operand_call(OpId op, const std::vector<Tensor>& in, const Attrs& a) {
  const std::optional<double> lhs = optional_number(a, "lhs");
  const std::optional<double> rhs = optional_number(a, "rhs");
  if (!lhs && !rhs) return emit_op(op, in, a);
  const std::string name(op_name(op));
  if (lhs && rhs) throw Error("golden call '" + name + "' takes a scalar `lhs` or `rhs`, not both");
  require_inputs(in, 1, name);
  // As the front-end's scalar operand (frontend.cpp, as_tensor): a 0-d constant of the tensor
  // operand's dtype, the value rounded to it (f32 for an f32 case, as tg::scalar).
  const DType dtype = in[0].dtype();
  const Tensor constant = full(Shape{}, round_to_dtype(lhs ? *lhs : *rhs, dtype), dtype);
  if (lhs) return emit_op(op, {constant, in[0]}, {});
  return emit_op(op, {in[0], constant}, {});
}

// where(c, a, b), or where(c, x) with a scalar `if_true` or `if_false` attribute.
Tensor where_call(const std::vector<Tensor>& in, const Attrs& a) {
  if (in.size() == 3) return where(in[0], in[1], in[2]);
  require_inputs(in, 2, "where");
  if (const auto t = optional_number(a, "if_true")) return where(in[0], *t, in[1]);
  return where(in[0], in[1], number(a, "if_false"));
}

void add_calls(CallEntries& t) {
  for (const OpId op : all_ops()) {
    if (op_family(op) != kFamily || op_def(op).arity != 2) continue;
    t[std::string(op_name(op))] = [op](const std::vector<Tensor>& in, const Attrs& a) {
      return scalar_operand_call(op, in, a);
    };
  }
  t["where"] = where_call;
}

const CallRegistration kCalls(std::string(kFamily), add_calls);

}  // namespace

}  // namespace tg::golden
