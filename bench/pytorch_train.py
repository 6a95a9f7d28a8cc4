#!/usr/bin/python3
"""The design.md training workloads W1 and W2 in PyTorch, for ratios against bench/train_bench.cpp.

The models are tools/goldens_train.py's PyTorch mirror of examples/models.h (explicit params with
tensorgrad's names and [in, out] layouts, F.layer_norm, tanh GELU, causal softmax, cross-entropy), the
one the parity goldens prove equal to tensorgrad's step, so both sides time the same computation:
  W1        MLP y = sin(x), B 256, Adam lr 5e-3; the loss is read (loss.item()) every step
  W2        char transformer, vocab 65, B 32, T 128, d 128, 4 layers, 4 heads, AdamW lr 1e-3, wd 0.01
            with tensorgrad's decay groups; the loss is read at the end of each timed block of steps
  W2_small  the same at B 4, T 16, d 32, 2 layers (the parity golden's size)
One step = copy the batch into the step's input tensors (as Training::step uploads it), zero the
gradients, forward, backward, optimizer step. Modes:
  eager  the step as Python runs it (--device cpu or cuda; optimizers with PyTorch's default
         implementation for the device)
  graph  (cuda) the whole step captured once as a CUDA graph and replayed: PyTorch's whole-network
         capture recipe (warm-up on a side stream, zero_grad(set_to_none=True), capture forward,
         backward and optimizer.step() with capturable=True; each step copies the batch into the
         static inputs and replays)
The report is in Google Benchmark's JSON format, names torch_<device>_<mode>/<workload>, real_time
the median wall time of one step in microseconds (perf_counter; W2: the median over timed blocks of
--block steps, divided by the block), counters "steps/s" and "loss" (the last). fp32 throughout (TF32
off on CUDA). bench/compare.py pairs it with train_bench's report:

  /usr/bin/python3 bench/pytorch_train.py --device cpu --out torch_train_cpu.json
  /usr/bin/python3 bench/pytorch_train.py --device cuda --out torch_train_cuda.json   # eager and graph
  /usr/bin/python3 bench/compare.py train.json torch_train_cpu.json --ours train/interp_f32
"""
import argparse
import json
import math
import os
import statistics
import sys
import time

import torch

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(BENCH_DIR), "tools"))
sys.path.insert(0, BENCH_DIR)
import goldens_train as models  # noqa: E402  (the PyTorch mirror of examples/models.h)
from pytorch_workloads import context, keep_fp32  # noqa: E402

W2_FULL = {"vocab": 65, "context": 128, "width": 128, "layers": 4, "heads": 4, "batch": 32}
WORKLOADS = {
    "W1": {"kind": "w1", "model": {"batch": 256}, "optimizer": models.ADAM, "lr": 5e-3, "read_every_step": True},
    "W2": {"kind": "w2", "model": W2_FULL, "optimizer": models.ADAMW, "lr": 1e-3, "read_every_step": False},
    "W2_small": {"kind": "w2", "model": models.W2_SMALL, "optimizer": models.ADAMW, "lr": 1e-3,
                 "read_every_step": False},
}

# Timed calls per (device, workload): a W1 call is one step, a W2 call a block of --block steps.
# About a second of steps each, except W2 on the CPU (seconds per step: 2 blocks).
DEFAULT_REPEATS = {("cuda", "W1"): 500, ("cuda", "W2"): 40, ("cuda", "W2_small"): 100,
                   ("cpu", "W1"): 200, ("cpu", "W2"): 2, ("cpu", "W2_small"): 40}


class TorchRng:
    """The two draws models.init_values makes, from a seeded torch.Generator (float32 on the CPU)."""

    def __init__(self, seed):
        self.gen = torch.Generator().manual_seed(seed)

    def uniform(self, low, high, shape):
        return torch.rand(shape, generator=self.gen) * (high - low) + low

    def normal(self, mean, std, shape):
        return torch.randn(shape, generator=self.gen) * std + mean


