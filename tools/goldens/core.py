"""Golden cases of the oracle-core ops: elementwise, reductions, softmax, matmul, layout, creation.

Calls and their attributes are those of tests/golden/calls_core.cpp:
- binary ops (add ... equal) take two inputs, or one input and a scalar attribute `rhs` (x op rhs)
  or `lhs` (lhs op x); where takes (condition, if_true, if_false) or a scalar `if_true`/`if_false`;
- sum/mean/max/min: optional `axes` (list) or `axis` (one integer), optional `keep_dims`;
  argmax/argmin: optional `axis`, optional `keep_dims`; softmax/log_softmax: optional `axis`;
- creation ops take `dtype` as a string ("f32", "i32", "bool").
Scalars and constants are float32 values (0.5, -1.25, ...): the front-end rounds them to f32, so a
value like 0.1 would differ from PyTorch's float64 by more than the golden tolerance.
"""

import torch
import torch.nn.functional as F

from goldens.spec import Case, boolean, f32

POSITIVE = dict(lo=0.5, hi=3.0)


def sum_to(x, shape):
    """tensorgrad's sum_to_shape: sums the leading axes and the axes where `shape` has 1."""
    lead = x.dim() - len(shape)
    out = x.sum(dim=tuple(range(lead))) if lead > 0 else x
    axes = tuple(i for i, d in enumerate(shape) if d == 1 and out.shape[i] != 1)
    return out.sum(dim=axes, keepdim=True) if axes else out


def binary_cases():
    cases = [
        Case("add_same_shape", "add", {}, {"a": f32([3, 4]), "b": f32([3, 4])}, torch.add),
        Case("add_broadcast_rank3", "add", {}, {"a": f32([2, 3, 4]), "b": f32([3, 1])}, torch.add),
        Case("add_broadcast_both_sides", "add", {}, {"a": f32([4, 1]), "b": f32([1, 5])}, torch.add),
        Case("add_scalar_rhs", "add", {"rhs": 0.5}, {"x": f32([2, 3])}, lambda x: x + 0.5),
        Case("add_0d_operand", "add", {}, {"a": f32([]), "b": f32([2, 3])}, torch.add),
        Case("sub_broadcast", "sub", {}, {"a": f32([2, 3]), "b": f32([3])}, torch.sub),
        Case("sub_scalar_lhs", "sub", {"lhs": 2.0}, {"x": f32([3, 2])}, lambda x: 2.0 - x),
        Case("sub_scalar_rhs", "sub", {"rhs": -1.25}, {"x": f32([5])}, lambda x: x - (-1.25)),
        Case("mul_broadcast", "mul", {}, {"a": f32([2, 1, 4]), "b": f32([3, 1])}, torch.mul),
        Case("mul_scalar_rhs", "mul", {"rhs": -1.5}, {"x": f32([2, 3])}, lambda x: x * -1.5),
        Case("div_broadcast", "div", {}, {"a": f32([3, 4]), "b": f32([4], **POSITIVE)}, torch.div),
        Case("div_negative_denominator", "div", {}, {"a": f32([2, 3]), "b": f32([2, 1], lo=-2.0, hi=-0.5)},
             torch.div),
        Case("div_scalar_lhs", "div", {"lhs": 1.0}, {"x": f32([4], lo=0.5, hi=2.0)}, lambda x: 1.0 / x),
        Case("div_scalar_rhs", "div", {"rhs": 4.0}, {"x": f32([2, 2])}, lambda x: x / 4.0),
        Case("minimum_broadcast", "minimum", {}, {"a": f32([3, 4], untied=True), "b": f32([4], untied=True)},
             torch.minimum),
        Case("minimum_scalar_rhs", "minimum", {"rhs": 0.25}, {"x": f32([2, 5], untied=True)},
             lambda x: torch.clamp(x, max=0.25)),
        Case("maximum_broadcast", "maximum", {}, {"a": f32([2, 1, 3], untied=True), "b": f32([4, 1], untied=True)},
             torch.maximum),
        Case("maximum_scalar_lhs", "maximum", {"lhs": 0.0}, {"x": f32([6], untied=True)},
             lambda x: torch.clamp(x, min=0.0)),
        Case("less_broadcast", "less", {}, {"a": f32([3, 4]), "b": f32([4])}, torch.lt),
        Case("less_scalar_rhs", "less", {"rhs": 0.5}, {"x": f32([2, 3])}, lambda x: x < 0.5),
        Case("greater_broadcast", "greater", {}, {"a": f32([2, 1]), "b": f32([1, 3])}, torch.gt),
        Case("greater_scalar_lhs", "greater", {"lhs": 0.0}, {"x": f32([5])}, lambda x: 0.0 > x),
        Case("equal_small_integers", "equal", {},
             {"a": f32([3, 4], lo=0, hi=2, integral=True), "b": f32([4], lo=0, hi=2, integral=True)}, torch.eq),
        Case("equal_scalar_rhs", "equal", {"rhs": 1.0}, {"x": f32([2, 4], lo=0, hi=2, integral=True)},
             lambda x: x == 1.0),
        Case("where_same_shape", "where", {}, {"c": boolean([3, 4]), "a": f32([3, 4]), "b": f32([3, 4])},
             torch.where),
        Case("where_three_way_broadcast", "where", {}, {"c": boolean([3, 1]), "a": f32([1, 4]), "b": f32([])},
             torch.where),
        Case("where_scalar_false", "where", {"if_false": -1.0}, {"c": boolean([2, 3]), "x": f32([2, 3])},
             lambda c, x: torch.where(c, x, torch.tensor(-1.0))),
        Case("where_scalar_true", "where", {"if_true": 0.5}, {"c": boolean([4]), "x": f32([2, 4])},
             lambda c, x: torch.where(c, torch.tensor(0.5), x)),
    ]
    return cases


