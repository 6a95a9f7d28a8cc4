// Golden calls of the oracle-core ops (cases in tools/goldens/core.py). Binary ops take two inputs,
// or one input and a scalar attribute `rhs` (x op rhs) or `lhs` (lhs op x); reductions take an
// optional `axes` list or `axis` integer and an optional `keep_dims`.
#include "golden_calls.h"

namespace tg::golden {

namespace {

using BinaryFn = Tensor (*)(Operand, Operand, CallSite);
using UnaryFn = Tensor (*)(const Tensor&, CallSite);
using ReduceFn = Tensor (*)(const Tensor&, Axes, ReduceOptions, CallSite);
using ArgFn = Tensor (*)(const Tensor&, std::optional<std::int64_t>, ReduceOptions, CallSite);
using SoftmaxFn = Tensor (*)(const Tensor&, std::int64_t, CallSite);

GoldenCall binary_call(std::string name, BinaryFn fn) {
  return [name, fn](const std::vector<Tensor>& in, const Attrs& a) {
    const CallSite here = CallSite::current();
    if (in.size() == 2) return fn(in[0], in[1], here);
    require_inputs(in, 1, name);
    if (const auto lhs = optional_number(a, "lhs")) return fn(*lhs, in[0], here);
    return fn(in[0], number(a, "rhs"), here);
  };
}

GoldenCall unary_call(std::string name, UnaryFn fn) {
  return [name, fn](const std::vector<Tensor>& in, const Attrs&) {
    require_inputs(in, 1, name);
    return fn(in[0], CallSite::current());
  };
}

// `axes` (a list) or `axis` (one integer); neither: every axis.
Axes reduce_axes(const Attrs& a) {
  if (a.has("axes")) return Axes(a.ints("axes"));
  if (const auto axis = optional_integer(a, "axis")) return Axes(*axis);
  return Axes::all();
}

GoldenCall reduce_call(std::string name, ReduceFn fn) {
  return [name, fn](const std::vector<Tensor>& in, const Attrs& a) {
    require_inputs(in, 1, name);
    return fn(in[0], reduce_axes(a), {.keep_dims = boolean_or(a, "keep_dims", false)}, CallSite::current());
  };
}

GoldenCall arg_call(std::string name, ArgFn fn) {
  return [name, fn](const std::vector<Tensor>& in, const Attrs& a) {
    require_inputs(in, 1, name);
    return fn(in[0], optional_integer(a, "axis"), {.keep_dims = boolean_or(a, "keep_dims", false)},
              CallSite::current());
  };
}

GoldenCall softmax_call(std::string name, SoftmaxFn fn) {
  return [name, fn](const std::vector<Tensor>& in, const Attrs& a) {
    require_inputs(in, 1, name);
    return fn(in[0], optional_integer(a, "axis").value_or(-1), CallSite::current());
  };
}

// where(c, a, b), or where(c, x) with a scalar `if_true` or `if_false` attribute.
Tensor where_call(const std::vector<Tensor>& in, const Attrs& a) {
  if (in.size() == 3) return where(in[0], in[1], in[2]);
  require_inputs(in, 2, "where");
  if (const auto t = optional_number(a, "if_true")) return where(in[0], *t, in[1]);
  return where(in[0], in[1], number(a, "if_false"));
}

void register_elementwise(CallTable& t) {
  t["add"] = binary_call("add", add);
  t["sub"] = binary_call("sub", sub);
  t["mul"] = binary_call("mul", mul);
  t["div"] = binary_call("div", div);
  t["minimum"] = binary_call("minimum", minimum);
  t["maximum"] = binary_call("maximum", maximum);
  t["less"] = binary_call("less", less);
  t["greater"] = binary_call("greater", greater);
  t["equal"] = binary_call("equal", equal);
  t["where"] = where_call;
  const std::pair<const char*, UnaryFn> unary[] = {
      {"neg", neg},         {"abs", abs},   {"square", square}, {"sqrt", sqrt}, {"rsqrt", rsqrt},
      {"exp", exp},         {"log", log},   {"sin", sin},       {"cos", cos},   {"tanh", tanh},
      {"sigmoid", sigmoid}, {"relu", relu}, {"gelu", gelu},     {"silu", silu}, {"stop_gradient", stop_gradient}};
  for (const auto& [name, fn] : unary) t[name] = unary_call(name, fn);
  t["clamp"] = [](const std::vector<Tensor>& in, const Attrs& a) {
    require_inputs(in, 1, "clamp");
    return clamp(in[0], number(a, "lo"), number(a, "hi"));
  };
}

void register_reductions(CallTable& t) {
  t["sum"] = reduce_call("sum", sum);
  t["mean"] = reduce_call("mean", mean);
  t["max"] = reduce_call("max", max);
  t["min"] = reduce_call("min", min);
  t["argmax"] = arg_call("argmax", argmax);
  t["argmin"] = arg_call("argmin", argmin);
  t["softmax"] = softmax_call("softmax", softmax);
  t["log_softmax"] = softmax_call("log_softmax", log_softmax);
  t["matmul"] = [](const std::vector<Tensor>& in, const Attrs&) {
    require_inputs(in, 2, "matmul");
    return matmul(in[0], in[1]);
  };
}

void register_layout(CallTable& t) {
  t["reshape"] = [](const std::vector<Tensor>& in, const Attrs& a) {
    require_inputs(in, 1, "reshape");
    return reshape(in[0], a.ints("shape"));
  };
  t["permute"] = [](const std::vector<Tensor>& in, const Attrs& a) {
    require_inputs(in, 1, "permute");
    return permute(in[0], a.ints("perm"));
  };
  t["swap_axes"] = [](const std::vector<Tensor>& in, const Attrs& a) {
    require_inputs(in, 1, "swap_axes");
    return swap_axes(in[0], a.integer("axis0"), a.integer("axis1"));
  };
  t["broadcast_to"] = [](const std::vector<Tensor>& in, const Attrs& a) {
    require_inputs(in, 1, "broadcast_to");
    return broadcast_to(in[0], a.ints("shape"));
  };
  t["sum_to_shape"] = [](const std::vector<Tensor>& in, const Attrs& a) {
    require_inputs(in, 1, "sum_to_shape");
    return sum_to_shape(in[0], a.ints("shape"));
  };
}

// Creation calls have no inputs: they append to the runner's tracing scope.
void register_creation(CallTable& t) {
  t["full"] = [](const std::vector<Tensor>& in, const Attrs& a) {
    require_inputs(in, 0, "full");
    return full(a.ints("shape"), number(a, "value"), dtype_or(a, "dtype", DType::f32));
  };
  t["zeros"] = [](const std::vector<Tensor>& in, const Attrs& a) {
    require_inputs(in, 0, "zeros");
    return zeros(a.ints("shape"), dtype_or(a, "dtype", DType::f32));
  };
  t["ones"] = [](const std::vector<Tensor>& in, const Attrs& a) {
    require_inputs(in, 0, "ones");
    return ones(a.ints("shape"), dtype_or(a, "dtype", DType::f32));
  };
  t["arange"] = [](const std::vector<Tensor>& in, const Attrs& a) {
    require_inputs(in, 0, "arange");
    return arange(a.integer("n"), dtype_or(a, "dtype", DType::i32));
  };
  t["scalar"] = [](const std::vector<Tensor>& in, const Attrs& a) {
    require_inputs(in, 0, "scalar");
    return scalar(number(a, "value"));
  };
}

}  // namespace

void register_core_calls(CallTable& table) {
  register_elementwise(table);
  register_reductions(table);
  register_layout(table);
  register_creation(table);
}

}  // namespace tg::golden
