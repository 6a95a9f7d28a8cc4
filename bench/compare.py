#!/usr/bin/python3
"""Pairs Google Benchmark JSON reports and prints markdown tables of ours against a reference.

Every benchmark name is "<prefix>/<key>": the prefix says who ran it (vk, interp_f32, interp_f64,
torch_cuda, torch_cpu; train/<backend> for bench/train_bench.cpp's train/<backend>/<workload>, whose
PyTorch counterparts are torch_<device>_<eager|graph>), the key what ran (W3_matmul/4096,
W4_add_2^26, add/2048x2048,2048x2048, W1).
Google Benchmark's "/iterations:N", "/real_time" and "/manual_time" endings are dropped. Rows pair the key under the
--ours prefix with the same key under each other prefix found (one table per reference prefix):

  python3 bench/compare.py vk_workloads.json torch_cuda.json            # vk against torch_cuda
  python3 bench/compare.py vk_ops.json interp_ops.json --ref interp_f32  # vk against the interpreter

Each cell is the time (real_time: the kernel's device time for vk, the median call for PyTorch, the
whole interpret() call for interp_*) and the rate counter (GFLOP/s, else GB/s). ratio is the
reference's time over ours: above 1 ours is faster. With --benchmark_repetitions the "median"
aggregate is used; several plain entries of one name give their median.
"""
import argparse
import json
import math
import re
import statistics
import sys

TIME_TO_US = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}

# bench/interp_workloads_bench.cpp names its workloads without a prefix and in an older form.
LEGACY_WORKLOADS = [
    (re.compile(r"^W3_matmul/n=(\d+)$"), lambda m: f"W3_matmul/{m[1]}"),
    (re.compile(r"^W4_add/n=(\d+)$"),
     lambda m: f"W4_add_2^{int(m[1]).bit_length() - 1}" if int(m[1]) & (int(m[1]) - 1) == 0 else f"W4_add_{m[1]}"),
    (re.compile(r"^W5_softmax/(\d+x\d+)$"), lambda m: f"W5_softmax_{m[1]}"),
]


def split_name(name):
    """(prefix, key) of a benchmark name, without Google Benchmark's timing suffix."""
    # "/iterations:N" is there when a benchmark fixes its iteration count (the vk ones do).
    name = re.sub(r"(/iterations:\d+)?(/real_time|/manual_time)?$", "", name)
    for pattern, rewrite in LEGACY_WORKLOADS:
        m = pattern.match(name)
        if m:
            return "interp_f32", rewrite(m)
    prefix, _, key = name.partition("/")
    if prefix == "train":  # bench/train_bench.cpp: train/<backend>/<workload>, paired by <workload>
        backend, _, key = key.partition("/")
        prefix = f"train/{backend}"
    return prefix, key


def rates(entry):
    """The entry's rate counters in GFLOP/s and GB/s (either may be None)."""
    gflops = entry.get("GFLOP/s")
    if gflops is None and "TFLOP/s" in entry:
        gflops = entry["TFLOP/s"] * 1e3
    gbs = entry.get("GB/s")
    if gbs is None and "bytes_per_second" in entry:
        gbs = entry["bytes_per_second"] * 1e-9
    return gflops, gbs


