#!/usr/bin/python3
"""Generates the golden files of tests/golden/data from the cases in tools/goldens/<module>.py.

Run with Debian's python3-torch (/usr/bin/python3). For every module of tools/goldens (one per op
family of ops.def, plus `normalization`; not spec and __init__) it writes
tests/golden/data/<module>.golden holding all the module's CASES: the inputs (drawn from a
generator seeded by the module and case name), PyTorch's float64 output and, for float outputs, a
projection `proj` and the gradient of sum(out * proj) with respect to every f32 input. The format
is described in tests/golden/README.md.

    /usr/bin/python3 tools/make_goldens.py                     # regenerate every module
    /usr/bin/python3 tools/make_goldens.py --only reduce       # one module
    /usr/bin/python3 tools/make_goldens.py --check             # regenerate into a temp dir, diff, exit 1 on a difference

The output is a function of the cases alone, bit for bit: every case draws from its own generator
and runs under the same torch state, whatever ran before it, and the process pins what makes
float64 results machine-dependent (see pin_environment). A case that fails (an exception in its
torch callable, a bad spec) is reported by name and left out of its file; the exit status is then 1.
"""

import argparse
import glob
import importlib
import math
import os
import random
import re
import struct
import sys
import sysconfig
import tempfile
import traceback
import zlib

TOOLS_DIR = os.path.dirname(os.path.abspath(__file__))
REPO_DIR = os.path.dirname(TOOLS_DIR)
DATA_DIR = os.path.join(REPO_DIR, "tests", "golden", "data")
OPS_DEF = os.path.join(REPO_DIR, "include", "tensorgrad", "ir", "ops", "ops.def")
sys.path.insert(0, TOOLS_DIR)

# ---- the environment -----------------------------------------------------------------------------
# Besides the cases, PyTorch's float64 digits depend on three things a machine chooses, so the
# generator pins each of them before torch is loaded (the dynamic loader and ATen read them once, at
# start-up, hence the re-exec):
# - the BLAS behind libblas.so.3, which computes matmul and conv2d (im2col + gemm). The reference
#   BLAS adds each dot product's terms in order; OpenBLAS blocks and vectorizes the sum by a kernel
#   it picks for the CPU. The files committed before this pin came from an OpenBLAS on its generic
#   (Prescott) kernels, and a run on a machine with the reference BLAS changed the last digits of
#   matmul_long_inner and of two conv2d adjoint cases: regenerating one family rewrote digits of
#   others.
#   Pinned: the reference BLAS (Debian's libblas3), found first through LD_LIBRARY_PATH.
# - ATen's CPU capability: its vectorized sums, softmax and transcendental functions take other
#   orders and formulas at default, avx2 and avx512 (each gives other digits here). Pinned: avx2,
#   what Debian's torch picks on current x86-64 CPUs.
# - threads: one (OpenMP, OpenBLAS, MKL), so no sum is split by a thread count.
# environment_problems() checks that the pins took; writing files refuses to run otherwise.
PINNED_MARK = "TG_GOLDENS_PINNED"
PINNED_CAPABILITY = "avx2"
EXPECTED_TORCH = "1.13."  # Debian 12's python3-torch, which wrote the committed files


def multiarch_lib_dir() -> str:
    arch = sysconfig.get_config_var("MULTIARCH") or ""
    return os.path.join("/usr/lib", arch) if arch else "/usr/lib"


def reference_blas_dirs() -> list:
    """Debian's reference BLAS and LAPACK directories (libblas3, liblapack3), those present."""
    base = multiarch_lib_dir()
    dirs = [os.path.join(base, "blas"), os.path.join(base, "lapack")]
    return [d for d in dirs if glob.glob(os.path.join(d, "lib*.so.3"))]


def pin_environment():
    """Re-executes this script once with the pinned BLAS, CPU capability and thread counts."""
    if os.environ.get(PINNED_MARK) == "1":
        return
    env = dict(os.environ)
    env[PINNED_MARK] = "1"
    env["ATEN_CPU_CAPABILITY"] = PINNED_CAPABILITY
    for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env[name] = "1"
    dirs = reference_blas_dirs()
    if env.get("LD_LIBRARY_PATH"):
        dirs.append(env["LD_LIBRARY_PATH"])
    if dirs:
        env["LD_LIBRARY_PATH"] = ":".join(dirs)
    os.execve(sys.executable, [sys.executable, os.path.abspath(__file__)] + sys.argv[1:], env)


