#!/usr/bin/python3
"""The design.md workloads W3/W4/W5 in PyTorch, for ratios against the tensorgrad benchmarks.

Writes one Google Benchmark style JSON report ({"context": {...}, "benchmarks": [...]}) so that
bench/compare.py reads it like the C++ reports. Names and counters match bench/vk_workloads_bench.cpp
(vk/...) with the prefix torch_cuda/ or torch_cpu/:
  torch_<dev>/W3_matmul/<n>             GFLOP/s, TFLOP/s  (2 n^3 flops; fp32, TF32 off on CUDA)
  torch_<dev>/W4_add_2^26               GB/s  (12 bytes/element: two reads, one write)
  torch_<dev>/W5_softmax_8192x4096      GB/s  (8 bytes/element: one read, one write)
real_time is the median of --repeats timed calls after --warmup untimed ones, in microseconds; on
CUDA each call is timed by a pair of CUDA events around it (device time, like the GPU timestamps
of the Vulkan benchmarks), on the CPU by perf_counter. --small shrinks every workload (the names
then say the smaller sizes) for a quick check of the script itself.

  /usr/bin/python3 bench/pytorch_workloads.py --device cuda --out torch_cuda.json
  /usr/bin/python3 bench/pytorch_workloads.py --device cpu --sizes 1024,2048
"""
import argparse
import datetime
import json
import os
import platform
import statistics
import sys
import time

import torch


def has_setting(module, name):
    # torch 1.x's torch.backends.cuda.matmul raises AssertionError, not AttributeError, for an
    # unknown name, so hasattr() would not do.
    try:
        getattr(module, name)
        return True
    except (AttributeError, AssertionError):
        return False


def keep_fp32():
    """fp32 matmul must stay fp32 on the GPU: TF32 would round the inputs to 10 mantissa bits.
    PyTorch >= 2.9 has the fp32_precision settings and deprecates allow_tf32; older ones only
    allow_tf32. Returns a description of what was set, for the report's context."""
    matmul = torch.backends.cuda.matmul
    if has_setting(matmul, "fp32_precision"):
        matmul.fp32_precision = "ieee"
        conv = getattr(torch.backends.cudnn, "conv", None)
        if conv is not None and has_setting(conv, "fp32_precision"):
            conv.fp32_precision = "ieee"
        return "torch.backends.cuda.matmul.fp32_precision = ieee, torch.backends.cudnn.conv.fp32_precision = ieee"
    matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    return "torch.backends.cuda.matmul.allow_tf32 = False, torch.backends.cudnn.allow_tf32 = False"


def time_calls(fn, device, warmup, repeats):
    """Seconds of each of `repeats` calls of fn, after `warmup` untimed ones."""
    for _ in range(warmup):
        fn()
    if device == "cuda":
        torch.cuda.synchronize()
        times = []
        for _ in range(repeats):
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) * 1e-3)  # elapsed_time is in milliseconds
        return times
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return times


def record(name, times, work, unit):
    """One Google Benchmark "iteration" entry: the median time, and the rate from it."""
    median = statistics.median(times)
    entry = {
        "name": name,
        "run_name": name,
        "run_type": "iteration",
        "repetitions": 1,
        "repetition_index": 0,
        "threads": 1,
        "iterations": len(times),
        "real_time": median * 1e6,
        "cpu_time": median * 1e6,
        "time_unit": "us",
        "min_us": min(times) * 1e6,
        "mean_us": statistics.fmean(times) * 1e6,
    }
    if unit == "flops":
        entry["GFLOP/s"] = work / median * 1e-9
        entry["TFLOP/s"] = work / median * 1e-12
    else:
        entry["GB/s"] = work / median * 1e-9
    return entry


def set_tf32(on):
    matmul = torch.backends.cuda.matmul
    if has_setting(matmul, "fp32_precision"):
        matmul.fp32_precision = "tf32" if on else "ieee"
    else:
        matmul.allow_tf32 = on


