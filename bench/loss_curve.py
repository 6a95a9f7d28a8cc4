#!/usr/bin/python3
"""Loss curves of the char transformer (W2, W2_small, W6) in tensorgrad and PyTorch, from one init on
the same batches, per precision: f32, bf16 (mixed precision: torch.autocast / TrainingSpec::precision
compute bf16) and f16 (the same with dynamic loss scaling: GradScaler / LossScaling).

  train (the default):
    loss_curve.py --workload W2 --steps 100 --dir D --device cuda --precisions f32,bf16[,f16]
  writes D/init.safetensors (the model's init: tools/goldens_train.py's init_values drawn from a
  seeded torch.Generator, as bench/pytorch_train.py draws it; F32, tensorgrad's param names and
  [in, out] layouts; metadata: workload, seed, model config) and D/batches.safetensors (tokens and
  targets, I32 [steps, B, T]; targets = the next token), unless both are there already for the same
  workload, seed and at least as many steps (--fresh rewrites them). Then it trains the PyTorch
  mirror of examples/models.h (tools/goldens_train.py) from that init on those batches, once per
  precision, with AdamW lr 1e-3, weight decay 0.01 and tensorgrad's decay groups (foreach=False),
  and writes D/torch_<precision>.json: {"side", "precision", "workload", "device", "loss": [...],
  "step_ms": [...], "skipped": [...]} (skipped: f16 steps GradScaler skipped for Inf/NaN gradients).
  f32 on CUDA keeps TF32 off. f16 needs --device cuda (PyTorch 1.13's CPU autocast is bf16 only and
  its GradScaler CUDA only).

  tg_loss_curve (bench/loss_curve.cpp) trains tensorgrad on the same files:
    tg_loss_curve --dir D --workload W2 --precision bf16 --backend vulkan --steps 100

  compare:
    loss_curve.py compare --dir D
  reads D/torch_*.json and D/tg_*.json and prints a markdown table, a row per pair present:
  tg vs torch at each precision, and as the yardstick torch bf16 (f16) vs torch f32 and tg bf16
  (f16) vs tg f32: the largest |loss difference| and relative difference over the common steps,
  the difference at steps 1, 10, 50, 100 (those run), and both sides' first and last losses.
  --check-f32 REL exits 1 unless the f32 pair has as many steps and agrees to REL relative at
  every step (the bench.loss_curve_smoke CTest: same init, batches and math on both sides).
"""
import argparse
import contextlib
import ctypes
import json
import os
import struct
import sys
import time

import torch

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(BENCH_DIR), "tools"))
sys.path.insert(0, BENCH_DIR)
import goldens_train as models  # noqa: E402  (the PyTorch mirror of examples/models.h)
from pytorch_train import W2_FULL, W6_MODEL, TorchRng  # noqa: E402
from pytorch_workloads import keep_fp32  # noqa: E402

SEED = 2
LR = 1e-3
PRECISIONS = {"f32": None, "bf16": torch.bfloat16, "f16": torch.float16}
STORED = {torch.float32: "F32", torch.int32: "I32"}
LOADED = {value: key for key, value in STORED.items()}


def model_config(workload, w6_batch):
    if workload == "W2":
        return dict(W2_FULL)
    if workload == "W2_small":
        return dict(models.W2_SMALL)
    if workload == "W6":
        return dict(W6_MODEL, batch=w6_batch)
    raise SystemExit(f"loss_curve.py: unknown workload {workload} (W2, W2_small, W6)")


# ---- safetensors, with torch only (numpy may be missing on the GPU machine) ----

def write_safetensors(path, tensors, metadata):
    header, offset = {"__metadata__": metadata}, 0
    for name, t in tensors.items():
        size = t.numel() * t.element_size()
        header[name] = {"dtype": STORED[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + size]}
        offset += size
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for t in tensors.values():
            t = t.contiguous()
            f.write(ctypes.string_at(t.data_ptr(), t.numel() * t.element_size()))  # little-endian hosts
    os.replace(tmp, path)


def read_safetensors(path):
    with open(path, "rb") as f:
        blob = f.read()
    (length,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + length])
    metadata = header.pop("__metadata__", {})
    data = memoryview(blob)[8 + length:]
    tensors = {}
    for name, entry in header.items():
        begin, end = entry["data_offsets"]
        flat = torch.frombuffer(bytearray(data[begin:end]), dtype=LOADED[entry["dtype"]])
        tensors[name] = flat.reshape(entry["shape"])
    return tensors, metadata


