"""The vocabulary of golden cases (see tests/golden/README.md for the file format they become).

A case names what to trace (`call`), its attributes, its inputs and a PyTorch callable that
computes the same thing. The call is an op of the registry in its IR form (inputs and the op's
attributes; nothing to write in C++), or a name with an explicit entry in
tests/golden/calls_<module>.cpp: a composite (layer_norm, stack, ...) or a front-end form the IR does
not take (scalar operands, negative axes, axis lists). tools/make_goldens.py draws the inputs, runs
the callable in float64 and stores inputs, output and gradients:

    from goldens.spec import Case, f32, i32, boolean
    CASES = [
        Case("conv2d_stride2", "conv2d", {"stride": 2, "padding": 1},
             {"x": f32([2, 3, 5, 5]), "w": f32([4, 3, 3, 3])},
             lambda x, w: torch.nn.functional.conv2d(x, w, stride=2, padding=1)),
    ]

The torch callable receives, in the order of `inputs`, float64 tensors for f32 inputs (with
requires_grad set), int64 tensors for i32 inputs and bool tensors for boolean inputs, and returns
one tensor. A callable of a case without inputs takes no arguments.
"""

from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Sequence, Union

AttrValue = Union[bool, int, float, str, List[int]]


@dataclass(frozen=True)
class InputSpec:
    """How to draw one input. kind is "f32", "i32" or "bool"; lo/hi bound the values (inclusive
    for i32). untied: distinct f32 values at least (hi - lo) / (2 n) apart, shuffled, so no
    comparison, max or sort meets a tie. integral: whole-number f32 values in [lo, hi] (for
    equality tests, where ties are the point)."""

    kind: str
    shape: tuple
    lo: float = -2.0
    hi: float = 2.0
    untied: bool = False
    integral: bool = False

    def size(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n


def _shape(shape: Sequence[int]) -> tuple:
    dims = tuple(shape)
    if not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in dims):
        raise ValueError(f"a shape holds non-negative integers, got {shape!r}")
    return dims


def f32(shape: Sequence[int], lo: float = -2.0, hi: float = 2.0, untied: bool = False,
        integral: bool = False) -> InputSpec:
    if not lo <= hi:
        raise ValueError(f"f32 input needs lo <= hi, got {lo} and {hi}")
    return InputSpec("f32", _shape(shape), float(lo), float(hi), untied, integral)


def i32(shape: Sequence[int], lo: int, hi: int) -> InputSpec:
    if not lo <= hi:
        raise ValueError(f"i32 input needs lo <= hi, got {lo} and {hi}")
    return InputSpec("i32", _shape(shape), int(lo), int(hi))


def boolean(shape: Sequence[int]) -> InputSpec:
    return InputSpec("bool", _shape(shape), 0, 1)


@dataclass
class Case:
    """One golden case. name: unique over all families, letters, digits and '_' (it becomes the
    GoogleTest name). grad=False skips the projection and gradients (e.g. for outputs that PyTorch
    and tensorgrad differentiate differently on purpose)."""

    name: str
    call: str
    attrs: Dict[str, AttrValue]
    inputs: Dict[str, InputSpec]
    torch: Callable
    grad: bool = True
    note: Optional[str] = field(default=None)  # printed as a comment above the case