def run_workloads(device, sizes, small, warmup, repeats, log, w3_modes=False):
    prefix = "torch_" + device
    gen = torch.Generator(device=device).manual_seed(0)

    def rand(*shape):
        return torch.rand(*shape, generator=gen, device=device, dtype=torch.float32) * 2 - 1

    entries = []

    def add(entry):
        entries.append(entry)
        rate = entry.get("GFLOP/s", entry.get("GB/s"))
        unit = "GFLOP/s" if "GFLOP/s" in entry else "GB/s"
        print(f"{entry['name']:<40} {entry['real_time']:>12.1f} us {rate:>10.1f} {unit}", file=log, flush=True)

    for n in sizes:
        a, b = rand(n, n), rand(n, n)
        times = time_calls(lambda: torch.matmul(a, b), device, warmup, repeats)
        add(record(f"{prefix}/W3_matmul/{n}", times, 2.0 * n**3, "flops"))
        if w3_modes and device == "cuda":
            # TF32 (10-bit mantissas on the tensor cores), then f16 and bf16 operands with f32
            # accumulation, the modes tensorgrad's matmul_precision and 16-bit dtypes are set beside.
            set_tf32(True)
            times = time_calls(lambda: torch.matmul(a, b), device, warmup, repeats)
            add(record(f"{prefix}/W3_matmul_tf32/{n}", times, 2.0 * n**3, "flops"))
            set_tf32(False)
            for name, dtype in (("f16", torch.float16), ("bf16", torch.bfloat16)):
                a16, b16 = a.to(dtype), b.to(dtype)
                times = time_calls(lambda: torch.matmul(a16, b16), device, warmup, repeats)
                add(record(f"{prefix}/W3_matmul_{name}/{n}", times, 2.0 * n**3, "flops"))
                del a16, b16
        del a, b

    log2_n = 20 if small else 26
    n = 1 << log2_n
    a, b = rand(n), rand(n)
    # Out of place with a fresh output each call, as the tensorgrad programs write a new output.
    times = time_calls(lambda: torch.add(a, b), device, warmup, repeats)
    add(record(f"{prefix}/W4_add_2^{log2_n}", times, 12.0 * n, "bytes"))
    del a, b

    rows, cols = (512, 4096) if small else (8192, 4096)
    x = rand(rows, cols)
    times = time_calls(lambda: torch.softmax(x, dim=-1), device, warmup, repeats)
    add(record(f"{prefix}/W5_softmax_{rows}x{cols}", times, 8.0 * rows * cols, "bytes"))
    del x
    return entries


def context(device, threads, precision):
    ctx = {
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "host_name": platform.node(),
        "executable": os.path.abspath(__file__),
        "num_cpus": os.cpu_count(),
        "library_build_type": "release",
        "framework": "pytorch",
        "torch_version": torch.__version__,
        "python_version": platform.python_version(),
        "device": device,
        "fp32_precision": precision,
    }
    if device == "cuda":
        ctx["device_name"] = torch.cuda.get_device_name()
        ctx["cuda_version"] = torch.version.cuda
    else:
        ctx["device_name"] = platform.processor() or platform.machine()
        ctx["threads"] = threads
    return ctx


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--sizes", default=None,
                        help="W3 matmul sizes, comma separated (default: 1024,2048,4096,8192 on cuda, "
                             "1024,2048 on cpu; with --small 128,256)")
    parser.add_argument("--small", action="store_true",
                        help="small workloads (W4 2^20, W5 512x4096, W3 128,256) to check the script")
    parser.add_argument("--w3-modes", action="store_true",
                        help="also W3 in TF32, f16 and bf16 (cuda): W3_matmul_tf32/_f16/_bf16/<n>")
    parser.add_argument("--warmup", type=int, default=3, help="untimed calls before timing")
    parser.add_argument("--repeats", type=int, default=None, help="timed calls (default: 20 on cuda, 5 on cpu)")
    parser.add_argument("--threads", type=int, default=os.cpu_count(),
                        help="CPU threads for PyTorch (default: every core, as TBB uses)")
    parser.add_argument("--out", default=None, help="write the JSON report here (default: stdout)")
    args = parser.parse_args()

    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("pytorch_workloads.py: CUDA is not available to this PyTorch")
    if args.sizes:
        sizes = [int(s) for s in args.sizes.split(",") if s]
    elif args.small:
        sizes = [128, 256]
    else:
        sizes = [1024, 2048, 4096, 8192] if args.device == "cuda" else [1024, 2048]
    repeats = args.repeats or (20 if args.device == "cuda" else 5)

    torch.set_num_threads(args.threads)
    precision = keep_fp32()
    # The progress lines go to stderr when the report goes to stdout.
    log = sys.stdout if args.out else sys.stderr
    with torch.no_grad():
        entries = run_workloads(args.device, sizes, args.small, args.warmup, repeats, log, args.w3_modes)
    report = {"context": context(args.device, args.threads, precision), "benchmarks": entries}
    text = json.dumps(report, indent=2)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    else:
        print(text)


if __name__ == "__main__":
    main()
