#!/usr/bin/python3
"""Writes the optimizer parity goldens of tests/golden/optim/*.json (read by
tests/unit/optimizer_parity_test.cpp).

Run with Debian's python3-torch (/usr/bin/python3). Each case trains the same tiny model with a
torch.optim optimizer (and optionally torch.nn.utils.clip_grad_norm_ and a torch.optim.lr_scheduler)
for STEPS steps, once in float64 and once in float32, and stores the learning rate each step used,
the loss each step computed (before its update) and the final parameters. The model:

    pred = x @ W + b        x [6, 3], W [3, 4], b [4], y [6, 4]
    loss = mean((pred - y)^2)

Every literal value is a multiple of 1/16 so that it is exact in float32: both precisions start from
the same numbers. Each case also carries its setup in tensorgrad's terms ("optimizer", "schedule",
"clip_grad_norm", "no_decay") so the C++ test can build the same thing.

    /usr/bin/python3 tools/goldens_optim.py           # (re)write tests/golden/optim/*.json
    /usr/bin/python3 tools/goldens_optim.py --check   # regenerate in memory, exit 1 on a difference
"""

import argparse
import json
import math
import os
import sys

import torch

TOOLS_DIR = os.path.dirname(os.path.abspath(__file__))
OUT_DIR = os.path.join(os.path.dirname(TOOLS_DIR), "tests", "golden", "optim")
STEPS = 20


def literal(shape, salt):
    """Deterministic values in [-2, 2), multiples of 1/16 (exact in float32)."""
    n = math.prod(shape)
    return [((i * 37 + salt * 11 + 5) % 64 - 32) / 16.0 for i in range(n)]


MODEL = {
    "x": {"shape": [6, 3], "values": literal([6, 3], 1)},
    "y": {"shape": [6, 4], "values": literal([6, 4], 2)},
    "W": {"shape": [3, 4], "values": [v / 4 for v in literal([3, 4], 3)]},
    "b": {"shape": [4], "values": [v / 4 for v in literal([4], 4)]},
}
PARAMS = ["W", "b"]


def tensor(name, dtype):
    spec = MODEL[name]
    return torch.tensor(spec["values"], dtype=dtype).reshape(spec["shape"])


# ---- the cases: tensorgrad's description, and a function building torch's optimizer/scheduler ----

def torch_optimizer(case, params):
    opt = case["optimizer"]
    no_decay = set(case.get("no_decay", []))
    decay = [p for n, p in params.items() if n not in no_decay]
    plain = [p for n, p in params.items() if n in no_decay]
    groups = [{"params": decay}]
    if plain:
        groups.append({"params": plain, "weight_decay": 0.0})
    lr = case["lr"]
    if opt["kind"] == "adam":
        return torch.optim.Adam(groups, lr=lr, betas=(opt["beta1"], opt["beta2"]), eps=opt["eps"], foreach=False)
    if opt["kind"] == "adamw":
        return torch.optim.AdamW(groups, lr=lr, betas=(opt["beta1"], opt["beta2"]), eps=opt["eps"],
                                 weight_decay=opt["weight_decay"], foreach=False)
    if opt["kind"] == "sgd":
        return torch.optim.SGD(groups, lr=lr, momentum=opt["momentum"], nesterov=opt["nesterov"],
                               weight_decay=opt["weight_decay"], foreach=False)
    raise ValueError(opt["kind"])


def cosine(peak, final, steps, t):
    """tensorgrad's cosine_annealing at 0-based step t (PyTorch's closed form)."""
    t = min(t, steps)
    return final + (peak - final) * (1 + math.cos(math.pi * t / steps)) / 2


def torch_scheduler(case, optimizer):
    s = case.get("schedule")
    if s is None:
        return None
    kind = s["kind"]
    if kind == "staircase":
        return torch.optim.lr_scheduler.StepLR(optimizer, step_size=s["every"], gamma=s["gamma"])
    if kind == "multi_step":
        return torch.optim.lr_scheduler.MultiStepLR(optimizer, milestones=s["milestones"], gamma=s["gamma"])
    if kind == "cosine_annealing":
        return torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=s["steps"], eta_min=s["final"])
    if kind == "linear":
        return torch.optim.lr_scheduler.LinearLR(optimizer, start_factor=1.0, end_factor=s["final"] / s["peak"],
                                                 total_iters=s["steps"])
    if kind == "warmup":
        # A linear warmup over `steps` (step k of it uses peak * k / steps), then `after`.
        w, after, peak = s["steps"], s["after"], s["peak"]

        def factor(epoch):
            if epoch < w:
                return (epoch + 1) / w
            if after["kind"] == "constant":
                return after["lr"] / peak
            if after["kind"] == "cosine_annealing":
                return cosine(after["peak"], after["final"], after["steps"], epoch - w) / peak
            raise ValueError(after["kind"])

        return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)
    raise ValueError(kind)