class Result:
    def __init__(self, entries):
        self.error = next((e.get("error_message", "error") for e in entries if e.get("error_occurred")), None)
        ok = [e for e in entries if not e.get("error_occurred")]
        if not ok:
            self.time_us = self.gflops = self.gbs = self.wall_us = None
            return
        # Several plain entries (repetitions without aggregates): the one with the median time.
        ok.sort(key=lambda e: e["real_time"] * TIME_TO_US[e.get("time_unit", "ns")])
        chosen = ok[(len(ok) - 1) // 2]
        self.time_us = chosen["real_time"] * TIME_TO_US[chosen.get("time_unit", "ns")]
        self.gflops, self.gbs = rates(chosen)
        self.wall_us = chosen.get("wall_us")


def load(paths):
    """{prefix: {key: Result}}, keys in the order first seen."""
    grouped = {}
    for path in paths:
        with open(path) as f:
            report = json.load(f)
        entries = report.get("benchmarks", [])
        aggregated = {e.get("run_name") for e in entries if e.get("run_type") == "aggregate"}
        for e in entries:
            run_name = e.get("run_name", e["name"])
            if e.get("run_type") == "aggregate":
                if e.get("aggregate_name") != "median":
                    continue
            elif run_name in aggregated:
                continue  # the median aggregate stands for these
            prefix, key = split_name(run_name)
            grouped.setdefault(prefix, {}).setdefault(key, []).append(e)
    return {p: {k: Result(es) for k, es in keys.items()} for p, keys in grouped.items()}


def format_time(us):
    if us is None:
        return "–"
    if us < 1e3:
        return f"{us:.1f} µs"
    if us < 1e6:
        return f"{us / 1e3:.2f} ms"
    return f"{us / 1e6:.2f} s"


def number(value):
    """Three significant digits, without an exponent up to 10^6: 0.0123, 4.56, 789, 12345."""
    return f"{value:.0f}" if value >= 100 else f"{value:.3g}"


def format_rate(r):
    if r.gflops is not None:
        return f"{number(r.gflops / 1e3)} TFLOP/s" if r.gflops >= 1e3 else f"{number(r.gflops)} GFLOP/s"
    if r.gbs is not None:
        return f"{number(r.gbs)} GB/s"
    return ""


def cell(r):
    if r is None:
        return "–"
    if r.time_us is None:
        # The first line, shortened: a table cell holds no newline and should stay readable.
        message = " ".join((r.error or "no result").splitlines()[0].split())
        message = message if len(message) <= 80 else message[:77] + "..."
        return "error: " + message.replace("|", "\\|")
    rate = format_rate(r)
    return format_time(r.time_us) + (f" ({rate})" if rate else "")


def ratio(ours, ref):
    if not ours or not ref or not ours.time_us or not ref.time_us:
        return "–"
    value = ref.time_us / ours.time_us
    return f"{value:.3g}×" if math.isfinite(value) else "–"


def table(ours_prefix, ours, ref_prefix, ref, paired_only):
    keys = [k for k in ours if k in ref] if paired_only else list(ours)
    if not keys:
        return None
    show_wall = any(ours[k].wall_us is not None for k in keys)
    header = ["benchmark", ours_prefix] + (["wall (run())"] if show_wall else []) + [ref_prefix,
                                                                                    f"ratio ({ref_prefix} time / ours)"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for k in keys:
        row = [k.replace("|", "\\|"), cell(ours[k])]
        if show_wall:
            row.append(format_time(ours[k].wall_us))
        row += [cell(ref.get(k)), ratio(ours[k], ref.get(k))]
        lines.append("| " + " | ".join(row) + " |")
    paired = [k for k in keys if k in ref and ours[k].time_us and ref[k].time_us]
    if paired:
        values = [ref[k].time_us / ours[k].time_us for k in paired]
        lines.append("")
        lines.append(f"{len(paired)} paired; ratio geometric mean {statistics.geometric_mean(values):.3g}×, "
                     f"min {min(values):.3g}×, max {max(values):.3g}×.")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("reports", nargs="+", help="Google Benchmark JSON files (--benchmark_out_format=json)")
    parser.add_argument("--ours", default="vk", help="prefix of our benchmarks (default: vk)")
    parser.add_argument("--ref", action="append", default=None,
                        help="reference prefix to compare with (repeatable; default: every other prefix)")
    parser.add_argument("--paired-only", action="store_true", help="leave out our rows without a reference")
    args = parser.parse_args()

    results = load(args.reports)
    if args.ours not in results:
        sys.exit(f"compare.py: no benchmark named {args.ours}/... in {', '.join(args.reports)} "
                 f"(prefixes found: {', '.join(sorted(results)) or 'none'})")
    refs = args.ref or [p for p in results if p != args.ours]
    missing = [p for p in refs if p not in results]
    if missing:
        sys.exit(f"compare.py: no benchmark named {missing[0]}/... (prefixes found: {', '.join(sorted(results))})")
    tables = [t for p in refs if (t := table(args.ours, results[args.ours], p, results[p], args.paired_only))]
    if not tables:
        sys.exit("compare.py: nothing to compare")
    print("\n\n".join(tables))


if __name__ == "__main__":
    main()
