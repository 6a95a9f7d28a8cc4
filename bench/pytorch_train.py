#!/usr/bin/python3
"""The design.md training workloads W1, W2, W6 and W7 in PyTorch, for ratios against bench/train_bench.cpp.

The models are tools/goldens_train.py's PyTorch mirror of examples/models.h (explicit params with
tensorgrad's names and [in, out] layouts, F.layer_norm, tanh GELU, causal softmax, cross-entropy), the
one the parity goldens prove equal to tensorgrad's step, so both sides time the same computation:
  W1        MLP y = sin(x), B 256, Adam lr 5e-3; the loss is read (loss.item()) every step
  W2        char transformer, vocab 65, B 32, T 128, d 128, 4 layers, 4 heads, AdamW lr 1e-3, wd 0.01
            with tensorgrad's decay groups; the loss is read at the end of each timed block of steps
  W2_small  the same at B 4, T 16, d 32, 2 layers (the parity golden's size)
  W7        (only when --workloads names it) the ResNet-style CNN of examples/models.h on [128, 3, 32, 32]
            images, Adam lr 1e-3; W7_small: the small CNN on [64, 1, 8, 8]; both read the loss every
            step. The models are bench/pytorch_cnn.py's (F.conv2d, F.max_pool2d, cross-entropy)
  W6        (only with --w6) the same model at GPT-2-small size: vocab 256, T 1024, d 768, 12 layers,
            12 heads, B --w6-batch (default: TG_W6_BATCH, else 8), the same optimizer; the loss is read
            every step (a step takes hundreds of milliseconds); --w6-tiny shrinks it (W6_tiny: T 32,
            d 48, 2 layers, 12 heads) to check the script on the CPU
  <name>_ckpt  (W2_ckpt, W2_small_ckpt, W6_ckpt, W6_tiny_ckpt; --checkpoint adds one after each
            transformer workload) the same with every block wrapped in
            torch.utils.checkpoint.checkpoint(block, h, use_reentrant=False), as
            TransformerConfig::checkpoint_blocks does in tg_train_bench's train/<backend>/<name>_ckpt:
            the block's activations are recomputed in the backward instead of kept
  <name>_bf16, <name>_f16  (--autocast bf16|f16) the same step with the forward and loss under
            torch.autocast(dtype) and fp32 params and optimizer state; f16 adds GradScaler (eager only)
  <name>_sdpa  (--sdpa; after the other suffixes: W6_sdpa, W6_bf16_sdpa, W2_ckpt_sdpa) the same step
            with each head's attention computed by torch.nn.functional.scaled_dot_product_attention(q,
            k, v, is_causal=True, scale=the mirror's float32 scale) instead of the mirror's matmul,
            -inf mask and softmax: the same math, in PyTorch's fused kernels (flash or memory-efficient,
            as PyTorch picks them), as tensorgrad's fused tg::attention is. Needs PyTorch 2.1 or later
            (the scale argument); older ones stop with a message. Every _sdpa entry also reports
            "sdpa_vs_mirror": |loss(SDPA) - loss(mirror)| / |loss(mirror)| of one untimed forward from
            the same params and batch (0 up to rounding; in fp32 above 1e-3 fails the workload)
One step = copy the batch into the step's input tensors (as Training::step uploads it), zero the
gradients, forward, backward, optimizer step. Modes:
  eager  the step as Python runs it (--device cpu or cuda; optimizers with PyTorch's default
         implementation for the device)
  graph  (cuda) the whole step captured once as a CUDA graph and replayed: PyTorch's whole-network
         capture recipe (warm-up on a side stream, zero_grad(set_to_none=True), capture forward,
         backward and optimizer.step() with capturable=True; each step copies the batch into the
         static inputs and replays)
  compile  (only when --modes names it; PyTorch 2.0 or later) the forward and loss (autocast region
         included) under torch.compile in its default mode, so Inductor compiles the forward and,
         through AOTAutograd, the backward; the optimizer step stays eager (the device's default
         implementation, as in eager mode), the usual way to compile a training step. The first step
         compiles; its wall time is reported as the counter "compile_s" (untimed, like the --warmup
         steps after it). Dynamo's caches are reset before each workload, so each compiles afresh
The report is in Google Benchmark's JSON format, names torch_<device>_<mode>/<workload>, real_time
the median wall time of one step in microseconds (perf_counter; W2: the median over timed blocks of
--block steps, divided by the block), counters "steps/s" and "loss" (the last), on CUDA also
"peak_bytes" (torch.cuda.max_memory_allocated(), reset before each mode and workload, after the
previous one's memory is freed) and "reserved_bytes" (max_memory_reserved). fp32 throughout (TF32
off on CUDA). A workload that fails (e.g. a checkpointed step that a CUDA graph cannot capture) is
reported as Google Benchmark reports an error ("error_occurred": true, "error_message") and the rest
still run; run graph mode of the _ckpt workloads in a process of its own (bench/gpu_run.sh ckpt
does), since a failed capture can leave the CUDA context unusable. bench/compare.py pairs it with train_bench's report:

  /usr/bin/python3 bench/pytorch_train.py --device cpu --out torch_train_cpu.json
  /usr/bin/python3 bench/pytorch_train.py --device cuda --out torch_train_cuda.json   # eager and graph
  /usr/bin/python3 bench/compare.py train.json torch_train_cpu.json --ours train/interp_f32
  python3 bench/pytorch_train.py --device cuda --w6 --out torch_w6.json              # W6 alone

--w6-capacity finds the largest W6 batch each mode fits on the GPU instead: batches 1, 2, 4, ... until
the first failure (torch.cuda.OutOfMemoryError, or any other error), then bisection between the
largest that ran and the first that failed; a try is a model and optimizer built at that batch, one
untimed step (graph: the warm-up and the capture) and --capacity-steps timed ones. Eager tries run
in this process (the cache emptied between tries); graph tries each in a child process of this
script (--w6-try), since an allocation failing inside a capture can leave the CUDA context
unusable. It writes one JSON object per try and one summary per mode, a line each, to --out:
  {"side": "torch_cuda_eager", "batch": 16, "ok": true, "peak_bytes": ..., "reserved_bytes": ...,
   "median_step_ms": ..., "step_ms": [...], "loss": ...}
  {"side": "torch_cuda_graph", "batch": 64, "ok": false, "error_type": "OutOfMemoryError", "error": ...}
  {"side": "torch_cuda_eager", "summary": true, "largest_ok_batch": 40, "smallest_failed_batch": 41,
   "stopped": "bisected"}
--capacity-budget-s (per mode, default 90): no new try starts after it. With --autocast and --sdpa the
tries run W6_bf16, W6_sdpa, W6_bf16_sdpa: every line then names it ("workload"; W6 otherwise), the
side stays torch_cuda_<mode>. Capacity runs the eager and graph modes only.
The timed report is rewritten after each workload, so a run cut short keeps what it had.
"""
import argparse
import gc
import json
import math
import os
import signal
import statistics
import subprocess
import sys
import time