ADAM = {"kind": "adam", "beta1": 0.9, "beta2": 0.999, "eps": 1e-8}
ADAMW = {"kind": "adamw", "beta1": 0.9, "beta2": 0.999, "eps": 1e-8, "weight_decay": 0.1}
SGD = {"kind": "sgd", "momentum": 0.0, "nesterov": False, "weight_decay": 0.0}

CASES = [
    {"name": "adam", "optimizer": ADAM, "lr": 0.05},
    {"name": "adamw_no_decay_b", "optimizer": ADAMW, "lr": 0.05, "no_decay": ["b"]},
    {"name": "sgd_momentum", "optimizer": dict(SGD, momentum=0.9), "lr": 0.02},
    {"name": "sgd_nesterov_l2", "optimizer": dict(SGD, momentum=0.9, nesterov=True, weight_decay=0.05), "lr": 0.02},
    {"name": "adam_clip", "optimizer": ADAM, "lr": 0.05, "clip_grad_norm": 0.5},
    {"name": "sgd_clip", "optimizer": dict(SGD, momentum=0.5), "lr": 0.05, "clip_grad_norm": 1.0},
    {"name": "sgd_staircase", "optimizer": SGD, "lr": 0.05,
     "schedule": {"kind": "staircase", "peak": 0.05, "every": 6, "gamma": 0.5}},
    {"name": "sgd_multi_step", "optimizer": dict(SGD, momentum=0.9), "lr": 0.02,
     "schedule": {"kind": "multi_step", "peak": 0.02, "milestones": [3, 8, 8, 15], "gamma": 0.5}},
    {"name": "adamw_cosine", "optimizer": ADAMW, "lr": 0.05, "no_decay": ["b"],
     "schedule": {"kind": "cosine_annealing", "peak": 0.05, "final": 0.005, "steps": 20}},
    {"name": "adam_linear", "optimizer": ADAM, "lr": 0.05,
     "schedule": {"kind": "linear", "peak": 0.05, "final": 0.005, "steps": 12}},
    {"name": "adam_warmup", "optimizer": ADAM, "lr": 0.05,
     "schedule": {"kind": "warmup", "peak": 0.05, "steps": 5, "after": {"kind": "constant", "lr": 0.05}}},
    {"name": "sgd_warmup_cosine", "optimizer": dict(SGD, momentum=0.9), "lr": 0.02,
     "schedule": {"kind": "warmup", "peak": 0.02, "steps": 5,
                  "after": {"kind": "cosine_annealing", "peak": 0.02, "final": 0.002, "steps": 15}}},
]


def run(case, dtype):
    params = {n: tensor(n, dtype).requires_grad_(True) for n in PARAMS}
    x, y = tensor("x", dtype), tensor("y", dtype)
    optimizer = torch_optimizer(case, params)
    scheduler = torch_scheduler(case, optimizer)
    lrs, losses, grad_norms = [], [], []
    for _ in range(STEPS):
        optimizer.zero_grad()
        loss = torch.mean(torch.square(x @ params["W"] + params["b"] - y))
        loss.backward()
        if "clip_grad_norm" in case:
            norm = torch.nn.utils.clip_grad_norm_(list(params.values()), case["clip_grad_norm"])
            grad_norms.append(float(norm))
        lrs.append(optimizer.param_groups[0]["lr"])
        losses.append(float(loss))
        optimizer.step()
        if scheduler is not None:
            scheduler.step()
    result = {"lr": lrs, "loss": losses}
    if grad_norms:
        result["grad_norm"] = grad_norms
    for n in PARAMS:
        result[n] = [float(v) for v in params[n].detach().reshape(-1)]
    return result


def build(case):
    out = {k: v for k, v in case.items()}
    out["generator"] = "tools/goldens_optim.py"
    out["torch_version"] = torch.__version__.split("+")[0]
    out["steps"] = STEPS
    out["model"] = MODEL
    out["float64"] = run(case, torch.float64)
    out["float32"] = run(case, torch.float32)
    return dumps(out) + "\n"


def dumps(value, indent=""):
    """JSON with one member per line but each list of numbers on one line (shortest round-trip repr)."""
    if isinstance(value, dict):
        inner = indent + "  "
        members = [f"{inner}{json.dumps(k)}: {dumps(v, inner)}" for k, v in value.items()]
        return "{\n" + ",\n".join(members) + "\n" + indent + "}"
    if isinstance(value, list) and any(isinstance(v, (dict, list)) for v in value):
        inner = indent + "  "
        return "[\n" + ",\n".join(inner + dumps(v, inner) for v in value) + "\n" + indent + "]"
    return json.dumps(value)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="compare with the stored files instead of writing")
    args = parser.parse_args()
    torch.set_num_threads(1)  # one reduction order
    torch.use_deterministic_algorithms(True)
    os.makedirs(OUT_DIR, exist_ok=True)
    differ = False
    for case in CASES:
        text = build(case)
        path = os.path.join(OUT_DIR, case["name"] + ".json")
        if args.check:
            old = open(path).read() if os.path.exists(path) else None
            if old != text:
                print(f"{path}: differs from a fresh run")
                differ = True
        else:
            with open(path, "w") as f:
                f.write(text)
            print(f"wrote {path}")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
