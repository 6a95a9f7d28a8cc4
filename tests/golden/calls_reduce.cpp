// Explicit golden calls of the reduce family (cases in tools/goldens/reduce.py): the front-end's
// forms, which the IR does not take. sum/mean/max/min take an optional `axes` list or one `axis`
// (neither: every axis), negative axes counting from the end, and an optional `keep_dims`;
// argmax/argmin take an optional `axis` (none: the flattened input) and `keep_dims`.
#include "golden_calls.h"
#include "tensorgrad/ir/ops/ids/reduce.h"

namespace tg::golden {

namespace {

using ReduceFn = Tensor (*)(const Tensor&, Axes, ReduceOptions, CallSite);
using ArgFn = Tensor (*)(const Tensor&, std::optional<std::int64_t>, ReduceOptions, CallSite);

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

void add_calls(CallEntries& t) {
  t["sum"] = reduce_call("sum", sum);
  t["mean"] = reduce_call("mean", mean);
  t["max"] = reduce_call("max", max);
  t["min"] = reduce_call("min", min);
  t["argmax"] = arg_call("argmax", argmax);
  t["argmin"] = arg_call("argmin", argmin);
}

const CallRegistration kCalls("reduce", add_calls);

}  // namespace

}  // namespace tg::golden