def unary_cases():
    kink = dict(untied=True)
    return [
        Case("neg", "neg", {}, {"x": f32([3, 4])}, torch.neg),
        Case("abs", "abs", {}, {"x": f32([3, 5], **kink)}, torch.abs),
        Case("square", "square", {}, {"x": f32([4, 3])}, torch.square),
        Case("sqrt", "sqrt", {}, {"x": f32([2, 5], **POSITIVE)}, torch.sqrt),
        Case("rsqrt", "rsqrt", {}, {"x": f32([2, 5], **POSITIVE)}, torch.rsqrt),
        Case("exp", "exp", {}, {"x": f32([2, 3, 4])}, torch.exp),
        Case("log", "log", {}, {"x": f32([3, 4], lo=0.1, hi=4.0)}, torch.log),
        Case("sin", "sin", {}, {"x": f32([3, 4], lo=-4.0, hi=4.0)}, torch.sin),
        Case("cos", "cos", {}, {"x": f32([3, 4], lo=-4.0, hi=4.0)}, torch.cos),
        Case("tanh", "tanh", {}, {"x": f32([3, 4], lo=-3.0, hi=3.0)}, torch.tanh),
        Case("tanh_0d", "tanh", {}, {"x": f32([])}, torch.tanh),
        Case("sigmoid", "sigmoid", {}, {"x": f32([3, 4], lo=-5.0, hi=5.0)}, torch.sigmoid),
        Case("relu", "relu", {}, {"x": f32([4, 5], **kink)}, torch.relu),
        Case("gelu_tanh", "gelu", {}, {"x": f32([4, 5], lo=-4.0, hi=4.0)},
             lambda x: F.gelu(x, approximate="tanh")),
        Case("silu", "silu", {}, {"x": f32([4, 5], lo=-4.0, hi=4.0)}, F.silu),
        Case("clamp", "clamp", {"lo": -0.5, "hi": 0.75}, {"x": f32([4, 5], untied=True)},
             lambda x: torch.clamp(x, -0.5, 0.75)),
        Case("clamp_lower_only", "clamp", {"lo": 0.0, "hi": 100.0}, {"x": f32([3, 3], untied=True)},
             lambda x: torch.clamp(x, 0.0, 100.0)),
        Case("stop_gradient", "stop_gradient", {}, {"x": f32([2, 3])}, lambda x: x.detach()),
    ]