if __name__ == "__main__":
    pin_environment()

import torch  # noqa: E402

from goldens.spec import SIXTEEN_BIT, Case, InputSpec  # noqa: E402


def loaded_blas() -> list:
    """The BLAS libraries this process has mapped (after a float64 matmul has loaded them)."""
    torch.ones(2, 2, dtype=torch.float64) @ torch.ones(2, 2, dtype=torch.float64)
    try:
        with open("/proc/self/maps", encoding="utf-8") as f:
            paths = {line.split()[-1] for line in f if "/" in line}
    except OSError:
        return []
    return sorted(os.path.realpath(p) for p in paths if re.search(r"lib(open)?blas|libmkl", os.path.basename(p)))


def cpu_capability() -> str:
    found = re.search(r"CPU capability usage: (\S+)", torch.__config__.show())
    return found.group(1) if found else "unknown"


def describe_environment() -> str:
    blas = ", ".join(loaded_blas()) or "unknown"
    return f"torch {torch.__version__}, ATen CPU capability {cpu_capability()}, BLAS {blas}, " \
           f"{torch.get_num_threads()} thread(s)"


def environment_problems() -> list:
    """What differs from the pinned environment (empty when the files will come out bit for bit)."""
    problems = []
    if not torch.__version__.startswith(EXPECTED_TORCH):
        problems.append(f"torch {torch.__version__}, not {EXPECTED_TORCH}x (Debian 12's python3-torch)")
    if cpu_capability().lower() != PINNED_CAPABILITY:
        problems.append(f"ATen runs at CPU capability {cpu_capability()}, not {PINNED_CAPABILITY.upper()} "
                        "(this CPU lacks it, or ATEN_CPU_CAPABILITY was not honoured)")
    reference = os.path.join(multiarch_lib_dir(), "blas")
    blas = loaded_blas()
    if not blas or any(os.path.dirname(p) != reference for p in blas):
        problems.append(f"the BLAS in use is {', '.join(blas) or 'unknown'}, not the reference BLAS in "
                        f"{reference} (install Debian's libblas3)")
    if torch.get_num_threads() != 1:
        problems.append(f"torch runs {torch.get_num_threads()} threads")
    return problems

NAME_RE = re.compile(r"^[A-Za-z0-9_]+$")
IDENT_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
WRAP_COLUMNS = 100  # value lists longer than this continue on indented lines
NOT_MODULES = {"spec", "__init__"}


class CaseError(Exception):
    pass


def to_f32(v: float) -> float:
    """v rounded to the nearest float32, carried as a Python float (float64)."""
    return struct.unpack("<f", struct.pack("<f", v))[0]


def case_seed(module: str, name: str) -> int:
    """The seed of one case's generators: its module and name, nothing else (not the cases before
    it). crc32, not hash(): hash() of a str changes from run to run (PYTHONHASHSEED)."""
    return zlib.crc32(f"{module}/{name}".encode("utf-8"))


def to_16bit(v: float, kind: str) -> float:
    """v rounded to float16 or bfloat16 (by PyTorch, from float64 directly), as a Python float."""
    dtype = {"f16": torch.float16, "bf16": torch.bfloat16}[kind]
    return float(torch.tensor([v], dtype=torch.float64).to(dtype).double().item())


def draw_values(spec: InputSpec, rng) -> list:
    if spec.kind in SIXTEEN_BIT and spec.values is not None:
        return [to_16bit(v, spec.kind) for v in spec.values]
    if spec.kind in SIXTEEN_BIT:
        wide = draw_values(InputSpec("f32", spec.shape, spec.lo, spec.hi, spec.untied, spec.integral, spec.values), rng)
        return [to_16bit(v, spec.kind) for v in wide]
    n = spec.size()
    if spec.values is not None:
        return [to_f32(v) for v in spec.values]
    if spec.kind == "i32":
        return [rng.randint(spec.lo, spec.hi) for _ in range(n)]
    if spec.kind == "bool":
        return [1 if rng.random() < 0.5 else 0 for _ in range(n)]
    if spec.kind != "f32":
        raise CaseError(f"unknown input kind {spec.kind!r}")
    if spec.integral:
        lo, hi = math.ceil(spec.lo), math.floor(spec.hi)
        if lo > hi:
            raise CaseError(f"no whole number lies in [{spec.lo}, {spec.hi}]")
        return [float(rng.randint(lo, hi)) for _ in range(n)]
    if spec.untied:
        # One value per cell of an even grid, jittered inside the middle half of its cell: any two
        # values are at least half a cell apart, also after rounding to float32.
        step = (spec.hi - spec.lo) / max(n, 1)
        values = [to_f32(spec.lo + step * (i + 0.5 + rng.uniform(-0.25, 0.25))) for i in range(n)]
        rng.shuffle(values)
        return values
    return [to_f32(rng.uniform(spec.lo, spec.hi)) for _ in range(n)]