class Step:
    """One workload's params, optimizer, static device inputs and host batch, and its step."""

    def __init__(self, spec, device, mode, seed=0):
        kind, cfg = spec["kind"], spec["model"]
        rng = TorchRng(seed)
        init = models.init_values(kind, cfg, rng)
        self.params = {n: v.to(device).requires_grad_(True) for n, v in init.items()}
        decay = {n: d for n, _, d in (models.mlp_params() if kind == "w1" else models.transformer_params(cfg))}
        options = {"capturable": True} if mode == "graph" else {}
        self.optimizer = models.make_optimizer(spec["optimizer"], spec["lr"], self.params, decay, **options)
        if kind == "w1":
            x = rng.uniform(-3.0, 3.0, (cfg["batch"], 1))
            host = {"x": x, "y": torch.sin(x)}
            self.loss_fn = lambda batch: models.mlp_loss(self.params, batch)
        else:
            B, T = cfg["batch"], cfg["context"]
            stream = torch.randint(0, cfg["vocab"], (B, T + 1), generator=rng.gen)
            host = {"tokens": stream[:, :T].contiguous(), "targets": stream[:, 1:].contiguous()}
            mask = models.causal_mask(T, device)
            self.loss_fn = lambda batch: models.transformer_loss(self.params, batch, cfg, mask)
        self.host = {k: v.pin_memory() if device == "cuda" else v for k, v in host.items()}
        self.static = {k: torch.empty_like(v, device=device) for k, v in host.items()}
        self.graph = None
        if mode == "graph":
            self.capture()

    def copy_batch(self):
        # From pinned memory, queued on the stream like the kernels (the host batch never changes).
        for k, v in self.host.items():
            self.static[k].copy_(v, non_blocking=True)

    def eager(self):
        self.copy_batch()
        self.optimizer.zero_grad(set_to_none=True)
        loss = self.loss_fn(self.static)
        loss.backward()
        self.optimizer.step()
        return loss

    def capture(self):
        # torch.cuda.graphs' whole-network recipe: warm up on a side stream (the first steps create
        # the optimizer state and the backward's workspaces), then capture one whole step.
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                self.eager()
        torch.cuda.current_stream().wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        self.optimizer.zero_grad(set_to_none=True)
        with torch.cuda.graph(self.graph):
            self.static_loss = self.loss_fn(self.static)
            self.static_loss.backward()
            self.optimizer.step()

    def __call__(self):
        if self.graph is None:
            return self.eager()
        self.copy_batch()
        self.graph.replay()
        return self.static_loss


def time_workload(name, spec, device, mode, warmup, repeats, block, log):
    step = Step(spec, device, mode)
    for _ in range(warmup):
        step()
    if device == "cuda":
        torch.cuda.synchronize()
    per_call = 1 if spec["read_every_step"] else block
    times, loss = [], float("nan")
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(per_call):
            out = step()
            if spec["read_every_step"]:
                loss = out.item()  # synchronizes, as design.md's W1 reads the loss every step
        if not spec["read_every_step"]:
            loss = out.item()  # one read (and synchronization) per block
        times.append((time.perf_counter() - start) / per_call)
    if not math.isfinite(loss):
        raise SystemExit(f"pytorch_train.py: {name} on {device} ({mode}) has a non-finite loss {loss}")
    median = statistics.median(times)
    full = f"torch_{device}_{mode}/{name}"
    entry = {
        "name": full, "run_name": full, "run_type": "iteration", "repetitions": 1, "repetition_index": 0,
        "threads": 1, "iterations": repeats * per_call, "real_time": median * 1e6, "cpu_time": median * 1e6,
        "time_unit": "us", "min_us": min(times) * 1e6, "mean_us": statistics.fmean(times) * 1e6,
        "steps/s": 1.0 / median, "loss": loss,
    }
    print(f"{full:<32} {median * 1e6:>12.1f} us/step {1.0 / median:>10.1f} steps/s  loss {loss:.4f}", file=log,
          flush=True)
    return entry


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--modes", default=None, help="eager,graph (default: both on cuda, eager on cpu)")
    parser.add_argument("--workloads", default=None,
                        help="comma separated, of W1,W2,W2_small (default: all three on cuda; W1,W2_small on cpu)")
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps first")
    parser.add_argument("--repeats", type=int, default=None,
                        help="timed calls, a step (W1) or a block of steps (W2) each (default: per device and "
                             "workload, see DEFAULT_REPEATS)")
    parser.add_argument("--block", type=int, default=5, help="W2 steps per timed call (one loss read each)")
    parser.add_argument("--threads", type=int, default=os.cpu_count(),
                        help="CPU threads for PyTorch (default: every core, as TBB uses)")
    parser.add_argument("--out", default=None, help="write the JSON report here (default: stdout)")
    args = parser.parse_args()

    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("pytorch_train.py: CUDA is not available to this PyTorch")
    modes = args.modes.split(",") if args.modes else (["eager", "graph"] if args.device == "cuda" else ["eager"])
    if "graph" in modes and args.device != "cuda":
        raise SystemExit("pytorch_train.py: graph mode needs --device cuda")
    names = args.workloads.split(",") if args.workloads else (
        list(WORKLOADS) if args.device == "cuda" else ["W1", "W2_small"])
    unknown = [n for n in names if n not in WORKLOADS]
    if unknown:
        raise SystemExit(f"pytorch_train.py: unknown workload {unknown[0]} (known: {', '.join(WORKLOADS)})")

    torch.set_num_threads(args.threads)
    precision = keep_fp32()
    log = sys.stdout if args.out else sys.stderr
    entries = [time_workload(n, WORKLOADS[n], args.device, m, args.warmup,
                             args.repeats or DEFAULT_REPEATS[(args.device, n)], args.block, log)
               for m in modes for n in names]
    ctx = context(args.device, args.threads, precision)
    ctx["executable"] = os.path.abspath(__file__)
    report = {"context": ctx, "benchmarks": entries}
    text = json.dumps(report, indent=2)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    else:
        print(text)


if __name__ == "__main__":
    main()
