#!/usr/bin/python3
"""Fused attention, tensorgrad against PyTorch, as markdown (bench/gpu_run.sh's attention mode writes it).

Reads Google Benchmark style reports and capacity JSON lines (any may be missing; what is missing is
left out of the tables):
  --ours FILE...            tg_train_bench's reports: train/vulkan/W2, W2_bf16, W6, W6_bf16 (tg::attention
                            inside examples/models.h's MultiHeadAttention); counters batch, plan_bytes
  --torch FILE...           pytorch_train.py's reports: torch_cuda_<eager|graph|compile>/<W2|W6>[_bf16][_sdpa]
                            (without _sdpa the mirror's matmul, -inf mask and softmax; with it
                            scaled_dot_product_attention); counters batch, peak_bytes, compile_s,
                            sdpa_vs_mirror
  --ours-capacity P=FILE    tg_w6_capacity's JSON lines, P the precision it ran in (f32, bf16)
  --torch-capacity FILE...  pytorch_train.py --w6-capacity's JSON lines (each names side and workload)
  --dir DIR                 all of these by gpu_run.sh's names: attn_vk_*.json, attn_torch_*.json,
                            attn_capacity_vk_<P>.jsonl, attn_capacity_torch_*.jsonl
and prints: the median step time and the memory of each side at the timed batch (tensorgrad: the step's
whole device plan, Training::memory_plan(); PyTorch: torch.cuda.max_memory_allocated(), which leaves
out the caching allocator's reserve and the CUDA context on both sides), the time of PyTorch's fastest
way next to ours; the compile times and the SDPA-against-mirror loss check; the largest W6 batch each
side fits; and any entry that failed.

  python3 bench/attention_report.py --dir out/
"""
import argparse
import glob
import json
import os
import re

GIB = 2**30
TIME_TO_MS = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}
KEY = re.compile(r"^(W2|W6)(?:_(bf16|f16))?(_sdpa)?$")
# PyTorch's ways of running the step, in the table's column order: (mode, sdpa), column title.
TORCH_COLUMNS = [(("eager", False), "PyTorch eager"), (("eager", True), "eager SDPA"),
                 (("graph", False), "CUDA graph"), (("graph", True), "graph SDPA"),
                 (("compile", False), "compile"), (("compile", True), "compile SDPA")]
ROWS = [("W2", "f32"), ("W2", "bf16"), ("W6", "f32"), ("W6", "bf16")]


def split(name):
    """(prefix, workload, precision, sdpa) of a benchmark name, or None for other workloads."""
    name = re.sub(r"(/iterations:\d+)?(/real_time|/manual_time)?$", "", name)
    prefix, _, key = name.rpartition("/")
    m = KEY.match(key)
    if not m:
        return None
    return prefix, m[1], m[2] or "f32", bool(m[3])


def display(prefix, workload, precision, sdpa):
    """The entry's name without Google Benchmark's endings: train/vulkan/W6_bf16, torch_cuda_eager/W6_sdpa."""
    return f"{prefix}/{workload}{'' if precision == 'f32' else '_' + precision}{'_sdpa' if sdpa else ''}"


def load_reports(paths):
    """[(prefix, workload, precision, sdpa, entry)] of every W2/W6 entry in the reports."""
    out = []
    for path in paths:
        try:
            with open(path) as f:
                report = json.load(f)
        except (OSError, json.JSONDecodeError):
            continue  # a report cut short
        for e in report.get("benchmarks", []):
            if e.get("run_type") == "aggregate":
                continue
            parts = split(e.get("run_name", e.get("name", "")))
            if parts:
                out.append(parts + (e,))
    return out


def load_lines(path):
    """(tries {workload key: {batch: try}}, summaries {key: summary}) of a capacity file."""
    tries, summaries = {}, {}
    if not path or not os.path.exists(path):
        return tries, summaries
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line.startswith("{"):
                continue
            try:
                entry = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line cut short by a timeout
            if "context" in entry:
                continue
            key = (entry.get("side"), entry.get("workload", "W6"))
            if entry.get("summary"):
                summaries[key] = entry
            else:
                tries.setdefault(key, {})[entry["batch"]] = entry
    return tries, summaries


def step_ms(entry):
    return entry["real_time"] * TIME_TO_MS[entry.get("time_unit", "ns")]


def gib(value):
    return "–" if value is None else f"{value / GIB:.2f} GiB"


def memory_of(entry):
    return entry.get("plan_bytes", entry.get("peak_bytes"))


def cell(entry):
    if entry is None:
        return "–"
    if entry.get("error_occurred"):
        return "failed"
    return f"{step_ms(entry):.1f} ms, {gib(memory_of(entry))}"


