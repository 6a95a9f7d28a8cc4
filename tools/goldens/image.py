"""Golden cases of the image family (NCHW): conv2d, max_pool2d, the composite nearest_upsample2d and
the ops their gradients emit (conv2d_input_grad, conv2d_weight_grad, max_pool2d_grad).

The ops are called in their IR form (no entry in tests/golden/calls_*.cpp), every attribute given:
- conv2d(input, weight): `stride`, `padding`, `dilation` (integer lists [height, width]), `groups`;
- conv2d_input_grad(grad_output, weight): those and `height`, `width`;
- conv2d_weight_grad(input, grad_output): those and `kernel_h`, `kernel_w`;
- max_pool2d(input) and max_pool2d_grad(input, grad_output): `kernel`, `stride`, `padding`.
The weight is [O, C / groups, KH, KW], as PyTorch's. Front-end forms the IR does not take go through
explicit entries of tests/golden/calls_image.cpp: conv2d_with_defaults (tg::conv2d(x, w)),
conv2d_options (per-axis stride, padding, dilation and groups through tg::Conv2dOptions' Pair2d),
conv2d_same (padding = tg::kPaddingSame, with `dilation` and `groups`: the odd extra row or column
of an even total padding goes after the image, a pad op, as PyTorch's padding='same'),
max_pool2d_with_default_stride and the composite nearest_upsample2d (`factor`).
The conv adjoints are computed by PyTorch's autograd with create_graph=True, so their goldens also
check their own gradients (second order through conv2d). max_pool2d inputs are untied: with ties
the chosen element depends on the tie rule. max_pool2d_grad is not differentiable in tensorgrad,
so its cases check the forward value only.
"""

import warnings

import torch
import torch.nn.functional as F

from goldens.spec import Case, f32, sixteen_bit_variants


def pair(v):
    return [v, v] if isinstance(v, int) else list(v)


def conv(stride=1, padding=0, dilation=1, groups=1, **more):
    """The IR attributes of a convolution: stride, padding and dilation as [height, width]."""
    return {"stride": pair(stride), "padding": pair(padding), "dilation": pair(dilation), "groups": groups, **more}


def torch_conv(x, w, a):
    return F.conv2d(x, w, stride=tuple(a["stride"]), padding=tuple(a["padding"]), dilation=tuple(a["dilation"]),
                    groups=a["groups"])


def conv_input_grad(g, w, a):
    """d sum(conv2d(x, w) * g) / dx for an x of [N, C, height, width] (C = weight dim 1 x groups): the
    transposed convolution."""
    x = torch.zeros(g.shape[0], w.shape[1] * a["groups"], a["height"], a["width"], dtype=w.dtype,
                    requires_grad=True)
    return torch.autograd.grad(torch_conv(x, w, a), x, grad_outputs=g, create_graph=True)[0]


def conv_weight_grad(x, g, a):
    """d sum(conv2d(x, w) * g) / dw for a w of [O, C / groups, kernel_h, kernel_w]."""
    w = torch.zeros(g.shape[1], x.shape[1] // a["groups"], a["kernel_h"], a["kernel_w"], dtype=x.dtype,
                    requires_grad=True)
    return torch.autograd.grad(torch_conv(x, w, a), w, grad_outputs=g, create_graph=True)[0]


def max_pool_grad(x, g, kernel, stride, padding):
    """d sum(max_pool2d(x) * g) / dx: g routed to each window's maximum, added where windows overlap."""
    x = x.detach().requires_grad_(True)
    y = F.max_pool2d(x, kernel, stride=stride, padding=padding)
    return torch.autograd.grad(y, x, grad_outputs=g)[0]


def upsample(x, factor):
    return F.interpolate(x, scale_factor=factor, mode="nearest")


def conv2d_case(name, x, w, note=None, **geometry):
    a = conv(**geometry)
    return Case(name, "conv2d", a, {"x": f32(x), "w": f32(w)}, lambda x, w: torch_conv(x, w, a), note=note)


# PyTorch's note that an even total padding = same pads a copy of the input: what the cases test.
warnings.filterwarnings("ignore", message="Using padding='same' with even kernel lengths")


def same_case(name, x, w, dilation=1, groups=1, note=None):
    """padding = same through the front end (tg::conv2d(x, w, {.padding = tg::kPaddingSame, ...}))."""
    a = {"dilation": pair(dilation), "groups": groups}
    return Case(name, "conv2d_same", a, {"x": f32(x), "w": f32(w)},
                lambda x, w: F.conv2d(x, w, padding="same", dilation=tuple(a["dilation"]), groups=groups), note=note)


