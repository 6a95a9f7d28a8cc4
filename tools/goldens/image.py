"""Golden cases of the image family (NCHW): conv2d, max_pool2d, the composite nearest_upsample2d and
the ops their gradients emit (conv2d_input_grad, conv2d_weight_grad, max_pool2d_grad).

The ops are called in their IR form (no entry in tests/golden/calls_*.cpp), every attribute given:
- conv2d(input, weight): `stride`, `padding`;
- conv2d_input_grad(grad_output, weight): `height`, `width`, `stride`, `padding`;
- conv2d_weight_grad(input, grad_output): `kernel_h`, `kernel_w`, `stride`, `padding`;
- max_pool2d(input) and max_pool2d_grad(input, grad_output): `kernel`, `stride`, `padding`.
The composite nearest_upsample2d (tests/golden/calls_image.cpp) takes `factor`.
The conv adjoints are computed by PyTorch's autograd with create_graph=True, so their goldens also
check their own gradients (second order through conv2d). max_pool2d inputs are untied: with ties
the chosen element depends on the tie rule. max_pool2d_grad is not differentiable in tensorgrad,
so its cases check the forward value only.
"""

import torch
import torch.nn.functional as F

from goldens.spec import Case, f32, sixteen_bit_variants


def conv_input_grad(g, w, height, width, stride, padding):
    """d sum(conv2d(x, w) * g) / dx for an x of [N, C, height, width]: the transposed convolution."""
    x = torch.zeros(g.shape[0], w.shape[1], height, width, dtype=w.dtype, requires_grad=True)
    y = F.conv2d(x, w, stride=stride, padding=padding)
    return torch.autograd.grad(y, x, grad_outputs=g, create_graph=True)[0]


def conv_weight_grad(x, g, kernel_h, kernel_w, stride, padding):
    """d sum(conv2d(x, w) * g) / dw for a w of [O, C, kernel_h, kernel_w]."""
    w = torch.zeros(g.shape[1], x.shape[1], kernel_h, kernel_w, dtype=x.dtype, requires_grad=True)
    y = F.conv2d(x, w, stride=stride, padding=padding)
    return torch.autograd.grad(y, w, grad_outputs=g, create_graph=True)[0]


def max_pool_grad(x, g, kernel, stride, padding):
    """d sum(max_pool2d(x) * g) / dx: g routed to each window's maximum, added where windows overlap."""
    x = x.detach().requires_grad_(True)
    y = F.max_pool2d(x, kernel, stride=stride, padding=padding)
    return torch.autograd.grad(y, x, grad_outputs=g)[0]


def upsample(x, factor):
    return F.interpolate(x, scale_factor=factor, mode="nearest")


def conv2d_cases():
    return [
        Case("conv2d_one_channel_2x2_kernel", "conv2d", {"stride": 1, "padding": 0},
             {"x": f32([1, 1, 4, 4]), "w": f32([2, 1, 2, 2])},
             lambda x, w: F.conv2d(x, w)),
        # The front-end's defaults (stride 1, padding 0) as a user calls tg::conv2d(x, w).
        Case("conv2d_frontend_defaults", "conv2d_with_defaults", {},
             {"x": f32([1, 2, 5, 4]), "w": f32([3, 2, 2, 3])},
             lambda x, w: F.conv2d(x, w)),
        Case("conv2d_stride1_pad0", "conv2d", {"stride": 1, "padding": 0},
             {"x": f32([2, 3, 5, 6]), "w": f32([4, 3, 3, 3])},
             lambda x, w: F.conv2d(x, w, stride=1, padding=0)),
        Case("conv2d_stride2_pad1_uneven", "conv2d", {"stride": 2, "padding": 1},
             {"x": f32([1, 2, 7, 6]), "w": f32([3, 2, 3, 3])},
             lambda x, w: F.conv2d(x, w, stride=2, padding=1)),
        Case("conv2d_nonsquare_kernel_pad2", "conv2d", {"stride": 1, "padding": 2},
             {"x": f32([2, 2, 4, 5]), "w": f32([2, 2, 2, 3])},
             lambda x, w: F.conv2d(x, w, stride=1, padding=2)),
        Case("conv2d_stride2_tall_kernel", "conv2d", {"stride": 2, "padding": 0},
             {"x": f32([1, 3, 8, 5]), "w": f32([2, 3, 3, 1])},
             lambda x, w: F.conv2d(x, w, stride=2, padding=0)),
    ]


