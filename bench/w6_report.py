#!/usr/bin/python3
"""W6's memory and capacity next to PyTorch, as markdown (bench/gpu_run.sh's w6 mode writes it).

Reads what the w6 mode wrote (any of them may be missing; their sections are then left out):
  --vk      tg_train_bench's JSON report with train/vulkan/W6 (counters steps/s, loss, batch,
            plan_bytes, unshared_bytes)
  --torch   pytorch_train.py --w6's report (torch_cuda_<mode>/W6 with batch, peak_bytes,
            reserved_bytes)
  --vk-capacity, --torch-capacity   the JSON lines of tg_w6_capacity and of
            pytorch_train.py --w6-capacity (a line per try, a summary line per side)
and prints three tables: the timed batch (step time, tokens/s and memory of each side), the largest
batch each side fits (with its memory and step time), and every batch a capacity search tried, the
memory of each side per batch. bench/compare.py gives the usual time ratio table.

  python3 bench/w6_report.py --vk w6_vk.json --torch w6_torch.json \\
      --vk-capacity w6_capacity_vk.jsonl --torch-capacity w6_capacity_torch.jsonl
"""
import argparse
import json
import os
import re

GIB = 2**30


def gib(value):
    return "–" if value is None else f"{value / GIB:.2f} GiB"


def ms(value):
    return "–" if value is None else f"{value:.1f} ms"


def load_report(path):
    """{side: entry} of the W6 entries of a Google Benchmark style report."""
    if not path or not os.path.exists(path):
        return {}
    with open(path) as f:
        report = json.load(f)
    out = {}
    for e in report.get("benchmarks", []):
        name = re.sub(r"(/iterations:\d+)?(/real_time|/manual_time)?$", "", e.get("run_name", e["name"]))
        if name.endswith("/W6"):
            out[name[:-len("/W6")]] = e
    return out


def load_lines(path, default_side):
    """(tries by side, summaries by side) from a capacity file of JSON lines."""
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
            side = entry.get("side", default_side)
            if entry.get("workload", "W6") != "W6":  # pytorch_train.py --w6-capacity --sdpa / --autocast
                side += " " + entry["workload"]
            if entry.get("summary"):
                summaries[side] = entry
            else:
                tries.setdefault(side, {})[entry["batch"]] = entry
    return tries, summaries


def step_ms(entry):
    """Median step time in ms of a report entry."""
    scale = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}[entry.get("time_unit", "ns")]
    return entry["real_time"] * scale


def timed_table(vk, torch):
    rows = []
    for side, e in list(vk.items()) + list(torch.items()):
        if e.get("error_occurred"):
            rows.append(f"| {side} | – | – | – | error: {e.get('error_message', '')[:100]} |")
            continue
        batch = e.get("batch")
        t = step_ms(e)
        tokens = f"{batch * 1024 / (t / 1e3):,.0f}" if batch else "–"
        if "plan_bytes" in e:
            memory = f"plan {gib(e['plan_bytes'])} (one slot per value: {gib(e.get('unshared_bytes'))})"
        elif "peak_bytes" in e:
            memory = f"peak allocated {gib(e['peak_bytes'])} (reserved {gib(e.get('reserved_bytes'))})"
        else:
            memory = "–"
        rows.append(f"| {side} | {batch if batch else '–'} | {ms(t)} | {tokens} | {memory} |")
    if not rows:
        return None
    return "\n".join(["| W6 step | batch | median step | tokens/s | device memory |", "|---|---|---|---|---|"] + rows)


def memory_of(entry):
    return entry.get("plan_bytes", entry.get("peak_bytes"))


def capacity_table(tries, summaries):
    rows = []
    for side, s in summaries.items():
        best = tries.get(side, {}).get(s.get("largest_ok_batch"))
        failed = tries.get(side, {}).get(s.get("smallest_failed_batch"))
        failure = "–"
        if failed:
            failure = " ".join(f"{failed.get('error_type', '')}: {failed.get('error', '')}".split())
            failure = (failure if len(failure) <= 120 else failure[:117] + "...").replace("|", "\\|")
        batch = s.get("largest_ok_batch")
        t = best.get("median_step_ms") if best else None
        tokens = f"{batch * 1024 / (t / 1e3):,.0f}" if best and t else "–"
        rows.append(f"| {side} | {batch} | {s.get('smallest_failed_batch') or '–'} | {s.get('stopped')} | "
                    f"{gib(memory_of(best)) if best else '–'} | {ms(t)} | {tokens} | {failure} |")
    if not rows:
        return None
    header = ["| largest W6 batch | ran | smallest failed | search stopped | memory at the largest | step there | "
              "tokens/s there | why the smallest failed one failed |", "|---|---|---|---|---|---|---|---|"]
    return "\n".join(header + rows)


def per_batch_table(tries):
    sides = list(tries)
    batches = sorted({b for side in sides for b in tries[side]})
    if not batches:
        return None
    lines = ["| batch | " + " | ".join(f"{s} memory, step" for s in sides) + " |", "|---|" + "---|" * len(sides)]
    for b in batches:
        cells = []
        for s in sides:
            e = tries[s].get(b)
            if e is None:
                cells.append("–")
            elif e.get("ok"):
                cells.append(f"{gib(memory_of(e))}, {ms(e.get('median_step_ms'))}")
            else:
                cells.append(f"failed ({e.get('error_type', '')})".replace("|", "\\|"))
        lines.append(f"| {b} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--vk", help="tg_train_bench's JSON report (train/vulkan/W6)")
    parser.add_argument("--torch", help="pytorch_train.py --w6's JSON report")
    parser.add_argument("--vk-capacity", help="tg_w6_capacity's JSON lines")
    parser.add_argument("--torch-capacity", help="pytorch_train.py --w6-capacity's JSON lines")
    args = parser.parse_args()

    vk_tries, vk_summaries = load_lines(args.vk_capacity, "train/vulkan")
    torch_tries, torch_summaries = load_lines(args.torch_capacity, "torch_cuda")
    tries = {**vk_tries, **torch_tries}
    sections = [("W6 at the timed batch", timed_table(load_report(args.vk), load_report(args.torch))),
                ("The largest W6 batch each side fits", capacity_table(tries, {**vk_summaries, **torch_summaries})),
                ("Every batch tried", per_batch_table(tries))]
    text = "\n\n".join(f"### {title}\n\n{table}" for title, table in sections if table)
    print(text or "w6_report.py: nothing to report (no input file found)")


if __name__ == "__main__":
    main()
