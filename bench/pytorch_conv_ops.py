#!/usr/bin/env python3
"""PyTorch's side of the convolution kernel figures: conv2d, its input gradient and its weight
gradient at the shapes of tg_vk_ops_bench's vk_conv/ cases (3x3 kernels, stride 1, padding 1), each
next to the matmul of the implicit GEMM's shape, timed with CUDA events (or the wall clock on the
CPU). fp32 means fp32: TF32 is switched off for cuDNN and cuBLAS, so the figures compare with our
fp32 kernels. Prints a markdown table and writes JSON (--out) with the median microseconds and
GFLOP/s of each case.

Usage: python3 bench/pytorch_conv_ops.py [--device cuda|cpu] [--reps 50] [--out conv_torch.json]
"""
import argparse
import json
import statistics
import time

import torch
import torch.nn.functional as F

# (batch, in channels, out channels, image side): W7_small's two convolutions and two of W7's.
SHAPES = [(64, 1, 16, 8), (64, 16, 32, 8), (128, 16, 16, 32), (128, 32, 32, 32), (128, 64, 64, 16), (128, 64, 64, 32)]


def timed(fn, device, reps):
    """Median seconds of `reps` calls after three warm-up calls."""
    for _ in range(3):
        fn()
    times = []
    for _ in range(reps):
        if device == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end) * 1e-3)
        else:
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
    return statistics.median(times)


def cases(n, c, o, side, device):
    """(name, flops, fn) for the three conv ops and their same-shape matmuls."""
    def randn(*shape):
        return torch.randn(*shape, device=device, dtype=torch.float32)
    x, w, g = randn(n, c, side, side), randn(o, c, 3, 3), randn(n, o, side, side)
    pixels = n * side * side
    flops = 2 * pixels * o * c * 9
    a_f, b_f = randn(o, c * 9), randn(c * 9, pixels)
    a_i, b_i = randn(c, o * 9), randn(o * 9, pixels)
    a_w, b_w = randn(o, pixels), randn(pixels, c * 9)
    return [
        (f"conv2d/{n}x{c}x{side}x{side},{o}x{c}x3x3", flops, lambda: F.conv2d(x, w, padding=1)),
        (f"matmul/{o}x{c * 9},{c * 9}x{pixels}", flops, lambda: a_f @ b_f),
        (f"conv2d_input_grad/{n}x{o}x{side}x{side},{o}x{c}x3x3", flops,
         lambda: torch.nn.grad.conv2d_input(x.shape, w, g, padding=1)),
        (f"matmul/{c}x{o * 9},{o * 9}x{pixels}", flops, lambda: a_i @ b_i),
        (f"conv2d_weight_grad/{n}x{c}x{side}x{side},{n}x{o}x{side}x{side}", flops,
         lambda: torch.nn.grad.conv2d_weight(x, w.shape, g, padding=1)),
        (f"matmul/{o}x{pixels},{pixels}x{c * 9}", flops, lambda: a_w @ b_w),
    ]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--reps", type=int, default=50)
    parser.add_argument("--out")
    args = parser.parse_args()
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.manual_seed(0)
    name = torch.cuda.get_device_name() if args.device == "cuda" else f"CPU, {torch.get_num_threads()} threads"
    print(f"PyTorch {torch.__version__} on {name}, fp32 (TF32 off)\n")
    print("| case | median us | GFLOP/s |\n|---|---|---|")
    results = []
    with torch.no_grad():
        for shape in SHAPES:
            for case, flops, fn in cases(*shape, args.device):
                seconds = timed(fn, args.device, args.reps)
                results.append({"name": case, "us": seconds * 1e6, "gflops": flops / seconds * 1e-9})
                print(f"| {case} | {seconds * 1e6:.1f} | {flops / seconds * 1e-9:.1f} |")
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"device": name, "torch": torch.__version__, "cases": results}, f, indent=1)


if __name__ == "__main__":
    main()