def conv_adjoint_cases():
    return [
        Case("conv2d_input_grad_stride1", "conv2d_input_grad",
             {"height": 5, "width": 6, "stride": 1, "padding": 0},
             {"g": f32([2, 4, 3, 4]), "w": f32([4, 3, 3, 3])},
             lambda g, w: conv_input_grad(g, w, 5, 6, 1, 0)),
        Case("conv2d_input_grad_stride2_pad1", "conv2d_input_grad",
             {"height": 7, "width": 6, "stride": 2, "padding": 1},
             {"g": f32([1, 3, 4, 3]), "w": f32([3, 2, 3, 3])},
             lambda g, w: conv_input_grad(g, w, 7, 6, 2, 1)),
        Case("conv2d_input_grad_unused_rows", "conv2d_input_grad",
             {"height": 8, "width": 5, "stride": 2, "padding": 0},
             {"g": f32([1, 2, 3, 2]), "w": f32([2, 1, 3, 2])},
             lambda g, w: conv_input_grad(g, w, 8, 5, 2, 0),
             note="stride 2 leaves the last image row and column unread: their gradient is 0"),
        Case("conv2d_weight_grad_stride1", "conv2d_weight_grad",
             {"kernel_h": 3, "kernel_w": 3, "stride": 1, "padding": 0},
             {"x": f32([2, 3, 5, 6]), "g": f32([2, 4, 3, 4])},
             lambda x, g: conv_weight_grad(x, g, 3, 3, 1, 0)),
        Case("conv2d_weight_grad_stride2_pad1", "conv2d_weight_grad",
             {"kernel_h": 3, "kernel_w": 3, "stride": 2, "padding": 1},
             {"x": f32([1, 2, 7, 6]), "g": f32([1, 3, 4, 3])},
             lambda x, g: conv_weight_grad(x, g, 3, 3, 2, 1)),
        Case("conv2d_weight_grad_nonsquare_pad2", "conv2d_weight_grad",
             {"kernel_h": 2, "kernel_w": 3, "stride": 1, "padding": 2},
             {"x": f32([2, 1, 4, 5]), "g": f32([2, 2, 7, 7])},
             lambda x, g: conv_weight_grad(x, g, 2, 3, 1, 2)),
    ]


def pool_cases():
    return [
        Case("max_pool2d_k2_s2", "max_pool2d", {"kernel": 2, "stride": 2, "padding": 0},
             {"x": f32([2, 3, 6, 6], untied=True)},
             lambda x: F.max_pool2d(x, 2)),
        # The front-end's default stride (the kernel) as a user calls tg::max_pool2d(x, 3).
        Case("max_pool2d_frontend_default_stride", "max_pool2d_with_default_stride", {"kernel": 3},
             {"x": f32([1, 2, 7, 6], untied=True)},
             lambda x: F.max_pool2d(x, 3)),
        Case("max_pool2d_k3_s2_p1", "max_pool2d", {"kernel": 3, "stride": 2, "padding": 1},
             {"x": f32([1, 2, 7, 5], untied=True)},
             lambda x: F.max_pool2d(x, 3, stride=2, padding=1)),
        Case("max_pool2d_k3_s1_p1_overlapping", "max_pool2d", {"kernel": 3, "stride": 1, "padding": 1},
             {"x": f32([2, 1, 5, 6], untied=True)},
             lambda x: F.max_pool2d(x, 3, stride=1, padding=1)),
        Case("max_pool2d_k2_s1", "max_pool2d", {"kernel": 2, "stride": 1, "padding": 0},
             {"x": f32([1, 2, 4, 5], untied=True)},
             lambda x: F.max_pool2d(x, 2, stride=1, padding=0)),
        Case("max_pool2d_grad_k2_s2", "max_pool2d_grad", {"kernel": 2, "stride": 2, "padding": 0},
             {"x": f32([1, 2, 6, 5], untied=True), "g": f32([1, 2, 3, 2])},
             lambda x, g: max_pool_grad(x, g, 2, 2, 0), grad=False),
        Case("max_pool2d_grad_k3_s1_p1_overlapping", "max_pool2d_grad", {"kernel": 3, "stride": 1, "padding": 1},
             {"x": f32([2, 1, 5, 5], untied=True), "g": f32([2, 1, 5, 5])},
             lambda x, g: max_pool_grad(x, g, 3, 1, 1), grad=False),
        Case("max_pool2d_grad_k3_s2_p1", "max_pool2d_grad", {"kernel": 3, "stride": 2, "padding": 1},
             {"x": f32([1, 1, 7, 6], untied=True), "g": f32([1, 1, 4, 3])},
             lambda x, g: max_pool_grad(x, g, 3, 2, 1), grad=False),
    ]


def upsample_cases():
    return [
        Case("nearest_upsample2d_x2", "nearest_upsample2d", {"factor": 2},
             {"x": f32([1, 2, 3, 4])}, lambda x: upsample(x, 2)),
        Case("nearest_upsample2d_x3", "nearest_upsample2d", {"factor": 3},
             {"x": f32([2, 1, 2, 2])}, lambda x: upsample(x, 3)),
        Case("nearest_upsample2d_x1", "nearest_upsample2d", {"factor": 1},
             {"x": f32([1, 1, 2, 3])}, lambda x: upsample(x, 1)),
    ]


CASES = conv2d_cases() + conv_adjoint_cases() + pool_cases() + upsample_cases()

# The 16-bit goldens (f16 and bf16 variants; goldens/spec.py, in_16bit).
CASES += sixteen_bit_variants(CASES, ["conv2d_stride1_pad0", "conv2d_stride2_pad1_uneven", "conv2d_input_grad_stride1",
                                      "conv2d_weight_grad_stride1", "max_pool2d_k2_s2", "max_pool2d_k3_s2_p1",
                                      "max_pool2d_grad_k2_s2", "nearest_upsample2d_x2"])
