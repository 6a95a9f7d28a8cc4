"""Golden cases of the elementwise_binary family: add, sub, mul, div, minimum, maximum, less,
greater, equal (NumPy broadcasting) and where.

Calls (tests/golden/calls_elementwise_binary.cpp):
- a case with two inputs is the op itself: (a, b);
- a case with one input and a scalar attribute `rhs` (x op rhs) or `lhs` (lhs op x) takes the
  front-end's scalar operand: a 0-d f32 constant, rounded to float32. Every two-input op of the
  family takes this form, derived from the registry;
- where takes (condition, if_true, if_false), or (condition, x) and a scalar `if_true` or
  `if_false`.
Scalars are float32 values (0.5, -1.25, ...): a value like 0.1 would differ from PyTorch's float64
by more than the golden tolerance.
"""

import torch

from goldens.spec import Case, boolean, f32, sixteen_bit_variants

POSITIVE = dict(lo=0.5, hi=3.0)


def arithmetic_cases():
    return [
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
    ]


def min_max_cases():
    return [
        Case("minimum_broadcast", "minimum", {}, {"a": f32([3, 4], untied=True), "b": f32([4], untied=True)},
             torch.minimum),
        Case("minimum_scalar_rhs", "minimum", {"rhs": 0.25}, {"x": f32([2, 5], untied=True)},
             lambda x: torch.clamp(x, max=0.25)),
        Case("maximum_broadcast", "maximum", {}, {"a": f32([2, 1, 3], untied=True), "b": f32([4, 1], untied=True)},
             torch.maximum),
        Case("maximum_scalar_lhs", "maximum", {"lhs": 0.0}, {"x": f32([6], untied=True)},
             lambda x: torch.clamp(x, min=0.0)),
    ]


def comparison_cases():
    return [
        Case("less_broadcast", "less", {}, {"a": f32([3, 4]), "b": f32([4])}, torch.lt),
        Case("less_scalar_rhs", "less", {"rhs": 0.5}, {"x": f32([2, 3])}, lambda x: x < 0.5),
        Case("greater_broadcast", "greater", {}, {"a": f32([2, 1]), "b": f32([1, 3])}, torch.gt),
        Case("greater_scalar_lhs", "greater", {"lhs": 0.0}, {"x": f32([5])}, lambda x: 0.0 > x),
        Case("equal_small_integers", "equal", {},
             {"a": f32([3, 4], lo=0, hi=2, integral=True), "b": f32([4], lo=0, hi=2, integral=True)}, torch.eq),
        Case("equal_scalar_rhs", "equal", {"rhs": 1.0}, {"x": f32([2, 4], lo=0, hi=2, integral=True)},
             lambda x: x == 1.0),
    ]


def where_cases():
    return [
        Case("where_same_shape", "where", {}, {"c": boolean([3, 4]), "a": f32([3, 4]), "b": f32([3, 4])},
             torch.where),
        Case("where_three_way_broadcast", "where", {}, {"c": boolean([3, 1]), "a": f32([1, 4]), "b": f32([])},
             torch.where),
        Case("where_scalar_false", "where", {"if_false": -1.0}, {"c": boolean([2, 3]), "x": f32([2, 3])},
             lambda c, x: torch.where(c, x, torch.tensor(-1.0))),
        Case("where_scalar_true", "where", {"if_true": 0.5}, {"c": boolean([4]), "x": f32([2, 4])},
             lambda c, x: torch.where(c, torch.tensor(0.5), x)),
    ]


CASES = arithmetic_cases() + min_max_cases() + comparison_cases() + where_cases()

# The 16-bit goldens (f16 and bf16 variants; goldens/spec.py, in_16bit).
CASES += sixteen_bit_variants(CASES, ["add_broadcast_rank3", "add_scalar_rhs", "sub_scalar_lhs", "mul_broadcast",
                                      "div_broadcast", "div_scalar_lhs", "minimum_broadcast", "maximum_scalar_lhs",
                                      "less_broadcast", "greater_scalar_lhs", "equal_small_integers",
                                      "where_three_way_broadcast", "where_scalar_false"])