def make_tensor(spec: InputSpec, values: list, requires_grad: bool):
    dtype = {"f32": torch.float64, "i32": torch.int64, "bool": torch.bool, "f16": torch.float16,
             "bf16": torch.bfloat16}[spec.kind]
    data = [bool(v) for v in values] if spec.kind == "bool" else values
    t = torch.tensor(data, dtype=dtype).reshape(spec.shape)
    if spec.kind == "f32" and requires_grad:
        t.requires_grad_(True)
    return t


def output_kind(t) -> str:
    if t.dtype == torch.bool:
        return "bool"
    if t.dtype == torch.float16:
        return "f16"
    if t.dtype == torch.bfloat16:
        return "bf16"
    if t.dtype.is_floating_point:
        return "f32"
    if t.dtype.is_complex:
        raise CaseError(f"the torch callable returned a complex tensor ({t.dtype})")
    return "i32"


def tensor_values(t, kind: str) -> list:
    flat = t.detach().reshape(-1)
    if kind in ("f32",) + SIXTEEN_BIT:
        return [float(v) for v in flat.double().tolist()]
    values = [int(v) for v in flat.tolist()]
    if kind == "i32" and any(v < -2**31 or v >= 2**31 for v in values):
        raise CaseError("an integer output does not fit in i32")
    return values


def check_case(case: Case):
    if not isinstance(case.name, str) or not NAME_RE.match(case.name):
        raise CaseError(f"case name {case.name!r} must be letters, digits and '_'")
    if not isinstance(case.call, str) or not case.call or any(c.isspace() for c in case.call):
        raise CaseError(f"call {case.call!r} must be a non-empty word")
    for key, value in case.attrs.items():
        if not IDENT_RE.match(key):
            raise CaseError(f"attribute name {key!r} is not an identifier")
        format_attr(value)  # raises on a value of another kind
    for key, spec in case.inputs.items():
        if not IDENT_RE.match(key):
            raise CaseError(f"input name {key!r} is not an identifier")
        if not isinstance(spec, InputSpec):
            raise CaseError(f"input {key!r} is not made by f32/i32/boolean")


def format_attr(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value)  # always has '.', 'e', 'inf' or 'nan': reads back as a real
    if isinstance(value, str):
        if any(ord(c) < 32 for c in value):
            raise CaseError(f"string attribute {value!r} holds a control character")
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, (list, tuple)) and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        return "[" + ",".join(str(v) for v in value) + "]"
    raise CaseError(f"attribute value {value!r} is not an int, float, bool, str or list of ints")


def format_value(v, kind: str) -> str:
    return repr(float(v)) if kind in ("f32",) + SIXTEEN_BIT else str(int(v))


def tensor_lines(head: str, kind: str, shape, values: list) -> list:
    """`head kind [shape] values...`, wrapped onto indented continuation lines when long."""
    header = f"{head} {kind} [{','.join(str(d) for d in shape)}]"
    tokens = [format_value(v, kind) for v in values]
    one_line = header + "".join(" " + t for t in tokens)
    if len(one_line) <= WRAP_COLUMNS:
        return [one_line]
    lines, current = [header], " "
    for t in tokens:
        if len(current) + 1 + len(t) > WRAP_COLUMNS and current.strip():
            lines.append(current)
            current = " "
        current += " " + t
    lines.append(current)
    return lines


def reset_torch_state(seed: int):
    """The torch state every case starts from, whatever ran before it: a callable that draws from
    torch's generator draws the same numbers alone or after other cases."""
    torch.manual_seed(seed)
    torch.set_default_dtype(torch.float64)  # constants made inside callables are float64 too
    torch.set_grad_enabled(True)


