#!/usr/bin/env python3
"""Writes the fuzzers' seed corpora and dictionaries under fuzz/ (deterministic; rerun after adding
an op or changing the byte layout of fuzz/entry_build_graph.cpp). Standard library only:

  /usr/bin/python3 fuzz/make_seeds.py

fuzz/corpus/parse_graph/    graph texts covering the text format's syntax (both header forms,
                            `after`, quoted names, comments, every literal kind), plus the graph
                            part of each tests/golden/regressions/*.graph
fuzz/corpus/safetensors/    valid files: every stored dtype, metadata, empty and 0-d tensors
fuzz/corpus/build_graph/    one byte string per registry op (one f32[3,4] input, then that op)
fuzz/dict/*.dict            libFuzzer dictionaries: the text format's keywords, op and attribute
                            names; the safetensors header's keys and dtype names
"""
import pathlib
import re
import struct

ROOT = pathlib.Path(__file__).resolve().parent.parent
FUZZ = ROOT / "fuzz"

GRAPHS = {
    "mlp.graph": """\
graph mlp(%x: f32[4,1], %y: f32[4,1], param %l1.W: f32[1,8], state %m: f32[1,8]) {
  %0 = matmul(%x, %l1.W) : f32[4,8] @"model.cpp":12:7
  %1 = sum(%0) {axes=[0,1], keep_dims=false} : f32[]
  return loss=%1, grad.l1.W=%0
}
""",
    "grouped.graph": """\
# the grouped header form, comments, quoted names and a NaN literal
graph g(%x: f32[2,3]) params(%w: f32[3,2]) state(%"step count": i32[]) {
  %0 = matmul(%x, %w) : f32[2,2]  // a comment
  %1 = softmax(%0) {axis=1} : f32[2,2]
  %2 = full() {dtype=f32, shape=[2,2], value=nan} : f32[2,2]
  %3 = add(%1, %2) : f32[2,2] @"a \\"quoted\\" file\\x01":3:4
  return "out 1"=%3, raw=%0
}
""",
    "after.graph": """\
graph late(%x: f32[3], %y: f32[3] after %0) {
  %0 = exp(%x) : f32[3]
  %1 = mul(%0, %y) : f32[3]
  %2 = clamp(%1) {hi=inf, lo=-1e+30} : f32[3]
  return out=%2
}
""",
    "checkpoint.graph": """\
graph ckpt(param %w: f32[3], %x: f32[3]) {
  %0 = mul(%x, %w) : f32[3] checkpoint 0
  %1 = tanh(%0) : f32[3] checkpoint 0 @"model.cpp":4:9
  %2 = exp(%1) : f32[3] checkpoint 2
  %3 = sum(%2) {axes=[0], keep_dims=false} : f32[]
  return loss=%3
}
""",
    "indexing.graph": """\
graph idx(%t: i32[4], %l: f32[4,5]) {
  %0 = cross_entropy(%l, %t) {reduction="mean"} : f32[]
  %1 = one_hot(%t) {depth=5} : f32[4,5]
  %2 = argmax(%l) {axis=1, keep_dims=false} : i32[4]
  %3 = embedding(%l, %2) : f32[4,5]
  %4 = less(%0, %0) : bool[]
  return loss=%0, hit=%4, oh=%1, e=%3
}
""",
    "image.graph": """\
graph conv(%x: f32[1,2,5,5], param %w: f32[3,2,3,3], param %d: f32[2,1,2,3]) {
  %0 = conv2d(%x, %w) {dilation=[1,1], groups=1, padding=[1,1], stride=[1,1]} : f32[1,3,5,5]
  %1 = max_pool2d(%0) {kernel=2, padding=0, stride=2} : f32[1,3,2,2]
  %2 = reshape(%1) {shape=[3,4]} : f32[3,4]
  %3 = permute(%2) {perm=[1,0]} : f32[4,3]
  %4 = narrow(%3) {axis=0, length=2, start=1} : f32[2,3]
  %5 = concat(%4, %4) {axis=0} : f32[4,3]
  %6 = pad(%5) {after=1, axis=1, before=0} : f32[4,4]
  %7 = conv2d(%x, %d) {dilation=[2,1], groups=2, padding=[1,0], stride=[1,2]} : f32[1,2,5,2]
  %8 = conv2d_input_grad(%7, %d) {dilation=[2,1], groups=2, height=5, padding=[1,0], stride=[1,2], width=5} : f32[1,2,5,5]
  %9 = conv2d_weight_grad(%x, %7) {dilation=[2,1], groups=2, kernel_h=2, kernel_w=3, padding=[1,0], stride=[1,2]} : f32[2,1,2,3]
  return y=%6, dx=%8, dw=%9
}
""",
    "random.graph": """\
graph rnd(%step_seed: i32[]) {
  %0 = randn(%step_seed) {salt=0, shape=[2,3]} : f32[2,3]
  %1 = dropout(%0, %step_seed) {p=0.5, salt=1} : f32[2,3]
  %2 = arange() {dtype=i32, n=3} : i32[3]
  %3 = zeros() {dtype=bool, shape=[0,3]} : bool[0,3]
  return y=%1, r=%2, e=%3
}
""",
}

# safetensors: (name, dtype code, struct format, shape, values)
DTYPES = {
    "F64": "d", "F32": "f", "F16": "e", "I64": "q", "I32": "i", "I16": "h", "I8": "b",
    "U64": "Q", "U32": "I", "U16": "H", "U8": "B", "BOOL": "?",
}