def prepare(args, cfg):
    """(init, batches) from D, written first when missing, stale or --fresh."""
    init_path, batch_path = os.path.join(args.dir, "init.safetensors"), os.path.join(args.dir, "batches.safetensors")
    want = {"workload": args.workload, "seed": str(SEED), "model": json.dumps(cfg, sort_keys=True)}
    if not args.fresh and os.path.exists(init_path) and os.path.exists(batch_path):
        init, meta = read_safetensors(init_path)
        batches, batch_meta = read_safetensors(batch_path)
        stored_steps = batches["tokens"].shape[0]
        if {k: meta.get(k) for k in want} == want and batch_meta.get("workload") == args.workload \
                and stored_steps >= args.steps:
            print(f"reusing {init_path} and {batch_path} ({stored_steps} steps)", file=sys.stderr)
            return init, batches
        raise SystemExit(f"loss_curve.py: {args.dir} holds another run ({meta.get('workload')}, "
                         f"{stored_steps} steps, model {meta.get('model')}); pass --fresh or another --dir")
    os.makedirs(args.dir, exist_ok=True)
    rng = TorchRng(SEED)
    init = {n: v.float().contiguous() for n, v in models.init_values("w2", cfg, rng).items()}
    B, T = cfg["batch"], cfg["context"]
    stream = torch.randint(0, cfg["vocab"], (args.steps, B, T + 1), generator=rng.gen, dtype=torch.int64).int()
    batches = {"tokens": stream[:, :, :T].contiguous(), "targets": stream[:, :, 1:].contiguous()}
    write_safetensors(init_path, init, want)
    write_safetensors(batch_path, batches, {"workload": args.workload, "seed": str(SEED)})
    print(f"wrote {init_path} ({len(init)} params) and {batch_path} ({args.steps} steps, B {B}, T {T})",
          file=sys.stderr)
    return init, batches


def train(args, cfg, precision, init, batches):
    dtype = PRECISIONS[precision]
    device = args.device
    params = {n: v.to(device).clone().requires_grad_(True) for n, v in init.items()}
    decay = {n: d for n, _, d in models.transformer_params(cfg)}
    optimizer = models.make_optimizer(models.ADAMW, LR, params, decay, foreach=False)
    scaler = torch.cuda.amp.GradScaler() if dtype == torch.float16 else None
    mask = models.causal_mask(cfg["context"], device)
    losses, step_ms, skipped = [], [], []
    for step in range(args.steps):
        batch = {k: v[step].to(device) for k, v in batches.items()}
        start = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        region = torch.autocast(device_type=device, dtype=dtype) if dtype is not None else contextlib.nullcontext()
        with region:
            loss = models.transformer_loss(params, batch, cfg, mask)
        if scaler is not None:
            scale = scaler.get_scale()
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
            if scaler.get_scale() < scale:  # GradScaler backs off only when it skipped the step
                skipped.append(step + 1)
        else:
            loss.backward()
            optimizer.step()
        losses.append(loss.item())  # synchronizes
        step_ms.append((time.perf_counter() - start) * 1e3)
        if step == 0 or (step + 1) % 10 == 0:
            print(f"torch {precision} step {step + 1}: loss {losses[-1]:.6f}", file=sys.stderr, flush=True)
    doc = {"side": "torch", "precision": precision, "workload": args.workload, "device": device,
           "torch_version": torch.__version__, "model": cfg, "steps": args.steps, "loss": losses,
           "step_ms": step_ms, "skipped": skipped}
    if device == "cuda":
        doc["device_name"] = torch.cuda.get_device_name()
    path = os.path.join(args.dir, f"torch_{precision}.json")
    with open(path, "w") as f:
        json.dump(doc, f, indent=1)
    print(f"wrote {path}", file=sys.stderr)


def run_train(args):
    cfg = model_config(args.workload, args.w6_batch)
    precisions = args.precisions.split(",")
    for p in precisions:
        if p not in PRECISIONS:
            raise SystemExit(f"loss_curve.py: unknown precision {p} (f32, bf16, f16)")
    if "f16" in precisions and args.device != "cuda":
        raise SystemExit("loss_curve.py: f16 needs --device cuda (PyTorch's CPU autocast is bf16 only here, and "
                         "GradScaler is CUDA only)")
    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("loss_curve.py: CUDA is not available to this PyTorch")
    if args.steps < 1:
        raise SystemExit("loss_curve.py: --steps must be at least 1")
    keep_fp32()
    torch.set_num_threads(args.threads)
    init, batches = prepare(args, cfg)
    for p in precisions:
        train(args, cfg, p, init, batches)


# ---- compare ----

def load_curves(directory):
    curves = {}
    for name in sorted(os.listdir(directory)):
        if name.endswith(".json") and (name.startswith("torch_") or name.startswith("tg_")):
            with open(os.path.join(directory, name)) as f:
                doc = json.load(f)
            curves[name[:-len(".json")]] = doc
    return curves


