#!/usr/bin/env python3
"""Mutation check: applies small seeded bugs to the kernels and rules, one at a time, rebuilds, runs
the tests that should notice, and reports which mutants survive.

A mutant is an exact text replacement in one source file (scripts/mutants.py lists them, each with
the suites that should kill it). A mutant whose text no longer matches exactly once is reported as
stale, so the list cannot silently stop testing anything after a refactor.

By default the mutants are applied to a separate git worktree of HEAD (build/mutate/src) with its
own build directory (build/mutate/build): your working tree and build/release are never touched,
and only committed code is mutated. The first run builds the library and the test binaries there
(~15 minutes on 2 cores); later runs rebuild incrementally. --in-place mutates this checkout and
uses build/release instead (cheaper, but the files must have no uncommitted changes; every file is
restored on exit, Ctrl-C included).

  scripts/mutate.py                  # every mutant; report in build/mutate/report.{md,json}
  scripts/mutate.py --list           # the mutants and what should kill them
  scripts/mutate.py --only interp-max-drops-block-tail placement-greedy-ignores-lifetimes
  scripts/mutate.py --in-place --only safetensors-one-byte-overlap

Exit status: 0 when no mutant survived (stale and non-compiling ones are reported, not counted), 1
when some survived, 2 on a usage or set-up error.
"""
import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from mutants import MUTANTS, SUITES  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def run(cmd, cwd=None, timeout=None, env=None, log=None):
    """Runs cmd; returns (exit code or 'timeout', seconds). Output goes to `log` (a file object)."""
    start = time.monotonic()
    try:
        proc = subprocess.run(cmd, cwd=cwd, env=env, timeout=timeout, stdout=log or subprocess.DEVNULL,
                              stderr=subprocess.STDOUT, start_new_session=True)
        return proc.returncode, time.monotonic() - start
    except subprocess.TimeoutExpired:
        return "timeout", time.monotonic() - start


def prepare_worktree(tree: Path, build: Path, log):
    head = subprocess.check_output(["git", "-C", str(ROOT), "rev-parse", "HEAD"], text=True).strip()
    if not (tree / ".git").exists():
        tree.parent.mkdir(parents=True, exist_ok=True)
        subprocess.check_call(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(tree), head],
                              stdout=log, stderr=subprocess.STDOUT)
    else:
        subprocess.check_call(["git", "-C", str(tree), "checkout", "--quiet", "--detach", "--force", head],
                              stdout=log, stderr=subprocess.STDOUT)
    if not (build / "CMakeCache.txt").exists():
        # Werror off: a mutant may leave a variable unused, and it should still be tested.
        subprocess.check_call(["cmake", "-S", str(tree), "-B", str(build), "-DCMAKE_BUILD_TYPE=Release",
                               "-DTG_WERROR=OFF", "-DTG_BUILD_BENCH=OFF", "-DTG_BUILD_FUZZERS=OFF"],
                              stdout=log, stderr=subprocess.STDOUT)
    return head


def check_clean(files):
    dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--"] + sorted(files),
                           capture_output=True, text=True).stdout.strip()
    if dirty:
        sys.exit(f"mutate: --in-place needs these files committed first:\n{dirty}")


def suite_commands(suite_names, build: Path):
    commands = []
    for name in suite_names:
        binary, gtest_filter, timeout = SUITES[name]
        cmd = [str(build / "tests" / binary), "--gtest_brief=1", "--gtest_fail_fast"]
        if gtest_filter:
            cmd.append("--gtest_filter=" + gtest_filter)
        commands.append((name, binary, cmd, timeout))
    return commands


def test_mutant(m, tree: Path, build: Path, jobs: int, log):
    path = tree / m["file"]
    original = path.read_text()
    if original.count(m["find"]) != 1:
        return {"status": "stale", "detail": f"the text to replace occurs {original.count(m['find'])} times"}
    path.write_text(original.replace(m["find"], m["replace"]))
    try:
        commands = suite_commands(m["suites"], build)
        targets = sorted({binary for _, binary, _, _ in commands})
        code, secs = run(["cmake", "--build", str(build), "-j", str(jobs), "--target"] + targets, timeout=3600,
                         log=log)
        if code != 0:
            return {"status": "no-compile", "detail": f"build exit {code}", "build_s": round(secs)}
        env = dict(os.environ, TG_VK_VALIDATION="0")
        for name, _, cmd, timeout in commands:
            log.write(f"\n== {m['name']}: {' '.join(cmd)}\n".encode())
            log.flush()
            code, secs = run(cmd, cwd=build, timeout=timeout, env=env, log=log)
            if code != 0:
                return {"status": "killed", "by": name, "detail": f"exit {code}", "test_s": round(secs)}
        return {"status": "survived", "detail": "every suite passed"}
    finally:
        path.write_text(original)


