"""The seeded bugs scripts/mutate.py applies, one at a time. Each is an exact replacement of text that
must occur once in `file`, and names the suites that should notice it (SUITES: binary, gtest filter,
timeout in seconds). A mutant is written to look like a plausible slip, not a crash: a lost tail
element, a partial combined in another order, a freed range forgotten, a boundary off by one.

Classes: "split reduction" (work cut into blocks, chunks or tiles and combined), "promise" (a
documented bit-exactness or accuracy claim), "placement" (the Vulkan buffer plan), "file format"
(safetensors and the text format at the byte), "rule" (gradient and optimizer rules), "kernel"
(other kernel slips), "low precision" (16-bit rounding and dtypes).
"""

SUITES = {
    "unit": ("tg_unit_tests", "", 600),
    "property": ("tg_property_tests", "", 1200),
    "golden": ("tg_golden_tests", "", 600),
    # Device-free plan tests and the Vulkan properties that run multi-block plans.
    "vk-plan": ("tg_vk_tests", "*Plan*:*Placement*:*Memory*", 900),
    "vk-reduce": ("tg_vk_tests", "*Reduce*:*Boundary*:*Adversarial*:*LongSum*:*RowSegments*", 1200),
    "vk-matmul": ("tg_vk_tests", "*Matmul*:*Boundary*", 1200),
    "vk-random": ("tg_vk_tests", "VkTest.Random*", 1200),
}

INTERP = ["unit", "golden", "property"]

