"""Golden cases of the random family: randn and dropout.

PyTorch cannot draw tensorgrad's stream, so this module implements it in pure Python, independently
of src/interp/philox.h: Philox4x32-10 (Salmon et al., SC 2011) keyed by (seed, salt) at counter
(index low word, index high word, 0, 0), 24-bit uniforms and Box-Muller (cosine branch), all with
explicit 32-bit masking. The torch callables build the expected tensors from it; dropout's is
x * mask / (1 - p) in torch, so its gradient is torch's own.

Calls are the front-end's (tests/golden/calls_random.cpp), which finds the step seed and hands
out salts itself: the seed input is named
`step_seed` (the front-end's step seed); randn takes `shape`, dropout `p`; `salt` (default 0) is the
number of stochastic calls traced before this one, i.e. the salt the front-end hands it. Seeds stay
small: the runner's tolerances scale with the largest input magnitude, the seed included.
"""

import math

import torch

from goldens.spec import Case, f32, i32

MASK32 = 0xFFFFFFFF
MULTIPLIERS = (0xD2511F53, 0xCD9E8D57)
WEYL = (0x9E3779B9, 0xBB67AE85)
TWO_TO_MINUS_24 = 2.0 ** -24


def philox4x32_10(counter, key):
    """Ten Philox rounds on four 32-bit words; the key is bumped before every round but the first."""
    c0, c1, c2, c3 = (w & MASK32 for w in counter)
    k0, k1 = (w & MASK32 for w in key)
    for r in range(10):
        if r > 0:
            k0 = (k0 + WEYL[0]) & MASK32
            k1 = (k1 + WEYL[1]) & MASK32
        p0 = MULTIPLIERS[0] * c0
        p1 = MULTIPLIERS[1] * c2
        c0, c1, c2, c3 = ((p1 >> 32) ^ c1 ^ k0) & MASK32, p1 & MASK32, ((p0 >> 32) ^ c3 ^ k1) & MASK32, p0 & MASK32
    return c0, c1, c2, c3


# Random123's known answers: the module refuses to generate anything from a wrong generator.
assert philox4x32_10((0, 0, 0, 0), (0, 0)) == (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)
assert philox4x32_10((MASK32,) * 4, (MASK32, MASK32)) == (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)
assert philox4x32_10((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0)) == (
    0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)


def element_words(seed: int, salt: int, index: int):
    return philox4x32_10((index & MASK32, (index >> 32) & MASK32, 0, 0), (seed & MASK32, salt & MASK32))


def numel(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def normal_values(seed: int, salt: int, shape) -> torch.Tensor:
    values = []
    for i in range(numel(shape)):
        w0, w1, _, _ = element_words(seed, salt, i)
        u1 = ((w0 >> 8) + 1) * TWO_TO_MINUS_24  # (0, 1]: log never sees 0
        u2 = (w1 >> 8) * TWO_TO_MINUS_24  # [0, 1)
        values.append(math.sqrt(-2.0 * math.log(u1)) * math.cos(2.0 * math.pi * u2))
    return torch.tensor(values, dtype=torch.float64).reshape(list(shape))


def keep_mask(seed: int, salt: int, shape, p: float) -> torch.Tensor:
    keep = [1.0 if (element_words(seed, salt, i)[0] >> 8) * TWO_TO_MINUS_24 >= p else 0.0 for i in range(numel(shape))]
    return torch.tensor(keep, dtype=torch.float64).reshape(list(shape))


def randn_case(name, shape, salt, seed_spec):
    def expected(step_seed):
        return normal_values(int(step_seed.item()), salt, shape)

    return Case(name, "randn", {"shape": list(shape), "salt": salt}, {"step_seed": seed_spec}, expected)


def dropout_case(name, shape, p, salt, seed_spec):
    def expected(x, step_seed):
        mask = keep_mask(int(step_seed.item()), salt, x.shape, p)
        return x * mask / (1 - p)

    return Case(name, "dropout", {"p": p, "salt": salt}, {"x": f32(shape), "step_seed": seed_spec}, expected)


CASES = [
    randn_case("randn_matrix", [3, 4], 0, i32([], 0, 1000)),
    randn_case("randn_rank3_third_call", [2, 3, 5], 2, i32([], -50, 50)),
    randn_case("randn_0d", [], 1, i32([], -50, 50)),
    randn_case("randn_long_vector", [257], 0, i32([], -20, -1)),
    dropout_case("dropout_half", [4, 6], 0.5, 0, i32([], 0, 1000)),
    dropout_case("dropout_rank3_second_call", [2, 3, 4], 0.1, 1, i32([], -50, 50)),
    dropout_case("dropout_most_dropped", [40], 0.75, 3, i32([], -20, -1)),
    dropout_case("dropout_p_zero_is_identity", [3, 2], 0.0, 0, i32([], 0, 1000)),
]
