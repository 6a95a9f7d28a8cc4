"""Golden cases of the creation family: full, zeros, ones, arange, and the composite scalar.

The ops are called in their IR form (no entry in tests/golden/calls_*.cpp): `shape` (or arange's
`n`), full's `value`, and `dtype` written as a string ("f32", "i32", "bool"), which the runner
turns into the IR's dtype attribute. scalar (tests/golden/calls_creation.cpp) takes `value`.
"""

import torch

from goldens.spec import Case

CASES = [
    Case("full_f32", "full", {"shape": [2, 3], "value": 1.5, "dtype": "f32"}, {}, lambda: torch.full((2, 3), 1.5)),
    Case("full_i32", "full", {"shape": [4], "value": -7.0, "dtype": "i32"}, {},
         lambda: torch.full((4,), -7, dtype=torch.int64)),
    Case("full_bool_0d", "full", {"shape": [], "value": 1.0, "dtype": "bool"}, {},
         lambda: torch.full((), True, dtype=torch.bool)),
    Case("zeros_f32", "zeros", {"shape": [2, 2], "dtype": "f32"}, {}, lambda: torch.zeros(2, 2)),
    Case("zeros_i32", "zeros", {"shape": [3], "dtype": "i32"}, {}, lambda: torch.zeros(3, dtype=torch.int64)),
    Case("ones_f32_0d", "ones", {"shape": [], "dtype": "f32"}, {}, lambda: torch.ones(())),
    Case("ones_bool", "ones", {"shape": [2, 3], "dtype": "bool"}, {}, lambda: torch.ones(2, 3, dtype=torch.bool)),
    Case("arange_i32", "arange", {"n": 5, "dtype": "i32"}, {}, lambda: torch.arange(5)),
    Case("arange_f32", "arange", {"n": 6, "dtype": "f32"}, {}, lambda: torch.arange(6, dtype=torch.float64)),
    Case("scalar", "scalar", {"value": 2.5}, {}, lambda: torch.tensor(2.5)),
]
# 16-bit creation: the value rounded once to the dtype (0.1; arange past 256, where bf16's 8-bit
# significand rounds odd integers to even).
CASES += [
    Case("full_f16", "full", {"shape": [2, 3], "value": 0.1, "dtype": "f16"}, {},
         lambda: torch.full((2, 3), 0.1, dtype=torch.float16)),
    Case("full_bf16", "full", {"shape": [3], "value": -70000.0, "dtype": "bf16"}, {},
         lambda: torch.full((3,), -70000.0, dtype=torch.bfloat16)),
    Case("zeros_bf16", "zeros", {"shape": [2, 2], "dtype": "bf16"}, {}, lambda: torch.zeros(2, 2, dtype=torch.bfloat16)),
    Case("ones_f16_0d", "ones", {"shape": [], "dtype": "f16"}, {}, lambda: torch.ones((), dtype=torch.float16)),
    Case("arange_f16", "arange", {"n": 7, "dtype": "f16"}, {}, lambda: torch.arange(7, dtype=torch.float16)),
    Case("arange_bf16_past_256", "arange", {"n": 300, "dtype": "bf16"}, {},
         lambda: torch.arange(300, dtype=torch.bfloat16)),
]