import torch
import torch.nn.functional as F
import torch.utils.checkpoint

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(BENCH_DIR), "tools"))
sys.path.insert(0, BENCH_DIR)
import goldens_train as models  # noqa: E402  (the PyTorch mirror of examples/models.h)
import pytorch_cnn as cnn  # noqa: E402  (W7 and W7_small)
from pytorch_workloads import context, keep_fp32  # noqa: E402

W2_FULL = {"vocab": 65, "context": 128, "width": 128, "layers": 4, "heads": 4, "batch": 32}
# examples/models.h's kW6Config; the batch comes from --w6-batch. W6_TINY only checks the code path.
W6_MODEL = {"vocab": 256, "context": 1024, "width": 768, "layers": 12, "heads": 12}
W6_TINY = {"vocab": 256, "context": 32, "width": 48, "layers": 2, "heads": 12}
WORKLOADS = {
    "W1": {"kind": "w1", "model": {"batch": 256}, "optimizer": models.ADAM, "lr": 5e-3, "read_every_step": True},
    "W2": {"kind": "w2", "model": W2_FULL, "optimizer": models.ADAMW, "lr": 1e-3, "read_every_step": False},
    "W2_small": {"kind": "w2", "model": models.W2_SMALL, "optimizer": models.ADAMW, "lr": 1e-3,
                 "read_every_step": False},
    "W7": {"kind": "cnn", "model": cnn.W7, "optimizer": models.ADAM, "lr": 1e-3, "read_every_step": True},
    "W7_small": {"kind": "cnn", "model": cnn.W7_SMALL, "optimizer": models.ADAM, "lr": 1e-3,
                 "read_every_step": True},
}