def pair_row(a_name, a, b_name, b, marks):
    la, lb = a["loss"], b["loss"]
    n = min(len(la), len(lb))
    if n == 0:
        return None
    diffs = [abs(la[i] - lb[i]) for i in range(n)]
    rels = [diffs[i] / max(abs(lb[i]), 1e-30) for i in range(n)]
    worst = max(range(n), key=lambda i: rels[i])
    at = [f"{diffs[s - 1]:.2e}" if s <= n else "" for s in marks]
    return (f"| {a_name} vs {b_name} | {n} | {max(diffs):.2e} | {rels[worst]:.2e} (step {worst + 1}) | "
            + " | ".join(at) + f" | {la[0]:.6f} / {lb[0]:.6f} | {la[n - 1]:.6f} / {lb[n - 1]:.6f} |")


def run_compare(args):
    curves = load_curves(args.dir)
    if not curves:
        raise SystemExit(f"loss_curve.py: no torch_*.json or tg_*.json in {args.dir}")
    marks = [1, 10, 50, 100]
    pairs = []
    for p in ("bf16", "f32", "f16"):
        pairs.append((f"tg_{p}", f"torch_{p}"))
    for p in ("bf16", "f16"):
        pairs.append((f"torch_{p}", "torch_f32"))
        pairs.append((f"tg_{p}", "tg_f32"))
    workloads = {doc.get("workload") for doc in curves.values()}
    print(f"Loss curves in {args.dir} (workload {', '.join(sorted(map(str, workloads)))}); "
          "|Δ| = |a - b|, relative to b\n")
    print("| pair (a vs b) | steps | max abs Δ | max rel Δ | " + " | ".join(f"Δ step {s}" for s in marks)
          + " | first loss a / b | last loss a / b |")
    print("|---|---:|---:|---:|" + "---:|" * len(marks) + "---|---|")
    for a, b in pairs:
        if a in curves and b in curves:
            row = pair_row(a, curves[a], b, curves[b], marks)
            if row:
                print(row)
    failed = None
    if args.check_f32 is not None:
        if "tg_f32" not in curves or "torch_f32" not in curves:
            failed = f"--check-f32: tg_f32.json or torch_f32.json missing in {args.dir}"
        else:
            ours, theirs = curves["tg_f32"]["loss"], curves["torch_f32"]["loss"]
            worst = max([abs(a - b) / max(abs(b), 1e-30) for a, b in zip(ours, theirs)], default=float("inf"))
            if len(ours) != len(theirs) or not worst <= args.check_f32:
                failed = (f"--check-f32: tg f32 ({len(ours)} steps) against torch f32 ({len(theirs)} steps): largest "
                          f"relative loss difference {worst:.3g}, allowed {args.check_f32:.3g}")
    print()
    for name, doc in curves.items():
        where = doc.get("device_name") or doc.get("device") or ""
        where = f"{doc.get('backend')} on {where}" if doc.get("backend") else where
        ms = doc.get("step_ms") or []
        median = f"median step {sorted(ms[2:])[len(ms[2:]) // 2]:.1f} ms (after the first 2)" if len(ms) > 2 else ""
        skipped = f", skipped steps (Inf/NaN gradients): {doc['skipped']}" if doc.get("skipped") else ""
        print(f"- {name}: {len(doc.get('loss', []))} steps, {where}; {median}{skipped}")
    if failed:
        raise SystemExit(failed)


def main():
    argv = sys.argv[1:]
    if not argv or argv[0] not in ("train", "compare", "-h", "--help"):
        argv = ["train"] + argv
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    t = sub.add_parser("train", help="write the init and batches, train PyTorch per precision (the default)")
    t.add_argument("--workload", default="W2_small", choices=["W2", "W2_small", "W6"])
    t.add_argument("--w6-batch", type=int, default=8)
    t.add_argument("--steps", type=int, default=100)
    t.add_argument("--dir", required=True)
    t.add_argument("--device", choices=["cpu", "cuda"], default="cuda" if torch.cuda.is_available() else "cpu")
    t.add_argument("--precisions", default="f32,bf16")
    t.add_argument("--threads", type=int, default=os.cpu_count())
    t.add_argument("--fresh", action="store_true", help="rewrite the init and batches even if present")
    c = sub.add_parser("compare", help="the markdown table of D/torch_*.json against D/tg_*.json")
    c.add_argument("--dir", required=True)
    c.add_argument("--check-f32", type=float, default=None, metavar="REL",
                   help="exit 1 unless tg_f32 and torch_f32 have as many steps and every loss agrees to REL relative")
    args = parser.parse_args(argv)
    if args.command == "compare":
        run_compare(args)
    else:
        run_train(args)


if __name__ == "__main__":
    main()
