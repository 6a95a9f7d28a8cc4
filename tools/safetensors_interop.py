#!/usr/bin/env python3
"""Interop between tensorgrad's safetensors code and the real `safetensors` package.

  write DIR   writes DIR/python_numpy.safetensors (with safetensors.numpy.save_file) and
              DIR/python_torch.safetensors (with safetensors.torch.save_file): the goldens that
              tests/unit/safetensors_test.cpp reads from tests/unit/data/safetensors/
  check FILE  reads FILE, written by tensorgrad (tests/unit/data/safetensors/cpp_written.safetensors,
              which the C++ test checks byte for byte against its own output), with
              safetensors.numpy, safetensors.torch and safe_open, and checks every tensor, dtype,
              shape and the metadata
  check16 FILE
              reads FILE, written by tensorgrad (tests/unit/data/safetensors/cpp_written_16bit.safetensors,
              which tests/unit/safetensors_16bit_test.cpp checks byte for byte), as PyTorch lays
              F16 and BF16 out: each tensor's bytes through torch.frombuffer as torch.float16 or
              torch.bfloat16, compared bit for bit with the patterns the C++ test wrote; with the
              safetensors package present, also through safetensors.torch.load_file. Needs only
              torch (Debian's python3-torch)

Needs numpy, torch and safetensors (not in Debian 12; see docs/training/safetensors.md for where
it ran). The values are simple formulas that tests/unit/safetensors_test.cpp repeats: change both
together.
"""
import json
import math
import struct
import sys
from pathlib import Path

import numpy as np

NOTE = 'quote " backslash \\ ünïcødé ✓'
CPP_NOTE = 'quote " backslash \\ newline \n tab \t ünïcødé ✓'


def numpy_golden():
    f32 = np.arange(12, dtype=np.float32) * np.float32(0.25) - np.float32(1.5)
    f32[5] = -0.0
    f32[6] = np.inf
    f32[7] = -np.inf
    f32[8] = np.nan
    f32[9] = np.finfo(np.float32).smallest_subnormal
    f32[10] = np.finfo(np.float32).max
    tensors = {
        "f32.matrix": f32.reshape(3, 4),
        "f64.vector": np.array([0.1, -2.5, 1e300, 5e-324, -0.0], dtype=np.float64),
        "f16.values": np.array([1.5, -2.0, 65504.0, 2.0**-24, -np.inf, 0.1], dtype=np.float16).reshape(2, 3),
        "i64.ids": np.array([0, -1, 2**31 - 1, -(2**31)], dtype=np.int64),
        "i32.scalar": np.array(7, dtype=np.int32),
        "i16": np.array([-32768, 32767, 5], dtype=np.int16),
        "i8": np.array([-128, 127, 0, -1], dtype=np.int8).reshape(2, 2),
        "u8": np.array([0, 255, 17], dtype=np.uint8),
        "u16": np.array([65535, 1], dtype=np.uint16),
        "u32": np.array([2**31 - 1, 0], dtype=np.uint32),
        "u64": np.array([2**31 - 1], dtype=np.uint64),
        "mask": np.array([True, False, False, True, True, False]).reshape(2, 3),
        "empty": np.zeros((0, 3), dtype=np.float32),
        "layers.0.attn.q.W": (np.arange(16, dtype=np.float32) / np.float32(16)).reshape(2, 2, 2, 2),
        "naïve ✓": np.array([42.0], dtype=np.float32),
    }
    return tensors, {"format": "np", "step": "1200", "note": NOTE}


def torch_golden():
    import torch

    tensors = {
        "bf16": torch.tensor([1.0, -3.140625, 2.0**100, 2.0**-133], dtype=torch.bfloat16),
        "f32": (torch.arange(6, dtype=torch.float32) * 0.5).reshape(2, 3),
        "mask": torch.tensor([True, False, True]),
        "i64": torch.tensor([-5, 3], dtype=torch.int64),
        "f16.negzero": torch.tensor([-0.0], dtype=torch.float16),
    }
    return tensors, {"format": "pt"}


def cpp_expected():
    w = np.arange(6, dtype=np.float32) * np.float32(0.75) - np.float32(2)
    w[1] = -0.0
    w[4] = np.inf
    tensors = {
        "w": w.reshape(2, 3),
        "b": np.array([np.nan, np.finfo(np.float32).smallest_subnormal, np.finfo(np.float32).max], dtype=np.float32),
        "steps": np.array(12345, dtype=np.int32),
        "ids": np.array([-(2**31), 2**31 - 1, 0, -7], dtype=np.int32),
        "mask": np.array([True, False, False, True]).reshape(2, 2),
        "empty": np.zeros((0,), dtype=np.float32),
        "layers.0.naïve ✓": np.array([0.1], dtype=np.float32),
    }
    return tensors, {"format": "pt", "step": "12345", "note": CPP_NOTE}


def same_bits(got, want):
    """Equal dtype, shape and values; NaN matches NaN and -0.0 only -0.0."""
    if got.dtype != want.dtype or got.shape != want.shape:
        return False
    if want.dtype.kind == "f":
        return bool(np.array_equal(got, want, equal_nan=True) and np.array_equal(np.signbit(got), np.signbit(want)))
    return bool(np.array_equal(got, want))


def write(out_dir):
    from safetensors.numpy import save_file as save_numpy
    from safetensors.torch import save_file as save_torch

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    tensors, metadata = numpy_golden()
    save_numpy(tensors, str(out_dir / "python_numpy.safetensors"), metadata=metadata)
    tensors, metadata = torch_golden()
    save_torch(tensors, str(out_dir / "python_torch.safetensors"), metadata=metadata)
    for name in ("python_numpy.safetensors", "python_torch.safetensors"):
        print(f"wrote {out_dir / name} ({(out_dir / name).stat().st_size} bytes)")