# Timed calls per (device, workload): a W1 call is one step, a W2 call a block of --block steps.
# About a second of steps each, except W2 on the CPU (seconds per step: 2 blocks).
DEFAULT_REPEATS = {("cuda", "W1"): 500, ("cuda", "W2"): 40, ("cuda", "W2_small"): 100,
                   ("cpu", "W1"): 200, ("cpu", "W2"): 2, ("cpu", "W2_small"): 40,
                   ("cuda", "W6"): 10, ("cpu", "W6"): 2, ("cuda", "W6_tiny"): 10, ("cpu", "W6_tiny"): 5,
                   ("cuda", "W7"): 200, ("cpu", "W7"): 10, ("cuda", "W7_small"): 500, ("cpu", "W7_small"): 100}


def w6_spec(batch, tiny=False):
    """W6 (or W6_tiny) at `batch`: the W2 model and optimizer at GPT-2-small size, the loss read every
    step as Training::step does (at hundreds of milliseconds a step the read costs nothing)."""
    model = dict(W6_TINY if tiny else W6_MODEL, batch=batch)
    return {"kind": "w2", "model": model, "optimizer": models.ADAMW, "lr": 1e-3, "read_every_step": True}


def checkpointed(spec):
    """`spec` (a transformer's) with every block checkpointed."""
    return dict(spec, checkpoint=True)


def base_name(name):
    """W2_ckpt -> W2, W2_bf16_sdpa -> W2: a checkpointed, autocast or SDPA workload takes its base's repeats."""
    for suffix in ("_sdpa", "_bf16", "_f16", "_ckpt"):
        if name.endswith(suffix):
            name = name[:-len(suffix)]
    return name


def sdpa_missing():
    """None when this PyTorch has scaled_dot_product_attention with a scale argument (2.1 and later),
    else why not."""
    if not hasattr(F, "scaled_dot_product_attention"):
        return (f"--sdpa needs torch.nn.functional.scaled_dot_product_attention (PyTorch 2.1 or later); "
                f"this is torch {torch.__version__}")
    major, minor = (int(part) for part in torch.__version__.split("+")[0].split(".")[:2])
    if (major, minor) < (2, 1):
        return (f"--sdpa needs scaled_dot_product_attention's scale argument (PyTorch 2.1 or later); "
                f"this is torch {torch.__version__}")
    return None


def sdpa_attend(P, name, x, heads, scale, mask=None):
    """models.attend with the heads' attention fused: scaled_dot_product_attention(q, k, v,
    is_causal=True) is softmax(q k^T * scale with -inf above the diagonal) v, the mirror's
    computation (whose mask is the same upper triangle, so `mask` is not needed)."""
    B, T, d = x.shape

    def split_heads(t):  # [B, T, H*hd] -> [B, H, T, hd], as models.attend splits them
        return t.reshape(B, T, heads, d // heads).transpose(1, 2)

    q, k, v = [split_heads(models.linear(P, f"{name}.{part}", x)) for part in ("q", "k", "v")]
    o = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=scale)
    return models.linear(P, name + ".proj", o.transpose(1, 2).reshape(B, T, d))


def blockwise_transformer_loss(P, batch, cfg, mask, attend, checkpoint, scale):
    """models.transformer_loss with the blocks written out as models.transformer_logits writes them,
    so that the attention (`attend`: models.attend or sdpa_attend) can be swapped and each block's
    forward can run under torch.utils.checkpoint (non-reentrant, the form PyTorch recommends;
    use_reentrant exists since 1.11). `scale` is models.attention_scale(cfg), computed by the caller:
    its float32 rounding (struct.pack) inside a torch.compile region would break the graph."""
    h = F.embedding(batch["tokens"], P["tokens.W"]) + P["positions"]
    for i in range(cfg["layers"]):
        p = f"blocks.{i}."

        def block(x, p=p):
            y = x + attend(P, p + "attn", models.layer_norm(P, p + "ln1", x), cfg["heads"], scale, mask)
            return y + models.linear(P, p + "out", F.gelu(models.linear(P, p + "fc", models.layer_norm(P, p + "ln2", y)),
                                                         approximate="tanh"))

        h = torch.utils.checkpoint.checkpoint(block, h, use_reentrant=False) if checkpoint else block(h)
    logits = models.linear(P, "head", models.layer_norm(P, "ln", h))
    return F.cross_entropy(logits.reshape(-1, cfg["vocab"]), batch["targets"].reshape(-1).long())


