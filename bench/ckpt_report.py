#!/usr/bin/python3
"""Markdown tables for bench/gpu_run.sh's `ckpt` mode (issue 17): gradient checkpointing's memory
saved and step time paid, tensorgrad on Vulkan next to PyTorch on CUDA, and the parallel
interpreter's speedup.

  python3 bench/ckpt_report.py --ours vk_w2.json vk_w6.json --torch torch_eager.json torch_graph.json \\
      --parallel 16=parallel_16.json 2=parallel_2.json

--ours: tg_train_bench reports (train/vulkan/<W>[_ckpt]/...: real_time, "plan_bytes" (the step's
device allocations) and "peak_live_bytes" (the plan's most bytes alive at once)). --torch:
pytorch_train.py reports (torch_cuda_<mode>/<W>[_ckpt]: real_time, "peak_bytes" =
torch.cuda.max_memory_allocated()). For each workload and side: the step time without and with
every block checkpointed and the ratio (time paid), the memory figure without and with and the
fraction saved. A failed or missing benchmark shows as such. --parallel THREADS=FILE:
tg_interp_parallel_bench reports, one table row per workload: sequential and parallel schedule
times and the speedup (sequential / parallel).
"""
import argparse
import json
import os

TO_MS = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}


def load(path):
    """The benchmarks of one Google Benchmark-format JSON report, or [] when the file is missing or
    unreadable (a command that timed out leaves none)."""
    try:
        with open(path) as f:
            return json.load(f).get("benchmarks", [])
    except (OSError, ValueError):
        return []


def index(paths, key_of):
    """{key: entry} for the entries whose key_of(name) is not None. With --benchmark_repetitions the
    median aggregate stands for its runs (the other aggregates are skipped)."""
    found, medians = {}, set()
    for path in paths:
        for e in load(path):
            median = e.get("run_type") == "aggregate"
            if median and e.get("aggregate_name") != "median":
                continue
            key = key_of(e.get("run_name" if median else "name", ""))
            if key is None or (key in medians and not median):
                continue
            found[key] = e
            if median:
                medians.add(key)
    return found


def ours_key(name):
    # train/vulkan/W2_ckpt/min_time:0.500/real_time -> ("tensorgrad vulkan", "W2_ckpt")
    parts = name.split("/")
    return ("tensorgrad " + parts[1], parts[2]) if len(parts) >= 3 and parts[0] == "train" else None


def torch_key(name):
    # torch_cuda_eager/W2_ckpt -> ("torch cuda eager", "W2_ckpt")
    side, _, workload = name.partition("/")
    return (side.replace("_", " "), workload) if side.startswith("torch_") and workload else None


def step_ms(e):
    return e["real_time"] * TO_MS[e.get("time_unit", "ns")]


def mib(value):
    return f"{value / 2**20:,.1f} MiB"


def cell(e, what):
    """(text, number or None) of one entry's figure: step time in ms, or a byte counter."""
    if e is None:
        return "missing", None
    if e.get("error_occurred"):
        message = " ".join(str(e.get("error_message", "error")).split())[:80]
        return "error: " + message.replace("|", "\\|"), None
    if what == "time":
        return f"{step_ms(e):.2f} ms", step_ms(e)
    if what not in e:
        return "n/a", None
    return mib(e[what]), float(e[what])


def ckpt_table(entries, workloads):
    lines = ["| workload | side | figure | plain | every block checkpointed | change |", "|---|---|---|---|---|---|"]
    sides = sorted({side for side, _ in entries}, key=lambda s: (not s.startswith("tensorgrad"), s))
    for w in workloads:
        for side in sides:
            plain, ckpt = entries.get((side, w)), entries.get((side, w + "_ckpt"))
            if plain is None and ckpt is None:
                continue
            figures = [("step time", "time")]
            if side.startswith("tensorgrad"):
                figures += [("plan peak alive", "peak_live_bytes"), ("plan allocated", "plan_bytes")]
            else:
                figures += [("max_memory_allocated", "peak_bytes")]
            for label, what in figures:
                (a_text, a), (b_text, b) = cell(plain, what), cell(ckpt, what)
                change = ""
                if a and b is not None:
                    change = f"x{b / a:.2f} time" if what == "time" else f"{(a - b) / a:.1%} saved"
                lines.append(f"| {w} | {side} | {label} | {a_text} | {b_text} | {change} |")
    return "\n".join(lines)


def bare_name(name):
    """A benchmark's name without Google Benchmark's suffixes (/real_time, /min_time:0.5, ...)."""
    parts = name.split("/")
    while parts and (":" in parts[-1] or parts[-1] in ("real_time", "manual_time")):
        parts.pop()
    return "/".join(parts)


def parallel_table(runs):
    lines = ["| threads | workload | sequential | parallel | speedup |", "|---|---|---|---|---|"]
    for threads, path in runs:
        by_name = index([path], bare_name)
        for name, e in by_name.items():
            if not name.endswith("/sequential"):
                continue
            workload = name[: -len("/sequential")]
            (s_text, s), (p_text, p) = cell(e, "time"), cell(by_name.get(workload + "/parallel"), "time")
            speedup = f"{s / p:.2f}x" if s and p else ""
            lines.append(f"| {threads} | {workload} | {s_text} | {p_text} | {speedup} |")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ours", nargs="*", default=[], help="tg_train_bench JSON reports")
    parser.add_argument("--torch", nargs="*", default=[], help="pytorch_train.py JSON reports")
    parser.add_argument("--workloads", default="W2,W6", help="base workloads, comma separated (default W2,W6)")
    parser.add_argument("--parallel", nargs="*", default=[], metavar="THREADS=FILE",
                        help="tg_interp_parallel_bench JSON reports, each with its thread count")
    args = parser.parse_args()
    entries = index(args.ours, ours_key)
    entries.update(index(args.torch, torch_key))
    print("## Gradient checkpointing: every transformer block checkpointed\n")
    print("Ours: tg_train_bench train/vulkan/<W>[_ckpt] (plan peak alive = vk::plan_memory's peak_live_bytes, "
          "plan allocated = Training::memory_plan().total_bytes); PyTorch: pytorch_train.py with "
          "torch.utils.checkpoint.checkpoint(block, h, use_reentrant=False), peak = "
          "torch.cuda.max_memory_allocated(). Change: checkpointed / plain step time, memory saved.\n")
    print(ckpt_table(entries, args.workloads.split(",")))
    runs = []
    for item in args.parallel:
        threads, _, path = item.partition("=")
        if os.path.exists(path):
            runs.append((threads, path))
    if runs:
        print("\n## Parallel interpreter schedule (tg_interp_parallel_bench, f32)\n")
        print(parallel_table(runs))


if __name__ == "__main__":
    main()
