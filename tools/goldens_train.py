#!/usr/bin/python3
"""Writes the training parity goldens of tests/golden/train/ (read by tests/unit/train_parity_test.cpp
and tests/vk/vk_train_parity_test.cpp), and holds the PyTorch mirror of examples/models.h that
bench/pytorch_train.py times.

Run with Debian's python3-torch (/usr/bin/python3, torch 1.13). Two workloads, each trained for STEPS
steps from the same literal init on the same batches, once in float64 and once in float32:

  w1        design.md's W1: Linear(1,64)-relu-Linear(64,64)-relu-Linear(64,1), MSE against sin(x),
            B 256, torch.optim.Adam(lr 5e-3)
  w2_small  W2 shrunk: char transformer, vocab 65, T 16, d 32, 2 layers, 4 heads, B 4,
            torch.optim.AdamW(lr 1e-3, weight_decay 0.01) with tensorgrad's decay groups

The models are written with explicit parameters named and laid out as tensorgrad's modules
(Linear W is [in, out], y = x W + b; not nn.Linear, which stores [out, in]). Two constants follow
tensorgrad's float rounding, because the IR stores every f32 constant as a float (even in the f64
oracle; docs/training/modules.md): the LayerNorm eps is float32(1e-5) = 9.99999975e-6, and the
attention scale is 1.0f / sqrtf(d/H) computed in float32, as examples/models.h writes it. Everything
else is PyTorch's own definition: F.layer_norm, F.gelu(approximate="tanh"), F.cross_entropy (mean),
a causal mask with -inf and torch.softmax, torch.optim with foreach=False.

Files per workload: <name>.json (config, param list with decay flags, each step's loss in float64
and float32) and <name>.safetensors (init.<param> F32, the batches data.<input> [STEPS, ...], and
the final params final64.<param> F64 / final32.<param> F32).

Mixed precision (tests/golden/train_mixed/, read by tests/unit/autocast_test.cpp): w2_small_bf16 is
w2_small from the same init on the same batches with the forward under
torch.autocast("cpu", dtype=torch.bfloat16) (params, gradients and AdamW state in float32; the
backward outside the autocast region, as PyTorch recommends); it stores each step's loss, and the
float32 run's again for the drift the test derives its bound from.

    /usr/bin/python3 tools/goldens_train.py           # (re)write tests/golden/train/*
    /usr/bin/python3 tools/goldens_train.py --check   # regenerate in memory, exit 1 on a difference
"""

import argparse
import json
import math
import os
import struct
import sys

import torch
import torch.nn.functional as F

# numpy is imported where the goldens need it: bench/pytorch_train.py imports the models on machines
# that may not have it.

TOOLS_DIR = os.path.dirname(os.path.abspath(__file__))
OUT_DIR = os.path.join(os.path.dirname(TOOLS_DIR), "tests", "golden", "train")
MIXED_DIR = os.path.join(os.path.dirname(TOOLS_DIR), "tests", "golden", "train_mixed")
STEPS = 20


def to_float32(value):
    """The float32 nearest to a Python float (round to nearest even), as a Python float."""
    return struct.unpack("<f", struct.pack("<f", value))[0]


LAYER_NORM_EPS = to_float32(1e-5)  # tensorgrad rounds the eps constant to float

# ---- the models: params (name, shape, decay) in tensorgrad's Module::params() order, and losses ----


def linear_params(name, n_in, n_out):
    # Linear: W [in, out] decays (randn init), b [out] does not (zeros init).
    return [(name + ".W", (n_in, n_out), True), (name + ".b", (n_out,), False)]


def layer_norm_params(name, width):
    return [(name + ".g", (width,), False), (name + ".b", (width,), False)]


def mlp_params():
    return linear_params("l1", 1, 64) + linear_params("l2", 64, 64) + linear_params("l3", 64, 1)


def transformer_params(cfg):
    d, v = cfg["width"], cfg["vocab"]
    out = [("tokens.W", (v, d), True), ("positions", (cfg["context"], d), True)]
    for i in range(cfg["layers"]):
        p = f"blocks.{i}."
        out += layer_norm_params(p + "ln1", d)
        for part in ("q", "k", "v", "proj"):
            out += linear_params(p + "attn." + part, d, d)
        out += layer_norm_params(p + "ln2", d) + linear_params(p + "fc", d, 4 * d) + linear_params(p + "out", 4 * d, d)
    return out + layer_norm_params("ln", d) + linear_params("head", d, v)