def transformer_loss_of(spec, compiled=False):
    """The loss function (P, batch, cfg, mask) of a transformer spec: the mirror's own unless
    --checkpoint, --sdpa or torch.compile (`compiled`) needs the blocks written out."""
    if not spec.get("checkpoint") and not spec.get("sdpa") and not compiled:
        return models.transformer_loss
    attend = sdpa_attend if spec.get("sdpa") else models.attend
    checkpoint, scale = bool(spec.get("checkpoint")), models.attention_scale(spec["model"])
    return lambda P, batch, cfg, mask: blockwise_transformer_loss(P, batch, cfg, mask, attend, checkpoint, scale)


def variant(spec, autocast=None, sdpa=False):
    """(spec, name suffix): `spec` under --autocast (a name: bf16, f16) and --sdpa."""
    suffix = ""
    if autocast:
        spec = dict(spec, autocast={"bf16": torch.bfloat16, "f16": torch.float16}[autocast])
        suffix += "_" + autocast
    if sdpa:
        spec = dict(spec, sdpa=True)
        suffix += "_sdpa"
    return spec, suffix


def default_w6_batch():
    value = os.environ.get("TG_W6_BATCH", "")
    return int(value) if value.isdigit() and int(value) > 0 else 8


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
        # --autocast: the forward and loss under torch.autocast (params and optimizer state stay
        # fp32); f16 adds GradScaler's dynamic loss scaling (eager only: its inf check reads a flag
        # back to the host, which a CUDA graph capture refuses).
        self.autocast = spec.get("autocast")
        self.device = device
        self.scaler = torch.cuda.amp.GradScaler() if self.autocast == torch.float16 and device == "cuda" else None
        rng = TorchRng(seed)
        if kind == "cnn":  # Adam: no decay groups
            init = cnn.init_values(cfg, rng.gen)
            decay = {n: True for n in init}
        else:
            init = models.init_values(kind, cfg, rng)
            decay = {n: d for n, _, d in (models.mlp_params() if kind == "w1" else models.transformer_params(cfg))}
        self.params = {n: v.to(device).requires_grad_(True) for n, v in init.items()}
        options = {"capturable": True} if mode == "graph" else {}
        self.optimizer = models.make_optimizer(spec["optimizer"], spec["lr"], self.params, decay, **options)
        if kind == "w1":
            x = rng.uniform(-3.0, 3.0, (cfg["batch"], 1))
            host = {"x": x, "y": torch.sin(x)}
            self.loss_fn = lambda batch: models.mlp_loss(self.params, batch)
        elif kind == "cnn":
            host = cnn.batch(cfg, rng.gen)
            self.loss_fn = lambda batch: cnn.loss(self.params, batch, cfg)
        else:
            B, T = cfg["batch"], cfg["context"]
            stream = torch.randint(0, cfg["vocab"], (B, T + 1), generator=rng.gen)
            host = {"tokens": stream[:, :T].contiguous(), "targets": stream[:, 1:].contiguous()}
            mask = models.causal_mask(T, device)
            loss = transformer_loss_of(spec, compiled=mode == "compile")
            self.loss_fn = lambda batch: loss(self.params, batch, cfg, mask)
            # The mirror's loss on the same params, to check an SDPA step against (sdpa_vs_mirror).
            self.mirror_loss_fn = lambda batch: models.transformer_loss(self.params, batch, cfg, mask)
        self.host = {k: v.pin_memory() if device == "cuda" else v for k, v in host.items()}
        self.static = {k: torch.empty_like(v, device=device) for k, v in host.items()}
        self.graph = None
        self.compiled = None
        if mode == "compile":
            # A fresh Dynamo state per workload: no guard failures against the previous workload's
            # params, no recompile limit reached, no shapes marked dynamic because an earlier
            # workload's differed.
            torch._dynamo.reset()
            self.compiled = torch.compile(self.eager_forward_loss)
        if mode == "graph":
            self.capture()

    def copy_batch(self):
        # From pinned memory, queued on the stream like the kernels (the host batch never changes).
        for k, v in self.host.items():
            self.static[k].copy_(v, non_blocking=True)

    def eager_forward_loss(self, loss_fn=None):
        loss_fn = loss_fn or self.loss_fn
        if self.autocast is None:
            return loss_fn(self.static)
        with torch.autocast(device_type=self.device, dtype=self.autocast):
            return loss_fn(self.static)

    def forward_loss(self):
        return self.compiled() if self.compiled is not None else self.eager_forward_loss()

    def sdpa_vs_mirror(self):
        """|loss - mirror's loss| / |mirror's loss| of one forward from the current params and the
        batch, without gradients (the step's loss function run eagerly, which a compiled step traces:
        compiling it without gradients would compile another graph)."""
        self.copy_batch()
        with torch.no_grad():
            ours = self.eager_forward_loss().float().item()
            mirror = self.eager_forward_loss(self.mirror_loss_fn).float().item()
        return abs(ours - mirror) / abs(mirror)

    def eager(self):
        self.copy_batch()
        self.optimizer.zero_grad(set_to_none=True)
        loss = self.forward_loss()
        if self.scaler is not None:
            self.scaler.scale(loss).backward()
            self.scaler.step(self.optimizer)
            self.scaler.update()
            return loss
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
            self.static_loss = self.forward_loss()
            self.static_loss.backward()
            self.optimizer.step()

    def __call__(self):
        if self.graph is None:
            return self.eager()
        self.copy_batch()
        self.graph.replay()
        return self.static_loss