def input_grad_case(name, g, w, height, width, note=None, **geometry):
    a = conv(**geometry, height=height, width=width)
    return Case(name, "conv2d_input_grad", a, {"g": f32(g), "w": f32(w)},
                lambda g, w: conv_input_grad(g, w, a), note=note)


def weight_grad_case(name, x, g, kernel_h, kernel_w, note=None, **geometry):
    a = conv(**geometry, kernel_h=kernel_h, kernel_w=kernel_w)
    return Case(name, "conv2d_weight_grad", a, {"x": f32(x), "g": f32(g)},
                lambda x, g: conv_weight_grad(x, g, a), note=note)


def conv2d_cases():
    return [
        conv2d_case("conv2d_one_channel_2x2_kernel", [1, 1, 4, 4], [2, 1, 2, 2]),
        # The front-end's defaults (stride 1, padding 0, dilation 1, groups 1) as a user calls tg::conv2d(x, w).
        Case("conv2d_frontend_defaults", "conv2d_with_defaults", {},
             {"x": f32([1, 2, 5, 4]), "w": f32([3, 2, 2, 3])},
             lambda x, w: F.conv2d(x, w)),
        conv2d_case("conv2d_stride1_pad0", [2, 3, 5, 6], [4, 3, 3, 3]),
        conv2d_case("conv2d_stride2_pad1_uneven", [1, 2, 7, 6], [3, 2, 3, 3], stride=2, padding=1),
        conv2d_case("conv2d_nonsquare_kernel_pad2", [2, 2, 4, 5], [2, 2, 2, 3], padding=2),
        conv2d_case("conv2d_stride2_tall_kernel", [1, 3, 8, 5], [2, 3, 3, 1], stride=2),
        # dilation
        conv2d_case("conv2d_dilation2_pad1", [1, 2, 7, 7], [3, 2, 3, 3], padding=1, dilation=2),
        conv2d_case("conv2d_dilation2x1_stride1x2_pad2x0", [2, 2, 8, 6], [2, 2, 3, 2], stride=(1, 2),
                    padding=(2, 0), dilation=(2, 1)),
        # groups
        conv2d_case("conv2d_groups2_pad1", [2, 4, 5, 5], [6, 2, 3, 3], padding=1, groups=2),
        conv2d_case("conv2d_depthwise", [1, 3, 6, 5], [3, 1, 3, 3], padding=1, groups=3,
                    note="depthwise: groups = C, one kernel a channel"),
        conv2d_case("conv2d_depthwise_multiplier2_stride2", [2, 3, 5, 5], [6, 1, 3, 3], stride=2, groups=3,
                    note="depthwise with channel multiplier 2: O = 2C, groups = C"),
        # per-axis stride and padding
        conv2d_case("conv2d_stride2x1_pad1x0", [1, 2, 7, 5], [3, 2, 3, 3], stride=(2, 1), padding=(1, 0)),
        conv2d_case("conv2d_kernel_larger_than_input", [1, 2, 3, 3], [2, 2, 5, 4], padding=(2, 1),
                    note="a 5x4 kernel over a 3x3 image: only the padding lets it fit"),
        conv2d_case("conv2d_stride3_over_2x2_kernel", [1, 2, 9, 8], [2, 2, 2, 2], stride=3,
                    note="stride 3 > kernel 2: some rows and columns are never read"),
        conv2d_case("conv2d_everything", [1, 4, 9, 8], [4, 2, 3, 2], stride=(2, 1), padding=(1, 2),
                    dilation=(2, 3), groups=2, note="per-axis stride, padding and dilation with groups 2"),
        # The front end's per-axis options and groups (tg::Conv2dOptions' Pair2d: {height, width}).
        Case("conv2d_frontend_per_axis_grouped", "conv2d_options",
             conv(stride=(1, 2), padding=(0, 1), dilation=(2, 1), groups=2),
             {"x": f32([1, 4, 7, 6]), "w": f32([2, 2, 2, 3])},
             lambda x, w: F.conv2d(x, w, stride=(1, 2), padding=(0, 1), dilation=(2, 1), groups=2)),
        # padding = same (the front end; the IR holds the explicit padding and, when odd, a pad op).
        same_case("conv2d_same_odd_kernel", [1, 2, 5, 6], [3, 2, 3, 3]),
        same_case("conv2d_same_even_kernel", [2, 2, 5, 5], [2, 2, 4, 2],
                  note="even kernels: the extra row and column of padding go after the image, as PyTorch"),
        same_case("conv2d_same_dilated", [1, 2, 6, 7], [2, 2, 3, 2], dilation=(2, 3),
                  note="dilated: total padding 4 in height (even), 3 in width (odd, the extra column after)"),
        same_case("conv2d_same_nonsquare_kernel", [1, 2, 4, 6], [3, 2, 1, 5]),
        same_case("conv2d_same_grouped_even_kernel", [1, 4, 5, 4], [4, 2, 2, 3], groups=2),
    ]


