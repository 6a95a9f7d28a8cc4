"""Golden cases of the softmax family: softmax and log_softmax.

Calls (tests/golden/calls_softmax.cpp) are the front-end's: an optional `axis` (default -1, the
last), negative axes counting from the end; the IR takes a non-negative axis only.
"""

import torch

from goldens.spec import Case, f32, sixteen_bit_variants

CASES = [
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

# The 16-bit goldens (f16 and bf16 variants; goldens/spec.py, in_16bit).
SOFTMAX_BF16 = ("PyTorch 1.13's CPU bfloat16 softmax rounds an intermediate result to bfloat16: in "
                "softmax_middle_axis_wide_range 2 of 36 outputs are 1 ulp off the value rounded once")
CASES += sixteen_bit_variants(CASES, ["softmax_last_axis", "softmax_middle_axis_wide_range", "log_softmax_axis0",
                                      "log_softmax_negative_axis"],
                              via_f32={name: {"bf16": SOFTMAX_BF16}
                                       for name in ("softmax_last_axis", "softmax_middle_axis_wide_range")})