def write_report(results, head, out: Path):
    killed = sum(r["status"] == "killed" for r in results)
    survived = [r for r in results if r["status"] == "survived"]
    scored = killed + len(survived)
    score = f"{killed}/{scored}" if scored else "0/0"
    lines = [f"# Mutation check at {head[:12]}", "", f"Killed {score} (stale and non-compiling mutants not counted).",
             "", "| mutant | class | result | by |", "|---|---|---|---|"]
    for r in results:
        lines.append(f"| {r['name']} | {r['class']} | {r['status']} | {r.get('by', r.get('detail', ''))} |")
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.md").write_text("\n".join(lines) + "\n")
    (out / "report.json").write_text(json.dumps({"head": head, "killed": killed, "scored": scored,
                                                 "results": results}, indent=2) + "\n")
    print("\n".join(lines))
    return len(survived)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", nargs="+", metavar="NAME", help="run only these mutants")
    parser.add_argument("--list", action="store_true", help="list the mutants and exit")
    parser.add_argument("--check", action="store_true",
                        help="only check that every mutant's text occurs exactly once in this checkout")
    parser.add_argument("--in-place", action="store_true", help="mutate this checkout and use build/release")
    parser.add_argument("--out", default=str(ROOT / "build" / "mutate"), help="worktree, build and report folder")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    args = parser.parse_args()

    names = [m["name"] for m in MUTANTS]
    if len(set(names)) != len(names):
        sys.exit("mutate: duplicate mutant names in scripts/mutants.py")
    if args.list:
        for m in MUTANTS:
            print(f"{m['name']:44} {m['class']:22} {m['file']}  [{', '.join(m['suites'])}]")
        return 0
    if args.check:
        stale = [m["name"] for m in MUTANTS if (ROOT / m["file"]).read_text().count(m["find"]) != 1]
        for name in stale:
            print(f"stale: {name}", file=sys.stderr)
        print(f"{len(MUTANTS) - len(stale)}/{len(MUTANTS)} mutants apply")
        return 1 if stale else 0
    selected = MUTANTS
    if args.only:
        unknown = sorted(set(args.only) - set(names))
        if unknown:
            print("mutate: unknown mutant(s): " + ", ".join(unknown), file=sys.stderr)
            return 2
        selected = [m for m in MUTANTS if m["name"] in args.only]

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "mutate.log", "wb") as log:
        if args.in_place:
            tree, build = ROOT, ROOT / "build" / "release"
            check_clean({m["file"] for m in selected})
            head = subprocess.check_output(["git", "-C", str(ROOT), "rev-parse", "HEAD"], text=True).strip()
        else:
            tree, build = out / "src", out / "build"
            head = prepare_worktree(tree, build, log)
        # Restore files on SIGTERM/SIGINT too: test_mutant's finally runs when the exception unwinds.
        signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
        results = []
        for m in selected:
            print(f"mutant {m['name']} ...", end=" ", flush=True)
            start = time.monotonic()
            r = test_mutant(m, tree, build, args.jobs, log)
            r.update(name=m["name"], **{"class": m["class"]}, seconds=round(time.monotonic() - start))
            print(f"{r['status']} ({r.get('by', r['detail'])}, {r['seconds']} s)", flush=True)
            results.append(r)
        if args.in_place:  # leave build/release's binaries built from the restored sources
            targets = sorted({SUITES[s][0] for m in selected for s in m["suites"]})
            run(["cmake", "--build", str(build), "-j", str(args.jobs), "--target"] + targets, log=log)
    return 1 if write_report(results, head, out) else 0


if __name__ == "__main__":
    sys.exit(main())