def conv_adjoint_cases():
    return [
        input_grad_case("conv2d_input_grad_stride1", [2, 4, 3, 4], [4, 3, 3, 3], 5, 6),
        input_grad_case("conv2d_input_grad_stride2_pad1", [1, 3, 4, 3], [3, 2, 3, 3], 7, 6, stride=2, padding=1),
        input_grad_case("conv2d_input_grad_unused_rows", [1, 2, 3, 2], [2, 1, 3, 2], 8, 5, stride=2,
                        note="stride 2 leaves the last image row and column unread: their gradient is 0"),
        input_grad_case("conv2d_input_grad_dilation2_pad1", [1, 3, 5, 5], [3, 2, 3, 3], 7, 7, padding=1, dilation=2),
        input_grad_case("conv2d_input_grad_groups2_stride2x1_pad1x0", [2, 4, 3, 4], [4, 2, 3, 3], 5, 6,
                        stride=(2, 1), padding=(1, 0), groups=2),
        input_grad_case("conv2d_input_grad_depthwise_dilated", [1, 6, 5, 4], [6, 1, 2, 3], 8, 7, stride=(1, 2),
                        padding=(0, 1), dilation=(3, 1), groups=3,
                        note="depthwise, channel multiplier 2, dilation [3, 1], stride [1, 2]"),
        input_grad_case("conv2d_input_grad_stride3_over_2x2_kernel", [1, 2, 3, 3], [2, 2, 2, 2], 9, 8, stride=3,
                        note="stride 3 > kernel 2: the rows and columns no window reads get gradient 0"),
        input_grad_case("conv2d_input_grad_kernel_larger_than_input", [1, 2, 3, 2], [2, 1, 5, 4], 3, 3,
                        padding=(2, 1)),
        weight_grad_case("conv2d_weight_grad_stride1", [2, 3, 5, 6], [2, 4, 3, 4], 3, 3),
        weight_grad_case("conv2d_weight_grad_stride2_pad1", [1, 2, 7, 6], [1, 3, 4, 3], 3, 3, stride=2, padding=1),
        weight_grad_case("conv2d_weight_grad_nonsquare_pad2", [2, 1, 4, 5], [2, 2, 7, 7], 2, 3, padding=2),
        weight_grad_case("conv2d_weight_grad_dilation2_pad1", [1, 2, 7, 7], [1, 3, 5, 5], 3, 3, padding=1,
                         dilation=2),
        weight_grad_case("conv2d_weight_grad_groups2_stride2x1_pad1x0", [2, 4, 5, 6], [2, 4, 3, 4], 3, 3,
                         stride=(2, 1), padding=(1, 0), groups=2),
        weight_grad_case("conv2d_weight_grad_depthwise_dilated", [1, 3, 8, 7], [1, 6, 5, 4], 2, 3, stride=(1, 2),
                         padding=(0, 1), dilation=(3, 1), groups=3,
                         note="depthwise, channel multiplier 2, dilation [3, 1], stride [1, 2]"),
        weight_grad_case("conv2d_weight_grad_stride3_over_2x2_kernel", [1, 2, 9, 8], [1, 2, 3, 3], 2, 2, stride=3),
        weight_grad_case("conv2d_weight_grad_kernel_larger_than_input", [1, 1, 3, 3], [1, 2, 3, 2], 5, 4,
                         padding=(2, 1)),
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

# The 16-bit goldens (f16 and bf16 variants; goldens/spec.py, in_16bit). PyTorch 1.13's CPU has no
# f16 convolution (the reference is then f32 rounded once by itself); its bf16 one rounds
# intermediates, so the bf16 conv references are computed in f32 and rounded once too.
BF16_CONV = ("PyTorch 1.13's CPU bfloat16 convolution rounds intermediates to bfloat16, not the f32 result "
             "rounded once")
CONV_16 = ["conv2d_stride1_pad0", "conv2d_stride2_pad1_uneven", "conv2d_input_grad_stride1", "conv2d_weight_grad_stride1",
           "conv2d_everything", "conv2d_same_even_kernel", "conv2d_input_grad_depthwise_dilated",
           "conv2d_weight_grad_depthwise_dilated"]
CASES += sixteen_bit_variants(CASES, CONV_16 + ["max_pool2d_k2_s2", "max_pool2d_k3_s2_p1", "max_pool2d_grad_k2_s2",
                                                "nearest_upsample2d_x2"],
                              via_f32={name: {"bf16": BF16_CONV} for name in CONV_16})