def time_table(ours, torch):
    """Step time and memory per workload and precision, ours then each PyTorch way."""
    ours_by = {(w, p): e for _, w, p, _, e in ours}
    torch_by = {}
    for prefix, w, p, sdpa, e in torch:
        mode = prefix.rsplit("_", 1)[-1]  # torch_cuda_eager -> eager
        torch_by[(w, p, mode, sdpa)] = e
    if not ours_by and not torch_by:
        return None
    header = ["workload", "batch", "tensorgrad (fused attention)"] + [t for _, t in TORCH_COLUMNS] + \
        ["fastest PyTorch / ours"]
    lines = ["| " + " | ".join(header) + " |", "|---" * len(header) + "|"]
    for w, p in ROWS:
        ours_entry = ours_by.get((w, p))
        row = [torch_by.get((w, p, mode, sdpa)) for (mode, sdpa), _ in TORCH_COLUMNS]
        if ours_entry is None and not any(row):
            continue
        batch = next((e.get("batch") for e in [ours_entry] + row if e and e.get("batch")), None)
        ok = [(step_ms(e), title) for e, (_, title) in zip(row, TORCH_COLUMNS) if e and not e.get("error_occurred")]
        ratio = "–"
        if ok and ours_entry and not ours_entry.get("error_occurred"):
            best, title = min(ok)
            ratio = f"{best / step_ms(ours_entry):.2f} ({title})"
        # Google Benchmark's counters are floats: batch 8 arrives as 8.0.
        batch_text = f"{batch:g}" if isinstance(batch, (int, float)) else (batch or "–")
        cells = [f"{w} {p}", batch_text, cell(ours_entry)] + [cell(e) for e in row] + [ratio]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def checks_table(torch):
    """compile_s and sdpa_vs_mirror of the PyTorch entries that have them."""
    lines = ["| PyTorch entry | compile (first step) | SDPA loss vs the mirror's (relative) | loss |",
             "|---|---|---|---|"]
    for prefix, w, p, sdpa, e in torch:
        if "compile_s" not in e and "sdpa_vs_mirror" not in e:
            continue
        compile_s = f"{e['compile_s']:.1f} s" if "compile_s" in e else "–"
        check = f"{e['sdpa_vs_mirror']:.1e}" if "sdpa_vs_mirror" in e else "–"
        lines.append(f"| {display(prefix, w, p, sdpa)} | {compile_s} | {check} | {e.get('loss', 0):.4f} |")
    return "\n".join(lines) if len(lines) > 2 else None


def capacity_table(ours_capacity, torch_capacity):
    """The largest W6 batch of each search."""
    searches = []  # (label, tries by batch, summary)
    for precision, path in ours_capacity:
        tries, summaries = load_lines(path)
        for key, s in summaries.items():
            searches.append((f"tensorgrad Vulkan {precision}", tries.get(key, {}), s))
    for path in torch_capacity:
        tries, summaries = load_lines(path)
        for (side, workload), s in summaries.items():
            searches.append((f"{side} {workload}", tries.get((side, workload), {}), s))
    if not searches:
        return None
    lines = ["| W6 capacity | largest batch that ran | smallest that failed | search stopped | memory there | "
             "step there | tokens/s there | why the smallest failed one failed |", "|---|---|---|---|---|---|---|---|"]
    for label, tries, s in searches:
        largest, failed_batch = s.get("largest_ok_batch"), s.get("smallest_failed_batch")
        best, failed = tries.get(largest), tries.get(failed_batch)
        t = best.get("median_step_ms") if best else None
        tokens = f"{largest * 1024 / (t / 1e3):,.0f}" if t else "–"
        why = "–"
        if failed:
            why = " ".join(f"{failed.get('error_type', '')}: {failed.get('error', '')}".split())
            why = (why if len(why) <= 100 else why[:97] + "...").replace("|", "\\|")
        step = f"{t:.1f} ms" if t else "–"
        lines.append(f"| {label} | {largest} | {failed_batch or '–'} | {s.get('stopped')} | "
                     f"{gib(memory_of(best)) if best else '–'} | {step} | {tokens} | {why} |")
    return "\n".join(lines)


def failures(entries):
    out = [f"- {display(prefix, w, p, sdpa)}: {' '.join(e.get('error_message', '').split())[:300]}"
           for prefix, w, p, sdpa, e in entries if e.get("error_occurred")]
    return "\n".join(out) if out else None


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dir", help="gpu_run.sh attention's output folder (its file names)")
    parser.add_argument("--ours", nargs="*", default=[], help="tg_train_bench JSON reports")
    parser.add_argument("--torch", nargs="*", default=[], help="pytorch_train.py JSON reports")
    parser.add_argument("--ours-capacity", nargs="*", default=[], help="PRECISION=FILE, tg_w6_capacity's JSON lines")
    parser.add_argument("--torch-capacity", nargs="*", default=[], help="pytorch_train.py --w6-capacity's JSON lines")
    args = parser.parse_args()

    ours_paths, torch_paths, torch_capacity = list(args.ours), list(args.torch), list(args.torch_capacity)
    ours_capacity = []
    for item in args.ours_capacity:
        precision, sep, path = item.partition("=")
        if not sep:
            parser.error(f"--ours-capacity takes PRECISION=FILE, not {item!r}")
        ours_capacity.append((precision, path))
    if args.dir:
        ours_paths += sorted(glob.glob(os.path.join(args.dir, "attn_vk_*.json")))
        torch_paths += sorted(glob.glob(os.path.join(args.dir, "attn_torch_*.json")))
        for path in sorted(glob.glob(os.path.join(args.dir, "attn_capacity_vk_*.jsonl"))):
            ours_capacity.append((os.path.basename(path)[len("attn_capacity_vk_"):-len(".jsonl")], path))
        torch_capacity += sorted(glob.glob(os.path.join(args.dir, "attn_capacity_torch_*.jsonl")))

    ours, torch = load_reports(ours_paths), load_reports(torch_paths)
    sections = [
        ("Median step and memory at the timed batch (tensorgrad: the step's device plan; PyTorch: peak "
         "allocated); the last column is PyTorch's fastest time over ours (above 1: ours faster)",
         time_table(ours, torch)),
        ("PyTorch's compile times and the SDPA check", checks_table(torch)),
        ("The largest W6 batch each side fits", capacity_table(ours_capacity, torch_capacity)),
        ("Failed entries", failures(ours + torch)),
    ]
    text = "\n\n".join(f"### {title}\n\n{body}" for title, body in sections if body)
    print(text or "attention_report.py: nothing to report (no input file found)")


if __name__ == "__main__":
    main()
