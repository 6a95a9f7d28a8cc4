"""Golden cases of the precision family: cast between f32, f16 and bf16, against torch's .to().

Every call is the op itself (no entry in tests/golden/calls_*.cpp): one input and `dtype`. Each
input is a sweep of the values where rounding decides: ties (which go to the even neighbour),
values just off a tie, the subnormals of the target and the boundary below its smallest one,
the largest finite value and the point past which a value overflows to infinity, signed zeros,
infinities and NaN. A cast rounds once, to nearest even, so the runner requires the output bit
for bit (the sign of zero included; a NaN matches a NaN).
"""

import torch

from goldens.spec import Case, given

E = 2.0 ** -11  # half an f16 ulp at 1
B = 2.0 ** -8   # half a bf16 ulp at 1
INF = float("inf")

TO_F16 = [
    1.0 + E, 1.0 + 3 * E, 1.0 + E + 2.0 ** -23, 1.0 + 3 * E - 2.0 ** -23, -(1.0 + E), 2049.0, 2051.0,
    2.0 ** -24, 2.0 ** -25, 3 * 2.0 ** -25, 2.0 ** -25 + 2.0 ** -40, 2.0 ** -26, -(2.0 ** -26), 2.0 ** -14,
    2.0 ** -14 - 2.0 ** -25, 1023 * 2.0 ** -24 + 2.0 ** -25, 65504.0, 65519.0, 65520.0, -65520.0, 1e5, 0.1,
    1.0 / 3.0, 0.0, -0.0, INF, -INF, float("nan"),
]
TO_BF16 = [
    1.0 + B, 1.0 + 3 * B, 1.0 + B + 2.0 ** -23, -(1.0 + 3 * B), 257.0, 259.0, 2.0 ** -133, 2.0 ** -134,
    3 * 2.0 ** -134, 2.0 ** -135, -(2.0 ** -135), 2.0 ** -126, 2.0 ** -126 - 2.0 ** -134, 3.3895313892515355e38,
    3.3961775292304720e38, 3.4028234663852886e38, -3.4028234663852886e38, 0.1, 1.0 / 3.0, 65520.0, 0.0, -0.0,
    INF, -INF, float("nan"),
]
# f16 values (exact) whose bf16 rounding ties, underflows to bf16's normals or keeps going.
F16_TO_BF16 = [1.0 + 2.0 ** -8, 1.0 + 3 * 2.0 ** -8, 1.0 + 2.0 ** -8 + 2.0 ** -10, 2.0 ** -24, 1023 * 2.0 ** -24,
               65504.0, -65504.0, 0.1, -0.0, INF, float("nan")]
# bf16 values (exact) that overflow f16, fall into its subnormals, below them, or tie there.
BF16_TO_F16 = [65536.0, 65280.0, 1e10, -1e10, 2.0 ** -24, 2.0 ** -25, 3 * 2.0 ** -25, 2.0 ** -26, 2.0 ** -20 * 1.5,
               1.0 + 2.0 ** -7, 3.140625, -0.0, INF, float("nan")]


def cast_case(name, source, values, target, torch_dtype):
    return Case(name, "cast", {"dtype": target}, {"x": given(source, values)}, lambda x: (x.float() if source == "f32" else x).to(torch_dtype),
                grad=False)


CASES = [
    cast_case("cast_f32_to_f16_sweep", "f32", TO_F16, "f16", torch.float16),
    cast_case("cast_f32_to_bf16_sweep", "f32", TO_BF16, "bf16", torch.bfloat16),
    cast_case("cast_f16_to_f32_exact", "f16", F16_TO_BF16, "f32", torch.float32),
    cast_case("cast_bf16_to_f32_exact", "bf16", BF16_TO_F16, "f32", torch.float32),
    cast_case("cast_f16_to_bf16", "f16", F16_TO_BF16, "bf16", torch.bfloat16),
    cast_case("cast_bf16_to_f16", "bf16", BF16_TO_F16, "f16", torch.float16),
]
