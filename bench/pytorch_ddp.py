#!/usr/bin/env python3
"""PyTorch DistributedDataParallel (NCCL) step times of W2 and W6, next to bench/dp_bench.cpp.

The model is bench/pytorch_train.py's mirror of examples/models.h's CharTransformer (AdamW lr 1e-3,
weight decay 0.01), wrapped in an nn.Module so DDP can bucket its gradients. Each rank steps on its
own batch of the per-device size (W2 32, W6 --w6-batch), weak scaling as tg_dp_bench runs it;
`plain` is one process without DDP. fp32 keeps matmuls in IEEE fp32 (no TF32), as the rest of
bench/ compares; --autocast bf16 runs the forward under torch.autocast.

  python3 bench/pytorch_ddp.py --workloads W2,W6 --ranks 1,2 --out ddp.json
"""
import argparse
import json
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, BENCH_DIR)
import pytorch_train as train  # noqa: E402
from pytorch_train import models  # noqa: E402
from pytorch_workloads import keep_fp32  # noqa: E402


class Holder(torch.nn.Module):
    """The mirror's params as an nn.Module (dots are not allowed in parameter names)."""

    def __init__(self, params, loss_fn):
        super().__init__()
        self.names = list(params)
        self.store = torch.nn.ParameterList([torch.nn.Parameter(params[n]) for n in self.names])
        self.loss_fn = loss_fn

    def forward(self, batch):
        return self.loss_fn(dict(zip(self.names, self.store)), batch)


def spec_of(name, w6_batch):
    if name == "W6":
        return train.w6_spec(w6_batch)
    return train.WORKLOADS[name]


def one_run(rank, world, name, w6_batch, autocast, steps, port, queue):
    """Rank `rank` of `world` (0: no process group, one process without DDP)."""
    keep_fp32()
    device = f"cuda:{rank}"
    torch.cuda.set_device(rank)
    if world > 0:
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        dist.init_process_group("nccl", rank=rank, world_size=world)
    spec = spec_of(name, w6_batch)
    cfg = spec["model"]
    rng = train.TorchRng(0)
    init = models.init_values("w2", cfg, rng)
    decay = {n: d for n, _, d in models.transformer_params(cfg)}
    mask = models.causal_mask(cfg["context"], device)
    holder = Holder({n: v.to(device) for n, v in init.items()},
                    lambda P, batch: models.transformer_loss(P, batch, cfg, mask)).to(device)
    module = torch.nn.parallel.DistributedDataParallel(holder, device_ids=[rank]) if world > 0 else holder
    params = dict(zip(holder.names, holder.store))
    optimizer = models.make_optimizer(spec["optimizer"], spec["lr"], params, decay)
    gen = torch.Generator().manual_seed(2 + rank)
    B, T = cfg["batch"], cfg["context"]
    stream = torch.randint(0, cfg["vocab"], (B, T + 1), generator=gen)
    batch = {"tokens": stream[:, :T].contiguous().to(device), "targets": stream[:, 1:].contiguous().to(device)}
    dtype = {"bf16": torch.bfloat16}.get(autocast)

    def step():
        optimizer.zero_grad(set_to_none=True)
        if dtype is None:
            loss = module(batch)
        else:
            with torch.autocast(device_type="cuda", dtype=dtype):
                loss = module(batch)
        loss.backward()
        optimizer.step()
        return loss

    for _ in range(3):
        step()
    torch.cuda.synchronize()
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        loss = step().item()  # the loss read every step, as Training::step returns it
        times.append(time.perf_counter() - start)
    if world > 0:
        dist.barrier()
        dist.destroy_process_group()
    if rank == 0:
        queue.put({"median_s": statistics.median(times), "min_s": min(times), "loss": loss, "batch": B})


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workloads", default="W2")
    parser.add_argument("--ranks", default="1,2", help="world sizes to run (plain: one process without DDP)")
    parser.add_argument("--w6-batch", type=int, default=train.default_w6_batch())
    parser.add_argument("--autocast", choices=["bf16"], default=None)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    gpus = torch.cuda.device_count()
    ctx = mp.get_context("spawn")
    entries = []
    for name in args.workloads.split(","):
        for world in [0] + [int(r) for r in args.ranks.split(",")]:
            label = f"torch_ddp/{name}" + ("" if args.autocast is None else "_" + args.autocast) + \
                (f"/ranks:{world}" if world else "/plain")
            if world > gpus:
                print(f"{label:<32} skipped: needs {world} GPUs, the machine has {gpus}", flush=True)
                continue
            queue = ctx.SimpleQueue()
            port = 29500 + len(entries)
            procs = [ctx.Process(target=one_run, args=(r, world, name, args.w6_batch, args.autocast, args.steps,
                                                       port, queue)) for r in range(max(world, 1))]
            for p in procs:
                p.start()
            for p in procs:
                p.join()
            if any(p.exitcode != 0 for p in procs) or queue.empty():
                print(f"{label:<32} failed (exit codes {[p.exitcode for p in procs]})", flush=True)
                continue
            r = queue.get()
            samples = r["batch"] * max(world, 1) / r["median_s"]
            print(f"{label:<32} {r['median_s'] * 1e3:9.2f} ms/step  {samples:9.1f} samples/s  loss {r['loss']:.4f}",
                  flush=True)
            entries.append({"name": label, "real_time": r["median_s"] * 1e3, "time_unit": "ms",
                            "min_ms": r["min_s"] * 1e3, "samples/s": samples, "ranks": world,
                            "batch_per_rank": r["batch"], "loss": r["loss"]})
    report = {"context": {"torch_version": torch.__version__, "gpus": gpus,
                          "device_name": torch.cuda.get_device_name() if gpus else "none"},
              "benchmarks": entries}
    if args.out:
        with open(args.out, "w") as f:
            json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()