def free_cuda_memory():
    """Releases what earlier steps left (objects in reference cycles, the allocator's cached blocks)
    and resets the peak statistics, so the next peak is the next workload's own."""
    gc.collect()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()


def time_workload(name, spec, device, mode, warmup, repeats, block, log):
    if device == "cuda":
        free_cuda_memory()
    step = Step(spec, device, mode)
    compile_s = None
    if mode == "compile":  # the first step compiles the forward and the backward: timed apart
        start = time.perf_counter()
        step().item()
        compile_s = time.perf_counter() - start
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
    if spec["kind"] in ("w2", "cnn"):
        entry["batch"] = spec["model"]["batch"]
    if spec["kind"] == "w2":
        entry["checkpoint"] = bool(spec.get("checkpoint"))
        entry["sdpa"] = bool(spec.get("sdpa"))
    memory = ""
    if device == "cuda":
        entry["peak_bytes"] = torch.cuda.max_memory_allocated()
        entry["reserved_bytes"] = torch.cuda.max_memory_reserved()
        memory = f"  peak {entry['peak_bytes'] / 2**30:.2f} GiB"
    extra = ""
    if compile_s is not None:
        entry["compile_s"] = compile_s
        extra += f"  compile {compile_s:.1f} s"
    if spec.get("sdpa"):  # after the peak is read: the check's forward must not count in it
        entry["sdpa_vs_mirror"] = step.sdpa_vs_mirror()
        extra += f"  sdpa_vs_mirror {entry['sdpa_vs_mirror']:.1e}"
    print(f"{full:<32} {median * 1e6:>12.1f} us/step {1.0 / median:>10.1f} steps/s  loss {loss:.4f}{memory}{extra}",
          file=log, flush=True)
    if spec.get("sdpa") and spec.get("autocast") is None and not entry["sdpa_vs_mirror"] <= 1e-3:
        raise RuntimeError(f"{full}: the SDPA loss is {entry['sdpa_vs_mirror']:.2e} (relative) away from the "
                           "mirror's masked softmax in fp32")
    return entry


def failed_entry(name, device, mode, error):
    """A workload that raised, in Google Benchmark's form of a failed benchmark."""
    full = f"torch_{device}_{mode}/{name}"
    message = f"{type(error).__name__}: {error}"
    print(f"{full:<32} failed: {message}", file=sys.stderr, flush=True)
    return {"name": full, "run_name": full, "run_type": "iteration", "repetitions": 1, "repetition_index": 0,
            "threads": 1, "iterations": 0, "real_time": 0.0, "cpu_time": 0.0, "time_unit": "us",
            "error_occurred": True, "error_message": message}


# ---- --w6-capacity: the largest W6 batch each mode fits ----