def safetensors(tensors, metadata=None):
    header, data = {}, b""
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, dtype, shape, values in tensors:
        raw = b"".join(struct.pack("<" + DTYPES[dtype], v) for v in values) if dtype != "BF16" else \
            b"".join(struct.pack("<f", v)[2:] for v in values)
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    text = repr_json(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    return struct.pack("<Q", len(text)) + text + data


def repr_json(v):
    import json
    return json.dumps(v, separators=(",", ":"))


SAFETENSORS = {
    "empty.safetensors": safetensors([]),
    "f32.safetensors": safetensors([("w", "F32", [2, 3], [0.5, -1, 2, 3.25, 1e-3, -0.0])]),
    "metadata.safetensors": safetensors([("b", "F32", [3], [1, 2, 3])], {"step": "1200", "format": "pt"}),
    "scalar_and_empty.safetensors": safetensors([("s", "F32", [], [7.0]), ("e", "I32", [0, 4], [])]),
    "mixed.safetensors": safetensors([
        ("a.f64", "F64", [2], [0.1, -2.5]), ("b.f16", "F16", [2], [0.5, -3.0]), ("c.bf16", "BF16", [2], [1.0, -2.0]),
        ("d.i64", "I64", [2], [-5, 7]), ("e.i16", "I16", [2], [-3, 3]), ("f.i8", "I8", [2], [-1, 1]),
        ("g.u64", "U64", [1], [9]), ("h.u32", "U32", [1], [10]), ("i.u16", "U16", [1], [11]), ("j.u8", "U8", [2], [0, 255]),
        ("k.bool", "BOOL", [3], [True, False, True]), ("l.i32", "I32", [1, 1], [-2147483648]),
    ]),
    "unicode_names.safetensors": safetensors([("layer.\u00e9\u4e2d", "F32", [1], [1.0])], {"note": "\u2713"}),
}


def op_names():
    text = (ROOT / "include/tensorgrad/ir/ops/ops.def").read_text()
    return re.findall(r'^TG_(?:OP|EW)\(\w+, "(\w+)"', text, re.M)


def attr_names():
    names = set()
    for path in (ROOT / "src/ir/ops").glob("*.cpp"):
        names.update(re.findall(r'\{"(\w+)", AttrKind::', path.read_text()))
    return sorted(names)


def build_graph_seed(op_index, op_count):
    # fuzz/entry_build_graph.cpp's layout: input count (1 + b % 3), per input dtype (b % 5 < 3:
    # f32), rank (b % 5), dims (1 + b % 8 for b < 200), kind; then per step the op choice
    # (b % (ops + composites)) followed by its operands and attributes. Filler byte 5 picks an
    # operand, keeps every attribute (5 % 32 > 1) and draws small values. The op comes first, then
    # three others, so a seed already builds a short chain.
    seed = [0, 0, 2, 2, 3, 0]
    for k in range(4):
        seed += [(op_index + 17 * k) % op_count] + [5] * 8
    return bytes(seed)


def write(directory, name, content):
    directory.mkdir(parents=True, exist_ok=True)
    (directory / name).write_bytes(content if isinstance(content, bytes) else content.encode())


def main():
    parse_dir, st_dir, bg_dir = (FUZZ / "corpus" / target for target in ("parse_graph", "safetensors", "build_graph"))
    dict_dir = FUZZ / "dict"
    for name, text in GRAPHS.items():
        write(parse_dir, name, text)
    for path in sorted((ROOT / "tests/golden/regressions").glob("*.graph")):
        write(parse_dir, "regression-" + path.name, path.read_text().split("\n---\n")[0] + "\n")
    for name, content in SAFETENSORS.items():
        write(st_dir, name, content)
    ops = op_names()
    for i, op in enumerate(ops):
        write(bg_dir, f"op-{i:02d}-{op}", build_graph_seed(i, len(ops)))
    keywords = ["graph", "param", "state", "params(", "state(", "after", "checkpoint", "return", "%", "%0", ": ", " = ",
                "{", "}", "[", "]", "f32", "i32", "bool", "true", "false", "nan", "inf", "-inf", "1e+300", "@\"", "#", "//",
                "\\x00", "\\\"", "-1", "2147483648", "9223372036854775807"]
    lines = [f'"{k.replace(chr(92), chr(92) * 2).replace(chr(34), chr(92) + chr(34))}"' for k in keywords]
    lines += [f'"{op}("' for op in ops] + [f'"{a}="' for a in attr_names()]
    write(dict_dir, "parse_graph.dict", "# libFuzzer dictionary, written by fuzz/make_seeds.py\n" + "\n".join(lines) + "\n")
    st_keys = ["__metadata__", "dtype", "shape", "data_offsets"] + sorted(DTYPES) + ["BF16", "F8_E4M3", "C64"]
    st_lines = [f'"\\"{k}\\""' for k in st_keys] + ['"{"', '"}"', '"["', '"]"', '":"', '","', '"\\\\u0000"',
                                                     '"18446744073709551615"', '"null"']
    write(dict_dir, "safetensors.dict", "# libFuzzer dictionary, written by fuzz/make_seeds.py\n" + "\n".join(st_lines) + "\n")


if __name__ == "__main__":
    main()
