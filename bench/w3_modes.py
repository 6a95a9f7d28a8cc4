#!/usr/bin/python3
"""The W3 matmul mode table: TFLOP/s of tensorgrad's vk/W3_matmul[_<mode>]/<n> (ieee, split, fast,
f16, bf16; bench/vk_workloads_bench.cpp) next to PyTorch's torch_cuda/W3_matmul[_<mode>]/<n> (fp32,
tf32, f16, bf16; bench/pytorch_workloads.py --w3-modes), from one run's JSON reports.

  python3 bench/w3_modes.py vk_workloads.json torch_workloads.json
"""
import json
import re
import sys

OURS = [("ieee", ""), ("split", "_split"), ("fast", "_fast"), ("f16", "_f16"), ("bf16", "_bf16")]
THEIRS = [("fp32", ""), ("tf32", "_tf32"), ("f16", "_f16"), ("bf16", "_bf16")]


def rates(paths):
    found = {}
    for path in paths:
        with open(path) as f:
            report = json.load(f)
        for b in report.get("benchmarks", []):
            m = re.match(r"^(vk|torch_cuda)/W3_matmul(_[a-z0-9]+)?/(\d+)", b["name"])
            if not m or "GFLOP/s" not in b or b.get("error_occurred"):
                continue
            found[(m[1], m[2] or "", int(m[3]))] = b["GFLOP/s"] / 1e3
    return found


def main():
    found = rates(sys.argv[1:])
    sizes = sorted({n for (_, _, n) in found})
    head = [f"ours {name}" for name, _ in OURS] + [f"torch {name}" for name, _ in THEIRS]
    print("| n | " + " | ".join(head) + " |")
    print("|---" * (len(head) + 1) + "|")
    for n in sizes:
        cells = [found.get(("vk", suffix, n)) for _, suffix in OURS]
        cells += [found.get(("torch_cuda", suffix, n)) for _, suffix in THEIRS]
        print(f"| {n} | " + " | ".join("–" if c is None else f"{c:.1f}" for c in cells) + " |")
    print("\nTFLOP/s (2 n^3 flops per product).")


if __name__ == "__main__":
    main()