def capacity_try(mode, batch, steps, tiny, device="cuda", autocast=None, sdpa=False):
    """One W6 try at `batch` in this process: a dict for the report (ok, or the error). The CPU
    (eager) only checks the code path: nothing limits its memory but the machine's. `autocast` (bf16,
    f16 or None) and `sdpa` as --autocast and --sdpa."""
    spec, suffix = variant(w6_spec(batch, tiny), autocast, sdpa)
    out = {"side": f"torch_{device}_{mode}", "workload": ("W6_tiny" if tiny else "W6") + suffix, "batch": batch}
    cuda = device == "cuda"
    if cuda:
        free_cuda_memory()
    try:
        step = Step(spec, device, mode)  # graph: warms up and captures
        step().item()  # the first step (eager: creates the optimizer state), untimed
        times, loss = [], float("nan")
        for _ in range(steps):
            start = time.perf_counter()
            loss = step().item()
            times.append((time.perf_counter() - start) * 1e3)
        out.update(ok=True, median_step_ms=statistics.median(times), step_ms=times, loss=loss)
    except Exception as e:  # noqa: BLE001  (OutOfMemoryError expected; anything else is reported too)
        message = " ".join(str(e).split())
        out.update(ok=False, error_type=type(e).__name__, error=message[:600])
    if cuda:
        out.update(peak_bytes=torch.cuda.max_memory_allocated(), reserved_bytes=torch.cuda.max_memory_reserved())
    step = None  # drop the model, optimizer and graph before the cache is emptied
    if cuda:
        free_cuda_memory()
    return out


def capacity_try_isolated(mode, batch, steps, tiny, timeout_s, device="cuda", autocast=None, sdpa=False):
    """capacity_try in a child process of this script (a failed capture cannot touch the next try)."""
    command = [sys.executable, os.path.abspath(__file__), "--w6-try", str(batch), "--modes", mode, "--device", device,
               "--capacity-steps", str(steps)] + (["--w6-tiny"] if tiny else [])
    command += (["--autocast", autocast] if autocast else []) + (["--sdpa"] if sdpa else [])
    _, suffix = variant({}, autocast, sdpa)
    out = {"side": f"torch_{device}_{mode}", "workload": ("W6_tiny" if tiny else "W6") + suffix, "batch": batch}
    try:
        child = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        out.update(ok=False, error_type="timeout", error=f"the try took over {timeout_s} s")
        return out
    lines = [line for line in child.stdout.splitlines() if line.startswith("{")]
    if child.returncode == 0 and lines:
        return json.loads(lines[-1])
    tail = " ".join(child.stderr.split())[-600:]
    out.update(ok=False, error_type=f"exit status {child.returncode}", error=tail)
    return out


def find_capacity(mode, args, emit, log):
    """Doubling from 1 until the first failure, then bisection; returns the summary."""
    side = f"torch_{args.device}_{mode}"
    began = time.perf_counter()
    largest_ok, smallest_failed, stopped = 0, None, "max_batch"

    def attempt(batch):
        nonlocal largest_ok, smallest_failed, stopped
        if time.perf_counter() - began > args.capacity_budget_s:
            stopped = "budget"
            return None
        if mode == "graph":
            result = capacity_try_isolated(mode, batch, args.capacity_steps, args.w6_tiny, args.capacity_try_timeout_s,
                                           args.device, args.autocast, args.sdpa)
        else:
            result = capacity_try(mode, batch, args.capacity_steps, args.w6_tiny, args.device, args.autocast,
                                  args.sdpa)
        emit(result)
        peak = f", peak {result['peak_bytes'] / 2**30:.2f} GiB" if "peak_bytes" in result else ""
        detail = (f"{result['median_step_ms']:.1f} ms/step{peak}" if result["ok"]
                  else f"{result['error_type']}: {result['error'][:160]}")
        label = side if result["workload"] in ("W6", "W6_tiny") else f"{side} {result['workload']}"
        print(f"{label} B {batch}: {'ok' if result['ok'] else 'failed'} ({detail})", file=log, flush=True)
        if result["ok"]:
            largest_ok = max(largest_ok, batch)
        else:
            smallest_failed = batch if smallest_failed is None else min(smallest_failed, batch)
        return result["ok"]

    batch, ok = 1, True
    while batch <= args.max_batch:
        ok = attempt(batch)
        if not ok:
            break
        batch *= 2
    if ok is not None and smallest_failed is not None:
        stopped = "bisected"
        lo, hi = largest_ok, smallest_failed
        while hi - lo > 1:
            mid = (lo + hi) // 2
            ok = attempt(mid)
            if ok is None:
                break
            lo, hi = (mid, hi) if ok else (lo, mid)
    _, suffix = variant({}, args.autocast, args.sdpa)
    summary = {"side": side, "workload": ("W6_tiny" if args.w6_tiny else "W6") + suffix, "summary": True,
               "largest_ok_batch": largest_ok,
               "smallest_failed_batch": smallest_failed, "stopped": stopped,
               "elapsed_s": time.perf_counter() - began}
    emit(summary)
    return summary


