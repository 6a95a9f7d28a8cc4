"""The vocabulary of golden cases (see tests/golden/README.md for the file format they become).

A case names what to trace (`call`), its attributes, its inputs and a PyTorch callable that
computes the same thing. The call is an op of the registry in its IR form (inputs and the op's
attributes; nothing to write in C++), or a name with an explicit entry in
tests/golden/calls_<module>.cpp: a composite (layer_norm, stack, ...) or a front-end form the IR does
not take (scalar operands, negative axes, axis lists). tools/make_goldens.py draws the inputs, runs
the callable in float64 and stores inputs, output and gradients:

    from goldens.spec import Case, f32, i32, boolean
    CASES = [
        Case("conv2d_stride2", "conv2d", {"stride": [2, 2], "padding": [1, 1], "dilation": [1, 1], "groups": 1},
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
    values: Optional[tuple] = None  # given values (cast sweeps), rounded to float32 / the 16-bit dtype

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


def given(kind: str, values: Sequence[float]) -> InputSpec:
    """A 1-D input of exactly these values (kind "f32", "f16" or "bf16"; each rounded to it)."""
    return InputSpec(kind, (len(values),), values=tuple(float(v) for v in values))


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


# ---- 16-bit variants -----------------------------------------------------------------------------
# The 16-bit goldens are f32 cases run again with their f32 inputs drawn as f16 or bf16 (the same
# ranges, each value rounded to the dtype: the file holds the exact 16-bit values). PyTorch computes
# them in its CPU 16-bit semantics: the callable receives float16/bfloat16 tensors and must return
# one of that dtype. Where PyTorch 1.13's CPU has no kernel for the dtype ("not implemented for
# 'Half'"), or `via_f32` says its 16-bit path is not one op rounded once (a composition of 16-bit
# ops, e.g. the rms_norm formula), the reference is computed in float32 from the 16-bit inputs and
# rounded once to the dtype: exactly tensorgrad's semantics; the case's note says which. A native
# result that is not exactly the f32 result rounded once (a kernel rounding intermediates) fails
# the case in the generator, asking for a via_f32 reason. Gradients are not stored for 16-bit cases.

SIXTEEN_BIT = ("f16", "bf16")
VIA_F32_NOTE = ("PyTorch's reference: computed in float32 from the {dtype} inputs and rounded once to "
                "{dtype} ({why})")


def _torch_dtype(kind):
    import torch

    return {"f16": torch.float16, "bf16": torch.bfloat16}[kind]


def in_16bit(case: Case, kind: str, via_f32: Optional[str] = None) -> Case:
    """`case` with every f32 input drawn as `kind` ("f16" or "bf16"), named <name>_<kind>."""
    import torch

    dtype = _torch_dtype(kind)
    inputs = {n: (InputSpec(kind, s.shape, s.lo, s.hi, s.untied, s.integral, s.values) if s.kind == "f32" else s)
              for n, s in case.inputs.items()}
    state = {"note": None}

    def in_f32(*args):
        widened = [a.float() if a.dtype == dtype else a for a in args]
        out = case.torch(*widened)
        return out.to(dtype) if out.dtype.is_floating_point else out

    def call(*args):
        if via_f32:
            state["note"] = VIA_F32_NOTE.format(dtype=kind, why=via_f32)
            return in_f32(*args)
        try:
            out = case.torch(*args)
        except RuntimeError as e:
            if "not implemented for" not in str(e):
                raise
            state["note"] = VIA_F32_NOTE.format(dtype=kind, why=f"PyTorch {torch.__version__} CPU: {e}")
            return in_f32(*args)
        if out.dtype.is_floating_point and out.dtype != dtype:
            raise ValueError(f"the torch callable returned {out.dtype} from {kind} inputs (a float64 constant?)")
        if out.dtype.is_floating_point:
            # The native kernel must be one rounding of an f32 computation, the semantics the runner's
            # bound assumes; a kernel that rounds intermediates needs a via_f32 reason instead.
            once = in_f32(*args)
            same = (out == once) | (torch.isnan(out) & torch.isnan(once))
            if not bool(same.all()):
                raise ValueError(f"PyTorch's native {kind} result differs from the f32 result rounded once at "
                                 f"{int((~same).sum())} of {out.numel()} elements: its kernel rounds intermediates; "
                                 "give the case a via_f32 reason")
        return out

    variant = Case(case.name + "_" + kind, case.call, dict(case.attrs), inputs, call, grad=False,
                   note=case.note)
    variant.note_after_run = state  # make_goldens reads state["note"] after the run
    return variant


def sixteen_bit_variants(cases, names, via_f32: Optional[Dict[str, Union[str, Dict[str, str]]]] = None) -> list:
    """The f16 and bf16 variants of the named cases (in `names` order). via_f32: case name -> why its
    reference is computed in float32 and rounded once, for both dtypes (a str) or per dtype (a dict)."""
    by_name = {c.name: c for c in cases}
    via_f32 = via_f32 or {}
    def reason(name, kind):
        why = via_f32.get(name)
        return why.get(kind) if isinstance(why, dict) else why

    return [in_16bit(by_name[n], kind, reason(n, kind)) for n in names for kind in SIXTEEN_BIT]