def linear(P, name, x):
    return x @ P[name + ".W"] + P[name + ".b"]


def mlp_loss(P, batch, cfg=None):
    r = linear(P, "l3", torch.relu(linear(P, "l2", torch.relu(linear(P, "l1", batch["x"]))))) - batch["y"]
    return torch.mean(r * r)


def attention_scale(cfg):
    """1.0f / std::sqrt(float(head_width)), in float32 as examples/models.h computes it. Computing
    sqrt and the division in double and rounding each to float gives the same bits: double has more
    than 2 * 24 + 2 bits, so the double rounding is innocuous for both operations."""
    return to_float32(1.0 / to_float32(math.sqrt(cfg["width"] // cfg["heads"])))


def causal_mask(T, device=None):
    return torch.triu(torch.ones(T, T, dtype=torch.bool, device=device), diagonal=1)  # j > i


def attend(P, name, x, heads, scale, mask):
    B, T, d = x.shape

    def split_heads(t):  # [B, T, H*hd] -> [B, H, T, hd], as tg::split_heads
        return t.reshape(B, T, heads, d // heads).transpose(1, 2)

    q, k, v = (split_heads(linear(P, f"{name}.{part}", x)) for part in ("q", "k", "v"))
    scores = (q @ k.transpose(-1, -2)) * scale
    weights = torch.softmax(scores.masked_fill(mask, float("-inf")), dim=-1)
    return linear(P, name + ".proj", (weights @ v).transpose(1, 2).reshape(B, T, d))


def layer_norm(P, name, x):
    return F.layer_norm(x, (x.shape[-1],), P[name + ".g"], P[name + ".b"], LAYER_NORM_EPS)


def transformer_logits(P, tokens, cfg, mask=None):
    mask = causal_mask(tokens.shape[1], tokens.device) if mask is None else mask
    scale = attention_scale(cfg)
    h = F.embedding(tokens, P["tokens.W"]) + P["positions"]
    for i in range(cfg["layers"]):
        p = f"blocks.{i}."
        h = h + attend(P, p + "attn", layer_norm(P, p + "ln1", h), cfg["heads"], scale, mask)
        h = h + linear(P, p + "out", F.gelu(linear(P, p + "fc", layer_norm(P, p + "ln2", h)), approximate="tanh"))
    return linear(P, "head", layer_norm(P, "ln", h))


def transformer_loss(P, batch, cfg, mask=None):
    logits = transformer_logits(P, batch["tokens"], cfg, mask)
    return F.cross_entropy(logits.reshape(-1, cfg["vocab"]), batch["targets"].reshape(-1).long())


def make_optimizer(optimizer, lr, params, decay, **torch_options):
    """torch.optim.Adam, or AdamW with a no-decay group for the params whose tensorgrad decay flag is off."""
    betas = (optimizer["beta1"], optimizer["beta2"])
    if optimizer["kind"] == "adam":
        return torch.optim.Adam(list(params.values()), lr=lr, betas=betas, eps=optimizer["eps"], **torch_options)
    groups = [{"params": [p for n, p in params.items() if decay[n]]},
              {"params": [p for n, p in params.items() if not decay[n]], "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=lr, betas=betas, eps=optimizer["eps"], weight_decay=optimizer["weight_decay"],
                             **torch_options)


# ---- the workloads: config, init and batches from one seeded generator ----

ADAM = {"kind": "adam", "beta1": 0.9, "beta2": 0.999, "eps": 1e-8}
ADAMW = {"kind": "adamw", "beta1": 0.9, "beta2": 0.999, "eps": 1e-8, "weight_decay": 0.01}
W2_SMALL = {"vocab": 65, "context": 16, "width": 32, "layers": 2, "heads": 4, "batch": 4}

WORKLOADS = {
    "w1": {"model": {"batch": 256}, "optimizer": ADAM, "lr": 5e-3, "seed": 1},
    "w2_small": {"model": W2_SMALL, "optimizer": ADAMW, "lr": 1e-3, "seed": 2},
}


def params_of(name, model):
    return mlp_params() if name == "w1" else transformer_params(model)


def loss_of(name):
    return mlp_loss if name == "w1" else transformer_loss


def init_values(name, model, rng):
    """Init values, drawn by rng.uniform(low, high, shape) and rng.normal(mean, std, shape) (numpy's
    Generator for the goldens, a torch one in bench/pytorch_train.py). W1: PyTorch's nn.Linear init
    (uniform in +-1/sqrt(in) for W and b). W2, as normal(mean, std): Linear weights (0, 1/sqrt(in)),
    embeddings (0, 1), positions (0, 0.5), Linear biases (0, 0.02), LayerNorm gains (1, 0.1) and
    shifts (0, 0.1): every param away from its special value, so that each gradient term (the
    affine ones included) is exercised."""
    out = {}
    for pname, shape, _ in params_of(name, model):
        if name == "w1":
            bound = 1.0 / math.sqrt(64 if not pname.startswith("l1.") else 1)
            values = rng.uniform(-bound, bound, shape)
        elif pname == "tokens.W":
            values = rng.normal(0.0, 1.0, shape)
        elif pname == "positions":
            values = rng.normal(0.0, 0.5, shape)
        elif pname.endswith(".g"):
            values = 1.0 + rng.normal(0.0, 0.1, shape)
        elif pname.endswith(".b") and len(shape) == 1 and pname.rsplit(".", 2)[-2].startswith("ln"):
            values = rng.normal(0.0, 0.1, shape)
        elif pname.endswith(".b"):
            values = rng.normal(0.0, 0.02, shape)
        else:  # a Linear W [in, out]
            values = rng.normal(0.0, 1.0 / math.sqrt(shape[0]), shape)
        out[pname] = values
    return out


def batches(name, model, rng):
    """Float32 / int32 arrays [STEPS, ...], one batch per step."""
    import numpy as np
    if name == "w1":
        x = rng.uniform(-3.0, 3.0, (STEPS, model["batch"], 1)).astype(np.float32)
        return {"x": x, "y": np.sin(x.astype(np.float64)).astype(np.float32)}
    B, T, V = model["batch"], model["context"], model["vocab"]
    stream = rng.integers(0, V, (STEPS, B, T + 1)).astype(np.int32)  # targets = the next token
    return {"tokens": np.ascontiguousarray(stream[:, :, :T]), "targets": np.ascontiguousarray(stream[:, :, 1:])}


def train(name, spec, init, data, dtype, autocast=None):
    """Float `dtype` params and batches; with `autocast` (a torch dtype) the loss is computed under
    torch.autocast("cpu", dtype=autocast)."""
    import contextlib
    import numpy as np
    model = spec["model"]
    params = {n: torch.tensor(v, dtype=dtype, requires_grad=True) for n, v in init.items()}
    decay = {n: d for n, _, d in params_of(name, model)}
    optimizer = make_optimizer(spec["optimizer"], spec["lr"], params, decay, foreach=False)
    loss_fn = loss_of(name)
    losses = []
    for step in range(STEPS):
        batch = {k: torch.tensor(v[step], dtype=dtype if v.dtype == np.float32 else torch.int32)
                 for k, v in data.items()}
        optimizer.zero_grad()
        region = torch.autocast("cpu", dtype=autocast) if autocast is not None else contextlib.nullcontext()
        with region:
            loss = loss_fn(params, batch, model)
        loss.backward()
        losses.append(float(loss))
        optimizer.step()
    final = {n: p.detach().numpy().copy() for n, p in params.items()}
    return losses, final


# ---- files ----

def safetensors_bytes(tensors):
    """A safetensors file (8-byte little-endian header length, JSON header, raw little-endian data)."""
    import numpy as np
    dtypes = {np.dtype(np.float32): "F32", np.dtype(np.float64): "F64", np.dtype(np.int32): "I32"}
    header, blobs, offset = {}, [], 0
    for tname, array in tensors.items():
        data = np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("<")).tobytes()
        header[tname] = {"dtype": dtypes[array.dtype], "shape": list(array.shape),
                         "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # the format allows trailing spaces; aligns the data
    return struct.pack("<Q", len(text)) + text + b"".join(blobs)


def dumps(value, indent=""):
    """JSON with one member per line, except that a value whose JSON fits in 100 characters, or a
    list of plain numbers, stays on one line (numbers in their shortest round-trip repr)."""
    flat = json.dumps(value)
    items = value.values() if isinstance(value, dict) else value if isinstance(value, list) else []
    if len(flat) <= 100 or not any(isinstance(v, (dict, list)) for v in items):
        return flat
    inner = indent + "  "
    if isinstance(value, dict):
        members = [f"{inner}{json.dumps(k)}: {dumps(v, inner)}" for k, v in value.items()]
        return "{\n" + ",\n".join(members) + "\n" + indent + "}"
    return "[\n" + ",\n".join(inner + dumps(v, inner) for v in value) + "\n" + indent + "]"


def build(name, spec):
    """(json text, safetensors bytes) of one workload."""
    import numpy as np
    rng = np.random.default_rng(spec["seed"])
    init = {n: v.astype(np.float32) for n, v in init_values(name, spec["model"], rng).items()}
    data = batches(name, spec["model"], rng)
    loss64, final64 = train(name, spec, init, data, torch.float64)
    loss32, final32 = train(name, spec, init, data, torch.float32)
    doc = {
        "workload": name,
        "generator": "tools/goldens_train.py",
        "torch_version": torch.__version__.split("+")[0],
        "steps": STEPS,
        "model": spec["model"],
        "optimizer": spec["optimizer"],
        "lr": spec["lr"],
        "params": [{"name": n, "shape": list(s), "decay": d} for n, s, d in params_of(name, spec["model"])],
        "tensors": name + ".safetensors",
        "float64": {"loss": loss64},
        "float32": {"loss": loss32},
    }
    tensors = {f"init.{n}": v for n, v in init.items()}
    tensors.update({f"data.{k}": v for k, v in data.items()})
    tensors.update({f"final64.{n}": v for n, v in final64.items()})
    tensors.update({f"final32.{n}": v for n, v in final32.items()})
    return dumps(doc) + "\n", safetensors_bytes(tensors)


MIXED = {"w2_small_bf16": ("w2_small", torch.bfloat16)}


def build_mixed(name):
    """The json text of one mixed-precision golden: its base workload's float32 and autocast losses."""
    import numpy as np
    base, dtype = MIXED[name]
    spec = WORKLOADS[base]
    rng = np.random.default_rng(spec["seed"])
    init = {n: v.astype(np.float32) for n, v in init_values(base, spec["model"], rng).items()}
    data = batches(base, spec["model"], rng)
    loss32, _ = train(base, spec, init, data, torch.float32)
    loss_mixed, _ = train(base, spec, init, data, torch.float32, autocast=dtype)
    doc = {
        "workload": name,
        "base": base,
        "generator": "tools/goldens_train.py",
        "torch_version": torch.__version__.split("+")[0],
        "autocast": str(dtype).replace("torch.", ""),
        "steps": STEPS,
        "tensors": "../train/" + base + ".safetensors",
        "float32": {"loss": loss32},
        "autocast_loss": loss_mixed,
    }
    return dumps(doc) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="compare with the stored files instead of writing")
    args = parser.parse_args()
    torch.set_num_threads(1)  # one reduction order
    torch.use_deterministic_algorithms(True)
    os.makedirs(OUT_DIR, exist_ok=True)
    os.makedirs(MIXED_DIR, exist_ok=True)
    files = []
    for name, spec in WORKLOADS.items():
        text, blob = build(name, spec)
        files.append((os.path.join(OUT_DIR, name + ".json"), text.encode()))
        files.append((os.path.join(OUT_DIR, name + ".safetensors"), blob))
    for name in MIXED:
        files.append((os.path.join(MIXED_DIR, name + ".json"), build_mixed(name).encode()))
    differ = False
    for path, content in files:
        if args.check:
            old = open(path, "rb").read() if os.path.exists(path) else None
            if old != content:
                print(f"{path}: differs from a fresh run")
                differ = True
        else:
            with open(path, "wb") as f:
                f.write(content)
            print(f"wrote {path} ({len(content)} bytes)")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