def run_capacity(args, modes, precision, log):
    # A SIGTERM (timeout(1)) becomes SystemExit, so subprocess.run kills a graph try's child too.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    out = open(args.out, "w") if args.out else sys.stdout

    def emit(entry):
        out.write(json.dumps(entry) + "\n")
        out.flush()

    # Graph first: its tries run in child processes, before this process holds a CUDA context.
    for mode in sorted(modes, key=lambda m: m != "graph"):
        summary = find_capacity(mode, args, emit, log)
        print(f"{summary['side']}: largest {summary['workload']} batch that ran {summary['largest_ok_batch']} "
              f"(smallest failed {summary['smallest_failed_batch']}, stopped: {summary['stopped']})", file=log,
              flush=True)
    ctx = context(args.device, args.threads, precision)
    ctx["executable"] = os.path.abspath(__file__)
    if args.device == "cuda":
        ctx["total_bytes"] = torch.cuda.mem_get_info()[1]
    emit({"context": ctx})
    if args.out:
        out.close()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--modes", default=None, help="eager,graph (default: both on cuda, eager on cpu)")
    parser.add_argument("--workloads", default=None,
                        help="comma separated, of W1,W2,W2_small,W6,W7,W7_small (default: the first three on cuda; W1,W2_small "
                             "on cpu; with --w6 only W6)")
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps first")
    parser.add_argument("--repeats", type=int, default=None,
                        help="timed calls, a step (W1) or a block of steps (W2) each (default: per device and "
                             "workload, see DEFAULT_REPEATS)")
    parser.add_argument("--block", type=int, default=5, help="W2 steps per timed call (one loss read each)")
    parser.add_argument("--threads", type=int, default=os.cpu_count(),
                        help="CPU threads for PyTorch (default: every core, as TBB uses)")
    parser.add_argument("--out", default=None, help="write the JSON report here (default: stdout)")
    parser.add_argument("--w6", action="store_true",
                        help="time W6 (alone, or after the --workloads given)")
    parser.add_argument("--w6-batch", type=int, default=default_w6_batch(),
                        help="W6's batch (default: TG_W6_BATCH, else 8)")
    parser.add_argument("--w6-tiny", action="store_true", help="W6 shrunk (named W6_tiny), to check the script")
    parser.add_argument("--checkpoint", action="store_true",
                        help="after each transformer workload also time <name>_ckpt (every block checkpointed)")
    parser.add_argument("--checkpoint-only", action="store_true",
                        help="time only the _ckpt variants of the selected transformer workloads")
    parser.add_argument("--w6-capacity", action="store_true",
                        help="find the largest W6 batch each mode (--modes) fits on the GPU; JSON lines to --out")
    parser.add_argument("--capacity-steps", type=int, default=3, help="timed steps per capacity try")
    parser.add_argument("--capacity-budget-s", type=float, default=90.0,
                        help="per mode: no capacity try starts after this many seconds")
    parser.add_argument("--capacity-try-timeout-s", type=float, default=120.0, help="a graph-mode try's time limit")
    parser.add_argument("--max-batch", type=int, default=1024, help="the capacity search's largest batch")
    parser.add_argument("--autocast", choices=["bf16", "f16"], default=None,
                        help="run the forward and loss under torch.autocast in this dtype (f16: with GradScaler, "
                        "eager only); names get the suffix _bf16 or _f16")
    parser.add_argument("--sdpa", action="store_true",
                        help="compute attention with F.scaled_dot_product_attention(is_causal=True) instead of the "
                        "mirror's masked softmax (PyTorch 2.1 or later); names get the suffix _sdpa")
    parser.add_argument("--w6-try", type=int, default=None, help=argparse.SUPPRESS)  # one capacity try (a child)
    args = parser.parse_args()

    if args.sdpa and sdpa_missing():
        raise SystemExit("pytorch_train.py: " + sdpa_missing())
    if args.w6_try is not None:  # a child of --w6-capacity: one try, one JSON line
        keep_fp32()
        print(json.dumps(capacity_try(args.modes or "eager", args.w6_try, args.capacity_steps, args.w6_tiny,
                                      args.device, args.autocast, args.sdpa)))
        return

    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("pytorch_train.py: CUDA is not available to this PyTorch")
    modes = args.modes.split(",") if args.modes else (["eager", "graph"] if args.device == "cuda" else ["eager"])
    unknown_modes = [m for m in modes if m not in ("eager", "graph", "compile")]
    if unknown_modes:
        raise SystemExit(f"pytorch_train.py: unknown mode {unknown_modes[0]} (known: eager, graph, compile)")
    if "graph" in modes and args.device != "cuda":
        raise SystemExit("pytorch_train.py: graph mode needs --device cuda")
    if "compile" in modes and not hasattr(torch, "compile"):
        raise SystemExit(f"pytorch_train.py: compile mode needs torch.compile (PyTorch 2.0 or later); this is torch "
                         f"{torch.__version__}")
    if "compile" in modes and args.w6_capacity:
        raise SystemExit("pytorch_train.py: --w6-capacity runs the eager and graph modes only")
    if args.autocast:
        dtype = {"bf16": torch.bfloat16, "f16": torch.float16}[args.autocast]
        if dtype == torch.float16 and "graph" in modes:
            raise SystemExit("pytorch_train.py: --autocast f16 runs eager only (GradScaler reads its inf flag "
                             "back to the host, which a CUDA graph capture refuses); pass --modes eager")
    if args.w6_capacity:  # on the CPU (eager) only to check the script: nothing bounds its memory
        torch.set_num_threads(args.threads)
        run_capacity(args, modes, keep_fp32(), sys.stdout if args.out else sys.stderr)
        return
    w6_name = "W6_tiny" if args.w6_tiny else "W6"
    WORKLOADS[w6_name] = w6_spec(args.w6_batch, args.w6_tiny)
    for name in [n for n, spec in WORKLOADS.items() if spec["kind"] == "w2"]:
        WORKLOADS[name + "_ckpt"] = checkpointed(WORKLOADS[name])
    if args.workloads:
        names = args.workloads.split(",")
    else:
        names = [] if args.w6 else (["W1", "W2", "W2_small"] if args.device == "cuda" else ["W1", "W2_small"])
    if args.w6 and w6_name not in names:
        names.append(w6_name)
    if args.checkpoint or args.checkpoint_only:
        with_ckpt = []
        for n in names:
            if not args.checkpoint_only or WORKLOADS.get(n, {}).get("kind") != "w2" or n.endswith("_ckpt"):
                with_ckpt.append(n)
            if WORKLOADS.get(n, {}).get("kind") == "w2" and not n.endswith("_ckpt") and n + "_ckpt" not in names:
                with_ckpt.append(n + "_ckpt")
        names = with_ckpt
    unknown = [n for n in names if n not in WORKLOADS]
    if unknown:
        raise SystemExit(f"pytorch_train.py: unknown workload {unknown[0]} (known: {', '.join(WORKLOADS)})")

    torch.set_num_threads(args.threads)
    precision = keep_fp32()
    log = sys.stdout if args.out else sys.stderr
    entries = []
    if args.autocast or args.sdpa:  # the same workloads as <name>_bf16, <name>_f16, <name>_sdpa, <name>_bf16_sdpa
        varied = []
        for n in names:
            spec, suffix = variant(WORKLOADS[n], args.autocast, args.sdpa and WORKLOADS[n]["kind"] == "w2")
            WORKLOADS[n + suffix] = spec
            varied.append(n + suffix)
        names = varied
    ctx = context(args.device, args.threads, precision)
    ctx["executable"] = os.path.abspath(__file__)

    def write_report():
        text = json.dumps({"context": ctx, "benchmarks": entries}, indent=2)
        with open(args.out + ".part", "w") as f:
            f.write(text + "\n")
        os.replace(args.out + ".part", args.out)  # whole or not at all, should a time limit strike

    for m in modes:
        for n in names:
            try:
                entries.append(time_workload(n, WORKLOADS[n], args.device, m, args.warmup,
                                             args.repeats or DEFAULT_REPEATS[(args.device, base_name(n))],
                                             args.block, log))
            except Exception as error:  # noqa: BLE001  (OutOfMemoryError, failed captures, compile errors)
                entries.append(failed_entry(n, args.device, m, error))
            if args.out:  # after each workload: a run stopped by a time limit keeps what it had
                write_report()
    if args.out:
        write_report()
    else:
        print(json.dumps({"context": ctx, "benchmarks": entries}, indent=2))


if __name__ == "__main__":
    main()