MUTANTS = [
    # ---- split reductions ------------------------------------------------------------------------
    {
        "name": "interp-max-drops-block-tail",
        "class": "split reduction",
        "file": "src/interp/kernels/reduce.cpp",
        "find": "for (std::int64_t i = blocks * kBlockTerms; i < n; ++i) total = Op::combine(total, x[i]);",
        "replace": "for (std::int64_t i = blocks * kBlockTerms; i + 1 < n; ++i) total = Op::combine(total, x[i]);",
        "suites": INTERP,
    },
    {
        "name": "interp-max-skips-first-block",
        "class": "split reduction",
        "file": "src/interp/kernels/reduce.cpp",
        "find": "for (const T& p : partial) total = Op::combine(total, p);",
        "replace": "for (std::size_t b = 1; b < partial.size(); ++b) total = Op::combine(total, partial[b]);",
        "suites": INTERP,
    },
    {
        "name": "tree-sum-short-leaf-drops-last-term",
        "class": "split reduction",
        "file": "src/interp/tree_sum.h",
        "find": "for (std::int64_t k = full; k < n; ++k) leaf += x[k];",
        "replace": "for (std::int64_t k = full; k + 1 < n; ++k) leaf += x[k];",
        "suites": INTERP,
    },
    {
        "name": "interp-matmul-drops-last-k-past-depth-block",
        "class": "split reduction",
        "file": "src/interp/kernels/gemm.cpp",
        "find": "const std::int64_t k1 = std::min(g.k, k0 + kDepthBlock);",
        "replace": "const std::int64_t k1 = std::min(g.k - (g.k > kDepthBlock ? 1 : 0), k0 + kDepthBlock);",
        "suites": INTERP,
    },
    {
        "name": "interp-scatter-add-last-tile-short",
        "class": "split reduction",
        "file": "src/interp/kernels/indexing.cpp",
        "find": "const std::int64_t width = std::min(kInnerTile, split.inner - j0);\n      T* dst = out",
        "replace": "const std::int64_t width = std::min(kInnerTile, split.inner - j0) - (j0 > 0 ? 1 : 0);\n      T* dst = out",
        "suites": INTERP,
    },
    {
        "name": "vk-reduce-split-last-chunk-short",
        "class": "split reduction",
        "file": "shaders/reduce_split.comp",
        "find": "const uint end = min(pc.count, first + pc.span);",
        "replace": "const uint end = min(pc.count - 1u, first + pc.span);",
        "suites": ["vk-reduce"],
    },
    {
        "name": "vk-matmul-vector-store-drops-last-column",
        "class": "split reduction",
        "file": "shaders/matmul_common.glsl",
        "find": "if (gc + q < pc.N) c[at + q] = v[q];",
        "replace": "if (gc + q + 1u < pc.N) c[at + q] = v[q];",
        "suites": ["vk-matmul"],
    },
    # ---- promises ------------------------------------------------------------------------------------
    {
        "name": "interp-sum-blocks-associated-linearly",
        "class": "promise",
        "file": "src/interp/kernels/reduce.cpp",
        "find": "for (const T& p : partial) tree.push(p, kBlockLevel);",
        "replace": "T linear(0);\n    for (const T& p : partial) linear += p;\n"
                   "    for (std::size_t b = 0; b < partial.size(); ++b) tree.push(b == 0 ? linear : T(0), kBlockLevel);",
        "suites": INTERP,
    },
    {
        "name": "fast-exp-taylor-degree-6",
        "class": "promise",
        "file": "src/interp/kernels/softmax_rows_f32.cpp",
        "find": "Floats p = splat(1.0F / 5040.0F);\n  p = p * r + 1.0F / 720.0F;",
        "replace": "Floats p = splat(1.0F / 720.0F);",
        "suites": INTERP,
    },
    # ---- placement -----------------------------------------------------------------------------------
    {
        "name": "placement-first-fit-frees-first-block-only",
        "class": "placement",
        "file": "src/vk/plan.cpp",
        "find": "heaps[block].release(offset);",
        "replace": "if (block == 0) heaps[block].release(offset);",
        "suites": ["vk-plan", "vk-random"],
    },
    {
        "name": "placement-greedy-ignores-lives-in-later-blocks",
        "class": "placement",
        "file": "src/vk/plan.cpp",
        "find": "if (items[j].from < item.to && item.from < items[j].to)",
        "replace": "if (b == 0 && items[j].from < item.to && item.from < items[j].to)",
        "suites": ["vk-plan", "vk-random"],
    },
    {
        "name": "placement-first-fit-gap-four-bytes-short",
        "class": "placement",
        "file": "src/vk/plan.cpp",
        "find": "if (candidate + size <= offset) break;",
        "replace": "if (candidate + size <= offset + 4) break;",
        "suites": ["vk-plan", "vk-random"],
    },
    # ---- file formats --------------------------------------------------------------------------------
    {
        "name": "safetensors-one-byte-overlap",
        "class": "file format",
        "file": "src/train/safetensors.cpp",
        "find": "if (e->begin < covered) {",
        "replace": "if (e->begin + 1 < covered) {",
        "suites": ["unit"],
    },
    {
        "name": "safetensors-header-cap-refuses-the-cap",
        "class": "file format",
        "file": "src/train/safetensors.cpp",
        "find": "if (header_size > kMaxHeaderBytes) {",
        "replace": "if (header_size >= kMaxHeaderBytes) {",
        "suites": ["unit"],
    },
    {
        "name": "shape-limit-admits-one-past",
        "class": "file format",
        "file": "src/ir/types.cpp",
        "find": "if (d > 1 && extent > kMaxElements / d) {",
        "replace": "if (d > 1 && extent > (kMaxElements + 1) / d) {",
        "suites": ["unit"],
    },
    # ---- rules ---------------------------------------------------------------------------------------
    {
        "name": "grad-sub-second-operand-sign",
        "class": "rule",
        "file": "src/ir/ops/elementwise_binary.cpp",
        "find": "return {args.cotangent, neg(args.cotangent)};",
        "replace": "return {args.cotangent, args.cotangent};",
        "suites": INTERP,
    },
    {
        "name": "grad-div-uses-numerator-not-output",
        "class": "rule",
        "file": "src/ir/ops/elementwise_binary.cpp",
        "find": "return {g_over_b, neg(g_over_b * args.output)};",
        "replace": "return {g_over_b, neg(g_over_b * args.inputs[0])};",
        "suites": INTERP,
    },
    {
        "name": "adam-bias-correction-multiplied",
        "class": "rule",
        "file": "src/passes/optimizer.cpp",
        "find": "Tensor denom = sqrt(v_new) / scalar(kBiasCorrection2SqrtInput) + scalar(kEpsInput);",
        "replace": "Tensor denom = sqrt(v_new) * scalar(kBiasCorrection2SqrtInput) + scalar(kEpsInput);",
        "suites": INTERP,
    },
    {
        "name": "adam-eps-inside-sqrt",
        "class": "rule",
        "file": "src/passes/optimizer.cpp",
        "find": "Tensor denom = sqrt(v_new) / scalar(kBiasCorrection2SqrtInput) + scalar(kEpsInput);",
        "replace": "Tensor denom = sqrt(v_new + scalar(kEpsInput)) / scalar(kBiasCorrection2SqrtInput);",
        "suites": INTERP,
    },
    # ---- other kernel slips --------------------------------------------------------------------------
    {
        "name": "cross-entropy-max-skips-last-class",
        "class": "kernel",
        "file": "src/interp/kernels/losses.cpp",
        "find": "for (std::int64_t j = 0; j < classes; ++j) row_max = std::max(row_max, row[j]);\n    T total = 0;",
        "replace": "for (std::int64_t j = 0; j + 1 < classes; ++j) row_max = std::max(row_max, row[j]);\n    T total = 0;",
        "suites": INTERP,
    },
    {
        "name": "softmax-tiles-max-skips-last-row",
        "class": "kernel",
        "file": "src/interp/kernels/softmax.cpp",
        "find": "for (std::int64_t a = 0; a < length; ++a) {\n        const T* row = src + a * inner;\n"
                "        for (std::int64_t j = 0; j < width; ++j) row_max[j]",
        "replace": "for (std::int64_t a = 0; a + 1 < length; ++a) {\n        const T* row = src + a * inner;\n"
                   "        for (std::int64_t j = 0; j < width; ++j) row_max[j]",
        "suites": INTERP,
    },
    {
        "name": "conv-weight-grad-drops-last-column-tap",
        "class": "kernel",
        "file": "src/interp/kernels/image.cpp",
        "find": "if (iw >= 0 && iw < geo.w) acc += g_plane[i * geo.ow + j] * x_plane[ih * geo.w + iw];",
        "replace": "if (iw >= 0 && iw + 1 < geo.w) acc += g_plane[i * geo.ow + j] * x_plane[ih * geo.w + iw];",
        "suites": INTERP,
    },
    {
        "name": "interp-matmul-edge-rows-skip-single-row",
        "class": "kernel",
        "file": "src/interp/kernels/gemm.cpp",
        "find": "if (i < i1) edge_kernel(g, i, i1 - i, j0, j1 - j0, k0, k1);",
        "replace": "if (i + 1 < i1) edge_kernel(g, i, i1 - i, j0, j1 - j0, k0, k1);",
        "suites": INTERP,
    },
    # ---- low precision ---------------------------------------------------------------------------
    {
        "name": "bf16-ties-round-away-from-zero",
        "class": "low precision",
        "file": "src/ir/low_precision.cpp",
        "find": "const std::uint32_t rounded = bits + 0x7fffU + ((bits >> 16) & 1U);",
        "replace": "const std::uint32_t rounded = bits + 0x8000U;",
        "suites": ["unit"],
    },
    {
        "name": "f16-subnormals-truncate",
        "class": "low precision",
        "file": "src/ir/low_precision.cpp",
        "find": "static_cast<std::uint16_t>(std::nearbyint(scaled))",
        "replace": "static_cast<std::uint16_t>(std::trunc(scaled))",
        "suites": ["unit"],
    },
    {
        "name": "interp-leaves-bf16-unrounded-on-store",
        "class": "low precision",
        "file": "src/interp/interpreter.cpp",
        "find": "if (is_low_precision(out_type.dtype)) {\n      for (T& v : out.real) v = round_to_dtype(v, out_type.dtype);",
        "replace": "if (out_type.dtype == DType::f16) {\n      for (T& v : out.real) v = round_to_dtype(v, out_type.dtype);",
        "suites": ["unit"],
    },
    {
        "name": "cast-gradient-keeps-the-cotangent-dtype",
        "class": "low precision",
        "file": "src/ir/ops/precision.cpp",
        "find": "return {cast(args.cotangent, from)};",
        "replace": "return {args.cotangent};",
        "suites": ["unit", "property"],
    },
    {
        "name": "max-gradient-mask-in-f32",
        "class": "low precision",
        "file": "src/ir/ops/reduce.cpp",
        "find": "const Tensor hits = cast(where(equal(x, spread_back(args.output, in_shape, axes)), 1.0, 0.0), x.dtype());",
        "replace": "const Tensor hits = where(equal(x, spread_back(args.output, in_shape, axes)), 1.0, 0.0);",
        "suites": ["property"],
    },
]