def reduction_cases():
    return [
        Case("sum_all", "sum", {}, {"x": f32([3, 4])}, torch.sum),
        Case("sum_axis", "sum", {"axis": 1}, {"x": f32([2, 3, 4])}, lambda x: x.sum(dim=1)),
        Case("sum_negative_axis", "sum", {"axis": -1}, {"x": f32([2, 3, 4])}, lambda x: x.sum(dim=-1)),
        Case("sum_axes_keep_dims", "sum", {"axes": [0, 2], "keep_dims": True}, {"x": f32([2, 3, 4])},
             lambda x: x.sum(dim=(0, 2), keepdim=True)),
        Case("sum_0d", "sum", {}, {"x": f32([])}, torch.sum),
        Case("sum_long", "sum", {"axis": 0}, {"x": f32([1000, 2])}, lambda x: x.sum(dim=0)),
        Case("mean_all", "mean", {}, {"x": f32([3, 4])}, torch.mean),
        Case("mean_axes_keep_dims", "mean", {"axes": [1, 2], "keep_dims": True}, {"x": f32([2, 3, 4])},
             lambda x: x.mean(dim=(1, 2), keepdim=True)),
        Case("mean_negative_axis", "mean", {"axis": -2}, {"x": f32([2, 5, 3])}, lambda x: x.mean(dim=-2)),
        Case("max_all", "max", {}, {"x": f32([3, 4], untied=True)}, torch.amax),
        Case("max_axis", "max", {"axis": 1}, {"x": f32([3, 5], untied=True)}, lambda x: torch.amax(x, dim=1)),
        Case("max_axes_keep_dims", "max", {"axes": [0, 2], "keep_dims": True}, {"x": f32([2, 3, 4], untied=True)},
             lambda x: torch.amax(x, dim=(0, 2), keepdim=True)),
        Case("min_all", "min", {}, {"x": f32([3, 4], untied=True)}, torch.amin),
        Case("min_axis", "min", {"axis": 0}, {"x": f32([4, 3], untied=True)}, lambda x: torch.amin(x, dim=0)),
        Case("min_axes_keep_dims", "min", {"axes": [1], "keep_dims": True}, {"x": f32([2, 3, 4], untied=True)},
             lambda x: torch.amin(x, dim=1, keepdim=True)),
        Case("argmax_flat", "argmax", {}, {"x": f32([3, 4], untied=True)}, torch.argmax),
        Case("argmax_flat_keep_dims", "argmax", {"keep_dims": True}, {"x": f32([2, 3], untied=True)},
             lambda x: torch.argmax(x).reshape(1, 1)),
        Case("argmax_axis", "argmax", {"axis": 1}, {"x": f32([3, 5], untied=True)},
             lambda x: torch.argmax(x, dim=1)),
        Case("argmax_axis_keep_dims", "argmax", {"axis": -1, "keep_dims": True}, {"x": f32([2, 3, 4], untied=True)},
             lambda x: torch.argmax(x, dim=-1, keepdim=True)),
        Case("argmin_flat", "argmin", {}, {"x": f32([4, 3], untied=True)}, torch.argmin),
        Case("argmin_axis", "argmin", {"axis": 0}, {"x": f32([4, 3], untied=True)}, lambda x: torch.argmin(x, dim=0)),
        Case("argmin_axis_keep_dims", "argmin", {"axis": 1, "keep_dims": True}, {"x": f32([2, 3, 4], untied=True)},
             lambda x: torch.argmin(x, dim=1, keepdim=True)),
        Case("softmax_last_axis", "softmax", {}, {"x": f32([3, 5], lo=-4.0, hi=4.0)},
             lambda x: torch.softmax(x, dim=-1)),
        Case("softmax_axis0", "softmax", {"axis": 0}, {"x": f32([4, 3], lo=-4.0, hi=4.0)},
             lambda x: torch.softmax(x, dim=0)),
        Case("softmax_middle_axis_wide_range", "softmax", {"axis": 1}, {"x": f32([2, 6, 3], lo=-30.0, hi=30.0)},
             lambda x: torch.softmax(x, dim=1)),
        Case("log_softmax_last_axis", "log_softmax", {}, {"x": f32([3, 5], lo=-4.0, hi=4.0)},
             lambda x: torch.log_softmax(x, dim=-1)),
        Case("log_softmax_axis0", "log_softmax", {"axis": 0}, {"x": f32([4, 2, 3], lo=-4.0, hi=4.0)},
             lambda x: torch.log_softmax(x, dim=0)),
        Case("log_softmax_negative_axis", "log_softmax", {"axis": -2}, {"x": f32([2, 7, 2], lo=-20.0, hi=20.0)},
             lambda x: torch.log_softmax(x, dim=-2)),
    ]