def check(path):
    import safetensors
    import torch
    from safetensors import safe_open
    from safetensors.numpy import load_file as load_numpy
    from safetensors.torch import load_file as load_torch

    print(f"safetensors {safetensors.__version__}, numpy {np.__version__}, torch {torch.__version__}")
    want, want_metadata = cpp_expected()
    failures = []
    raw = Path(path).read_bytes()
    (header_size,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + header_size])
    if (8 + header_size) % 8 != 0:
        failures.append(f"data starts at byte {8 + header_size}, not 8-byte aligned")
    print("header:", json.dumps(header, ensure_ascii=False))

    got = load_numpy(path)
    if sorted(got) != sorted(want):
        failures.append(f"numpy: tensors {sorted(got)}, want {sorted(want)}")
    for name, value in want.items():
        if name in got and not same_bits(got[name], value):
            failures.append(f"numpy: {name!r} is {got[name].dtype}{list(got[name].shape)} {got[name]!r}, want {value!r}")
    with safe_open(path, framework="np") as f:
        if f.metadata() != want_metadata:
            failures.append(f"metadata {f.metadata()!r}, want {want_metadata!r}")
    got_torch = load_torch(path)
    for name, value in want.items():
        t = got_torch.get(name)
        if t is None or not same_bits(t.numpy(), value):
            failures.append(f"torch: {name!r} is {t!r}, want {value!r}")
    if failures:
        print("FAILED:\n  " + "\n  ".join(failures))
        return 1
    print(f"ok: {path} reads back with safetensors.numpy, safetensors.torch and safe_open: "
          f"{len(want)} tensors and {len(want_metadata)} metadata entries as written")
    return 0


# tests/unit/safetensors_16bit_test.cpp (kF16Bits, kBf16Bits) repeats these: change both together.
F16_BITS = [0x7E01, 0xFE00, 0x7C01, 0x7C00, 0xFC00, 0x0001, 0x03FF, 0x8000, 0x7BFF, 0x3C00, 0xFBFF, 0x8001]
BF16_BITS = [0x7FC1, 0xFFC0, 0x7F81, 0x7F80, 0xFF80, 0x0001, 0x007F, 0x8000, 0x7F7F, 0x3F80, 0xFF7F, 0x8001]


def cpp16_expected():
    import torch

    def from_bits(bits, dtype, shape):
        signed = [b - 0x10000 if b >= 0x8000 else b for b in bits]
        return torch.tensor(signed, dtype=torch.int16).view(dtype).reshape(shape)

    return {
        "half": from_bits(F16_BITS, torch.float16, (3, 4)),
        "brain": from_bits(BF16_BITS, torch.bfloat16, (2, 6)),
        "f32": torch.tensor([1.5], dtype=torch.float32),
    }


def same_torch_bits(got, want):
    """Equal dtype, shape and bit patterns (NaN payloads and -0.0 included)."""
    if got.dtype != want.dtype or tuple(got.shape) != tuple(want.shape):
        return False
    import torch

    as_int = {torch.float16: torch.int16, torch.bfloat16: torch.int16, torch.float32: torch.int32}[want.dtype]
    return bool(torch.equal(got.contiguous().view(as_int), want.contiguous().view(as_int)))


def check16(path):
    import torch

    names = {"F16": torch.float16, "BF16": torch.bfloat16, "F32": torch.float32}
    print(f"torch {torch.__version__}")
    want = cpp16_expected()
    failures = []
    raw = bytearray(Path(path).read_bytes())
    (header_size,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + header_size])
    data_start = 8 + header_size
    got = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        dtype = names.get(info["dtype"])
        if dtype is None:
            failures.append(f"{name!r}: dtype {info['dtype']}")
            continue
        element = torch.tensor([], dtype=dtype).element_size()
        if end - begin != element * math.prod(info["shape"]):
            failures.append(f"{name!r}: {end - begin} bytes for {info['dtype']}{info['shape']}")
            continue
        got[name] = torch.frombuffer(raw, dtype=dtype, count=(end - begin) // element,
                                     offset=data_start + begin).reshape(info["shape"])
    try:
        from safetensors.torch import load_file as load_torch
    except ImportError:
        load_torch = None
        print("the safetensors package is not installed: checked with torch.frombuffer only")
    readers = {"torch.frombuffer": got}
    if load_torch:
        readers["safetensors.torch"] = load_torch(path)
    for reader, tensors in readers.items():
        if sorted(tensors) != sorted(want):
            failures.append(f"{reader}: tensors {sorted(tensors)}, want {sorted(want)}")
        for name, value in want.items():
            t = tensors.get(name)
            if t is None or not same_torch_bits(t, value):
                failures.append(f"{reader}: {name!r} is {t!r}, want {value!r}")
    if failures:
        print("FAILED:\n  " + "\n  ".join(failures))
        return 1
    print(f"ok: {path} reads back in PyTorch bit for bit: {len(want)} tensors ({', '.join(sorted(readers))})")
    return 0


def main(argv):
    if len(argv) == 3 and argv[1] == "check16":
        return check16(argv[2])
    if len(argv) != 3 or argv[1] not in ("write", "check"):
        print(__doc__)
        return 2
    if argv[1] == "write":
        write(argv[2])
        return 0
    return check(argv[2])


if __name__ == "__main__":
    sys.exit(main(sys.argv))