def run_case(case: Case, module: str) -> list:
    """Draws the inputs, runs PyTorch and returns the case's lines in the golden format."""
    check_case(case)
    seed = case_seed(module, case.name)
    rng = random.Random(seed)
    values = {name: draw_values(spec, rng) for name, spec in case.inputs.items()}
    tensors = [make_tensor(spec, values[name], case.grad) for name, spec in case.inputs.items()]
    reset_torch_state(seed)
    out = case.torch(*tensors)
    if not isinstance(out, torch.Tensor):
        raise CaseError(f"the torch callable returned {type(out).__name__}, not a tensor")
    kind = output_kind(out)
    out_values = tensor_values(out, kind)

    lines = [f"case {case.name}"]
    note = "\n".join(filter(None, [case.note, getattr(case, "note_after_run", {}).get("note")]))
    if note:
        lines += ["# " + line for line in note.splitlines()]
    lines.append(f"call {case.call}")
    lines += [f"attr {key} = {format_attr(value)}" for key, value in case.attrs.items()]
    for name, spec in case.inputs.items():
        lines += tensor_lines(f"input {name}", spec.kind, spec.shape, values[name])
    lines += tensor_lines("output", kind, list(out.shape), out_values)

    float_inputs = [(name, t) for (name, spec), t in zip(case.inputs.items(), tensors) if spec.kind == "f32"]
    if case.grad and kind == "f32" and float_inputs:
        proj = [to_f32(rng.uniform(-1.0, 1.0)) for _ in out_values]
        loss = (out * torch.tensor(proj, dtype=torch.float64).reshape(out.shape)).sum()
        grads = [None] * len(float_inputs)
        if loss.requires_grad:  # false when nothing flows back (stop_gradient, constants)
            grads = torch.autograd.grad(loss, [t for _, t in float_inputs], allow_unused=True)
        lines += tensor_lines("proj", "f32", list(out.shape), proj)
        for (name, t), g in zip(float_inputs, grads):
            g = torch.zeros_like(t) if g is None else g
            lines += tensor_lines(f"grad {name}", "f32", list(t.shape), tensor_values(g, "f32"))
    lines.append("end")
    return lines


def module_names() -> list:
    names = []
    for file in sorted(os.listdir(os.path.join(TOOLS_DIR, "goldens"))):
        stem, ext = os.path.splitext(file)
        if ext == ".py" and stem not in NOT_MODULES:
            names.append(stem)
    return names


def load_cases(modules: list, failures: list) -> dict:
    """module -> its CASES, for the modules that load."""
    loaded = {}
    for module_name in modules:
        try:
            loaded[module_name] = list(importlib.import_module("goldens." + module_name).CASES)
        except Exception as e:
            failures.append(f"{module_name}: cannot load the module: {type(e).__name__}: {e}")
    return loaded


def duplicate_names(loaded: dict) -> dict:
    """(module, case name) -> the module that used the name first, over every loaded module (case
    names are GoogleTest names, unique over all files, also when one module is regenerated)."""
    first, duplicates = {}, {}
    for module_name in sorted(loaded):
        for case in loaded[module_name]:
            name = getattr(case, "name", "?")
            if name in first:
                duplicates[(module_name, name)] = first[name]
            else:
                first[name] = module_name
    return duplicates


def generate(modules: list, out_dir: str, failures: list) -> list:
    """Writes <out_dir>/<module>.golden for each module; returns the files written. Case names are
    checked against every module, not just those written."""
    loaded = load_cases(module_names(), [])
    loaded.update(load_cases(modules, failures))  # failures of the modules asked for are reported
    duplicates = duplicate_names(loaded)
    written = []
    for module_name in modules:
        if module_name not in loaded:
            continue
        header = [f"# Generated by tools/make_goldens.py from tools/goldens/{module_name}.py: do not edit;",
                  "# change the module and regenerate. Format: tests/golden/README.md.", ""]
        body = []
        for case in loaded[module_name]:
            name = getattr(case, "name", "?")
            if (module_name, name) in duplicates:
                failures.append(f"{module_name}/{name}: the name is already used in {duplicates[(module_name, name)]}")
                continue
            try:
                body += run_case(case, module_name) + [""]
            except Exception as e:
                detail = traceback.format_exception_only(type(e), e)[-1].strip()
                failures.append(f"{module_name}/{name}: {detail}")
        path = os.path.join(out_dir, module_name + ".golden")
        with open(path, "w", encoding="utf-8") as f:
            f.write("\n".join(header + body).rstrip("\n") + "\n")
        written.append(path)
    return written


