#!/usr/bin/env python3
"""Safetensors read/write and the reference results for tests/cli/cli_test.sh, in plain Python (no
numpy: the test needs only Debian's python3).

  st.py write-inputs FILE          writes tiny.graph's inputs x, w, idx, table (fixed values)
  st.py write FILE NAME DTYPE SHAPE VALUES...   one tensor (SHAPE like 2,3; DTYPE F32 or I32)
  st.py check-outputs INPUTS OUT   OUT's loss, h and e against a Python computation from INPUTS
  st.py same OUT1 OUT2 / st.py differ OUT1 OUT2    every tensor bit-equal / some tensor different
"""
import json
import math
import struct
import sys

FORMATS = {"F32": "f", "I32": "i"}


def write(path, tensors):
    header, data = {}, b""
    for name, (dtype, shape, values) in tensors.items():
        raw = struct.pack("<%d%s" % (len(values), FORMATS[dtype]), *values)
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    text = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + data)


def read(path):
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    out = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        start, end = entry["data_offsets"]
        fmt = FORMATS[entry["dtype"]]
        raw = blob[8 + n + start:8 + n + end]
        out[name] = (entry["dtype"], entry["shape"], list(struct.unpack("<%d%s" % (len(raw) // 4, fmt), raw)))
    return out


def f32(v):
    return struct.unpack("<f", struct.pack("<f", v))[0]


INPUTS = {
    "x": ("F32", [2, 3], [f32(0.25 * i - 0.6) for i in range(6)]),
    "w": ("F32", [3, 4], [f32(0.1 * ((i * 7) % 12) - 0.5) for i in range(12)]),
    "idx": ("I32", [5], [5, 0, 3, 3, 1]),
    "table": ("F32", [6, 2], [f32(0.5 * i - 2.5) for i in range(12)]),
}


def expected(inputs):
    x, w, idx, table = (inputs[k][2] for k in ("x", "w", "idx", "table"))
    h = [math.tanh(sum(x[r * 3 + k] * w[k * 4 + c] for k in range(3))) for r in range(2) for c in range(4)]
    e = [table[i * 2 + j] for i in idx for j in range(2)]
    return {"loss": ([], [sum(h)]), "h": ([2, 4], h), "e": ([5, 2], e)}


def main(argv):
    cmd = argv[1]
    if cmd == "write-inputs":
        write(argv[2], INPUTS)
    elif cmd == "write":
        dtype, shape = argv[4], [int(d) for d in argv[5].split(",") if d]
        cast = float if dtype == "F32" else int
        write(argv[2], {argv[3]: (dtype, shape, [cast(v) for v in argv[6:]])})
    elif cmd == "check-outputs":
        got = read(argv[3])
        for name, (shape, want) in expected(read(argv[2])).items():
            dtype, got_shape, values = got[name]
            assert dtype == "F32" and got_shape == shape, (name, dtype, got_shape, shape)
            for i, (g, e) in enumerate(zip(values, want)):
                assert abs(g - e) <= 1e-5 * max(1.0, abs(e)), "%s[%d]: got %r, expected %r" % (name, i, g, e)
        assert sorted(got) == ["e", "h", "loss"], sorted(got)
    elif cmd in ("same", "differ"):
        a, b = read(argv[2]), read(argv[3])
        if (a == b) != (cmd == "same"):
            sys.exit("%s and %s: expected %s tensors" % (argv[2], argv[3], cmd))
    else:
        sys.exit("unknown command " + cmd)


if __name__ == "__main__":
    main(sys.argv)
