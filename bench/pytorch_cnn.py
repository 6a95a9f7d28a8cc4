"""W7 and W7_small in PyTorch: the twins of examples/models.h's ResNetCnn and SmallCnn, for
bench/pytorch_train.py (kind "cnn").

Explicit params with tensorgrad's names and layouts (conv W [out, in, k, k], Linear W [in, out], y = x W + b),
drawn as tensorgrad's inits draw them (not the same values: the step time does not depend on them):
conv and hidden Linear weights kaiming normal, std sqrt(2 / fan_in); the classifier's std 1 / sqrt(fan_in);
biases zero. The batch: images uniform in [-1, 1), labels uniform in [0, 10).
  W7        [B, 3, 32, 32]: stem conv3x3 3->32 + relu; two residual blocks at 32 (relu(x + c2(relu(c1(x))))),
            max-pool 2, conv3x3 32->64 + relu, a residual block at 64, max-pool 2, mean over H and W,
            linear 64->10; cross-entropy. Batch 128.
  W7_small  [B, 1, 8, 8]: conv3x3 1->16 + relu, conv3x3 16->32 + relu, max-pool 2, flatten, linear
            512->64 + relu, linear 64->10; cross-entropy. Batch 64.
Every conv is stride 1, pad 1.
"""
import math

import torch
import torch.nn.functional as F

W7 = {"net": "resnet", "image": 32, "in_channels": 3, "width": 32, "classes": 10, "batch": 128}
W7_SMALL = {"net": "small", "image": 8, "in_channels": 1, "classes": 10, "batch": 64}


def params(cfg):
    """[(name, shape, init)] with init "kaiming" (std sqrt(2 / fan_in)), "head" (1 / sqrt(fan_in)) or "zeros"."""
    out = []

    def conv(name, cin, cout):
        out.extend([(name + ".W", (cout, cin, 3, 3), "kaiming"), (name + ".b", (cout,), "zeros")])

    def linear(name, fin, fout, init="kaiming"):
        out.extend([(name + ".W", (fin, fout), init), (name + ".b", (fout,), "zeros")])

    if cfg["net"] == "resnet":
        w = cfg["width"]
        conv("stem", cfg["in_channels"], w)
        for i in range(2):
            conv(f"stage1.{i}.c1", w, w)
            conv(f"stage1.{i}.c2", w, w)
        conv("widen", w, 2 * w)
        conv("stage2.c1", 2 * w, 2 * w)
        conv("stage2.c2", 2 * w, 2 * w)
        linear("head", 2 * w, cfg["classes"], "head")
    else:
        conv("c1", 1, 16)
        conv("c2", 16, 32)
        linear("fc1", 32 * 4 * 4, 64)
        linear("fc2", 64, cfg["classes"], "head")
    return out


def init_values(cfg, gen):
    """Init values from a seeded torch.Generator (float32, on the CPU)."""
    values = {}
    for name, shape, init in params(cfg):
        if init == "zeros":
            values[name] = torch.zeros(shape)
            continue
        fan_in = shape[0] if len(shape) == 2 else math.prod(shape[1:])
        gain = math.sqrt(2.0) if init == "kaiming" else 1.0
        values[name] = torch.randn(shape, generator=gen) * (gain / math.sqrt(fan_in))
    return values


def batch(cfg, gen):
    B, C, H = cfg["batch"], cfg["in_channels"], cfg["image"]
    images = torch.rand((B, C, H, H), generator=gen) * 2.0 - 1.0
    labels = torch.randint(0, cfg["classes"], (B,), generator=gen, dtype=torch.int32)
    return {"images": images, "labels": labels}


def _conv(P, name, x):
    return F.conv2d(x, P[name + ".W"], P[name + ".b"], stride=1, padding=1)


def _linear(P, name, x):
    return x @ P[name + ".W"] + P[name + ".b"]


def _residual(P, name, x):
    return torch.relu(x + _conv(P, name + ".c2", torch.relu(_conv(P, name + ".c1", x))))


def logits(P, images, cfg):
    if cfg["net"] == "resnet":
        h = torch.relu(_conv(P, "stem", images))
        for i in range(2):
            h = _residual(P, f"stage1.{i}", h)
        h = torch.relu(_conv(P, "widen", F.max_pool2d(h, 2)))
        h = F.max_pool2d(_residual(P, "stage2", h), 2)
        return _linear(P, "head", h.mean(dim=(2, 3)))
    h = F.max_pool2d(torch.relu(_conv(P, "c2", torch.relu(_conv(P, "c1", images)))), 2)
    return _linear(P, "fc2", torch.relu(_linear(P, "fc1", h.flatten(1))))


def loss(P, batch_, cfg):
    return F.cross_entropy(logits(P, batch_["images"], cfg), batch_["labels"].long())