NUMBER_RE = re.compile(r"^[-+]?(\d+\.?\d*([eE][-+]?\d+)?|inf|nan)$")


def lines_match(a: str, b: str, exact: bool) -> bool:
    """Equal; or, when not `exact` (a run outside the pinned environment), equal but for float
    values within 1e-12 relative (another BLAS may round the last bit of a float64 sum differently)."""
    if a == b:
        return True
    if exact:
        return False
    ta, tb = a.split(), b.split()
    if len(ta) != len(tb):
        return False
    for x, y in zip(ta, tb):
        if x == y:
            continue
        if not (NUMBER_RE.match(x) and NUMBER_RE.match(y)):
            return False
        fx, fy = float(x), float(y)
        if not abs(fx - fy) <= 1e-12 * (1 + max(abs(fx), abs(fy))):
            return False
    return True


def op_families() -> list:
    """The TG_FAMILY names of ops.def, in order."""
    with open(OPS_DEF, encoding="utf-8") as f:
        return re.findall(r"^TG_FAMILY\((\w+)\)", f.read(), re.MULTILINE)


def check(modules: list, only: bool, exact: bool, failures: list) -> list:
    differences = []
    with tempfile.TemporaryDirectory() as tmp:
        for path in generate(modules, tmp, failures):
            name = os.path.basename(path)
            committed = os.path.join(DATA_DIR, name)
            if not os.path.exists(committed):
                differences.append(f"{name}: not in tests/golden/data")
                continue
            with open(path, encoding="utf-8") as f:
                fresh = f.read().splitlines()
            with open(committed, encoding="utf-8") as f:
                old = f.read().splitlines()
            for i in range(max(len(fresh), len(old))):
                a = old[i] if i < len(old) else "<end of file>"
                b = fresh[i] if i < len(fresh) else "<end of file>"
                if not lines_match(a, b, exact):
                    differences.append(f"{name}:{i + 1}: committed {a[:80]!r}, regenerated {b[:80]!r}")
                    break
    if not only and os.path.isdir(DATA_DIR):
        for file in sorted(os.listdir(DATA_DIR)):
            stem, ext = os.path.splitext(file)
            if ext == ".golden" and stem not in modules:
                differences.append(f"{file}: no module tools/goldens/{stem}.py generates it")
        for family in op_families():
            if family not in modules:
                differences.append(f"op family {family} (ops.def) has no module tools/goldens/{family}.py")
    return differences


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", metavar="MODULE", help="one module of tools/goldens (e.g. reduce)")
    parser.add_argument("--check", action="store_true",
                        help="regenerate into a temporary directory and compare with tests/golden/data "
                             "(bit for bit; within 1e-12 relative with --any-environment)")
    parser.add_argument("--any-environment", action="store_true",
                        help="run even where the pinned environment is not available (another torch, "
                             "BLAS or CPU); the files may then differ from the committed ones in last digits")
    args = parser.parse_args()

    torch.set_num_threads(1)  # one summation order for float64 reductions
    torch.use_deterministic_algorithms(True)  # refuse an op without a deterministic CPU implementation
    print("environment: " + describe_environment())
    problems = environment_problems()
    for problem in problems:
        print(("NOTE " if args.any_environment else "ERROR ") + "not the pinned environment: " + problem,
              file=sys.stderr)
    if problems and not args.any_environment:
        print("refusing to run: files written here would differ from the committed ones in last digits "
              "(pass --any-environment to run anyway)", file=sys.stderr)
        return 2
    modules = module_names()
    if args.only:
        if args.only not in modules:
            print(f"no module tools/goldens/{args.only}.py (have: {', '.join(modules)})", file=sys.stderr)
            return 2
        modules = [args.only]

    failures = []
    if args.check:
        differences = check(modules, bool(args.only), not problems, failures)
        for d in differences:
            print("DIFFERS " + d)
    else:
        os.makedirs(DATA_DIR, exist_ok=True)
        for path in generate(modules, DATA_DIR, failures):
            print("wrote " + os.path.relpath(path, REPO_DIR))
        differences = []
    for f in failures:
        print("FAILED " + f)
    if failures or differences:
        return 1
    if args.check:
        print("golden files are up to date (" + ", ".join(modules) + ")")
    return 0


if __name__ == "__main__":
    sys.exit(main())