def matmul_cases():
    return [
        Case("matmul_2d", "matmul", {}, {"a": f32([3, 4]), "b": f32([4, 5])}, torch.matmul),
        Case("matmul_lhs_leading_dims", "matmul", {}, {"a": f32([2, 3, 4]), "b": f32([4, 5])}, torch.matmul),
        Case("matmul_two_leading_dims", "matmul", {}, {"a": f32([2, 3, 2, 4]), "b": f32([4, 3])}, torch.matmul),
        Case("matmul_batched", "matmul", {}, {"a": f32([2, 3, 4]), "b": f32([2, 4, 2])}, torch.matmul),
        Case("matmul_batched_rank4", "matmul", {}, {"a": f32([2, 2, 3, 4]), "b": f32([2, 2, 4, 3])}, torch.matmul),
        Case("matmul_long_inner", "matmul", {}, {"a": f32([2, 256]), "b": f32([256, 3])}, torch.matmul),
        Case("matmul_vector_shapes", "matmul", {}, {"a": f32([1, 6]), "b": f32([6, 1])}, torch.matmul),
    ]


def layout_cases():
    return [
        Case("reshape", "reshape", {"shape": [4, 6]}, {"x": f32([2, 3, 4])}, lambda x: x.reshape(4, 6)),
        Case("reshape_infer_dim", "reshape", {"shape": [6, -1]}, {"x": f32([2, 3, 4])}, lambda x: x.reshape(6, -1)),
        Case("reshape_to_0d", "reshape", {"shape": []}, {"x": f32([1, 1])}, lambda x: x.reshape(())),
        Case("permute", "permute", {"perm": [2, 0, 1]}, {"x": f32([2, 3, 4])}, lambda x: x.permute(2, 0, 1)),
        Case("permute_negative", "permute", {"perm": [-1, 0, 1, 2]}, {"x": f32([2, 3, 1, 4])},
             lambda x: x.permute(3, 0, 1, 2)),
        Case("swap_axes", "swap_axes", {"axis0": 0, "axis1": 2}, {"x": f32([2, 3, 4])},
             lambda x: x.transpose(0, 2)),
        Case("swap_axes_negative", "swap_axes", {"axis0": -1, "axis1": -2}, {"x": f32([2, 3, 4])},
             lambda x: x.transpose(-1, -2)),
        Case("broadcast_to", "broadcast_to", {"shape": [2, 3, 4]}, {"x": f32([3, 1])},
             lambda x: torch.broadcast_to(x, (2, 3, 4))),
        Case("broadcast_to_from_0d", "broadcast_to", {"shape": [2, 2]}, {"x": f32([])},
             lambda x: torch.broadcast_to(x, (2, 2))),
        Case("sum_to_shape", "sum_to_shape", {"shape": [3, 1]}, {"x": f32([2, 3, 4])}, lambda x: sum_to(x, [3, 1])),
        Case("sum_to_shape_0d", "sum_to_shape", {"shape": []}, {"x": f32([2, 3])}, lambda x: sum_to(x, [])),
        Case("sum_to_shape_inner_ones", "sum_to_shape", {"shape": [2, 1, 4]}, {"x": f32([3, 2, 5, 4])},
             lambda x: sum_to(x, [2, 1, 4])),
    ]


def creation_cases():
    return [
        Case("full_f32", "full", {"shape": [2, 3], "value": 1.5}, {}, lambda: torch.full((2, 3), 1.5)),
        Case("full_i32", "full", {"shape": [4], "value": -7.0, "dtype": "i32"}, {},
             lambda: torch.full((4,), -7, dtype=torch.int64)),
        Case("full_bool_0d", "full", {"shape": [], "value": 1.0, "dtype": "bool"}, {},
             lambda: torch.full((), True, dtype=torch.bool)),
        Case("zeros_f32", "zeros", {"shape": [2, 2]}, {}, lambda: torch.zeros(2, 2)),
        Case("zeros_i32", "zeros", {"shape": [3], "dtype": "i32"}, {}, lambda: torch.zeros(3, dtype=torch.int64)),
        Case("ones_f32_0d", "ones", {"shape": []}, {}, lambda: torch.ones(())),
        Case("ones_bool", "ones", {"shape": [2, 3], "dtype": "bool"}, {},
             lambda: torch.ones(2, 3, dtype=torch.bool)),
        Case("arange_i32", "arange", {"n": 5}, {}, lambda: torch.arange(5)),
        Case("arange_f32", "arange", {"n": 6, "dtype": "f32"}, {}, lambda: torch.arange(6, dtype=torch.float64)),
        Case("scalar", "scalar", {"value": 2.5}, {}, lambda: torch.tensor(2.5)),
    ]


CASES = binary_cases() + unary_cases() + reduction_cases() + matmul_cases() + layout_cases() + creation_cases()
