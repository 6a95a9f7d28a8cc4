#!/usr/bin/python3
"""The design.md workloads W3/W4/W5 in PyTorch, for ratios against bench/interp_workloads_bench.cpp.

Prints one JSON object per line with the same benchmark names (Google Benchmark's, ending in
/real_time) and counters as the C++ binary:
  W3_matmul/n=<n>        GFLOP/s   (2 n^3 flops per call; fp32, TF32 off on CUDA)
  W4_add/n=67108864      GB/s      (12 bytes/element: two reads, one write)
  W5_softmax/8192x4096   GB/s      (8 bytes/element: one read, one write)
on the CPU, and on CUDA when torch.cuda.is_available(). Run with Debian's python3-torch:
  /usr/bin/python3 bench/pytorch_workloads.py [--device cpu|cuda|all] [--large] [--min-time S]
--large (or TG_BENCH_LARGE=1) adds matmul n = 4096 and 8192, as the C++ binary does.
"""
import argparse
import json
import os
import time

import torch


def sync(device):
    if device == "cuda":
        torch.cuda.synchronize()


def time_call(fn, device, min_time):
    """Mean seconds per call: one warm-up call, then repeat until min_time seconds have passed."""
    fn()
    sync(device)
    iterations = 0
    start = time.perf_counter()
    while True:
        fn()
        iterations += 1
        sync(device)
        elapsed = time.perf_counter() - start
        if elapsed >= min_time:
            return elapsed / iterations, iterations


def report(name, device, seconds, iterations, counters):
    # Google Benchmark names wall-clock benchmarks "<name>/real_time"; the same name here lets the
    # two reports be joined on "name".
    record = {
        "name": name + "/real_time",
        "framework": "pytorch",
        "torch": torch.__version__,
        "device": device,
        "threads": torch.get_num_threads() if device == "cpu" else None,
        "iterations": iterations,
        "real_time": seconds * 1e3,
        "time_unit": "ms",
    }
    record.update(counters)
    print(json.dumps(record), flush=True)


def run_device(device, sizes, min_time):
    gen = torch.Generator(device=device).manual_seed(0)

    def rand(*shape):
        return torch.rand(*shape, generator=gen, device=device, dtype=torch.float32) * 2 - 1

    for n in sizes:
        a, b = rand(n, n), rand(n, n)
        seconds, iters = time_call(lambda: torch.matmul(a, b), device, min_time)
        report(f"W3_matmul/n={n}", device, seconds, iters, {"GFLOP/s": 2.0 * n**3 / seconds * 1e-9})
        del a, b

    n = 1 << 26
    a, b = rand(n), rand(n)
    # Out of place with a fresh output each call, as the interpreter does (softmax likewise).
    seconds, iters = time_call(lambda: torch.add(a, b), device, min_time)
    report("W4_add/n=67108864", device, seconds, iters,
           {"GB/s": 12.0 * n / seconds * 1e-9, "items_per_second": n / seconds})
    del a, b

    rows, cols = 8192, 4096
    x = rand(rows, cols)
    seconds, iters = time_call(lambda: torch.softmax(x, dim=-1), device, min_time)
    report("W5_softmax/8192x4096", device, seconds, iters,
           {"GB/s": 8.0 * rows * cols / seconds * 1e-9, "items_per_second": rows * cols / seconds})
    del x


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", choices=["cpu", "cuda", "all"], default="all",
                        help="all: the CPU, plus CUDA when available (default)")
    parser.add_argument("--large", action="store_true", help="add matmul n = 4096, 8192")
    parser.add_argument("--min-time", type=float, default=1.0, help="seconds of timed calls per workload")
    parser.add_argument("--threads", type=int, default=os.cpu_count(),
                        help="CPU threads for PyTorch (default: every core, as TBB uses)")
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    # fp32 matmul must stay fp32 on the GPU: TF32 would round the inputs to 10 mantissa bits.
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False

    sizes = [1024, 2048]
    if args.large or os.environ.get("TG_BENCH_LARGE") == "1":
        sizes += [4096, 8192]

    devices = []
    if args.device in ("cpu", "all"):
        devices.append("cpu")
    if args.device in ("cuda", "all") and torch.cuda.is_available():
        devices.append("cuda")
    if args.device == "cuda" and not devices:
        raise SystemExit("CUDA is not available to this PyTorch")
    with torch.no_grad():
        for device in devices:
            run_device(device, sizes, args.min_time)


if __name__ == "__main__":
    main()
