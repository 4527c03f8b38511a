"""Benchmark: mutation testing of the suite itself. Mutants of the node's Raft core, controller and
broker (an `ast`-based mutator: flipped comparisons and boolean operators, negations dropped,
`+`/`-` swapped, off-by-one integer constants, `True`/`False` swapped, dropped call statements and
augmented assignments) are run, one at a time in a copy of the source tree, against the
simulators' tests (the Raft simulator, the cluster simulator with controllers and brokers, the
zoo simulator runs, the cores' unit and property tests); a mutant is killed when any fails (or
hangs past `--timeout`). The end-to-end stage for survivors (one generic 60-s run each) is
described in docs/mutation.md.

It prints the mutation score per package and every survivor (file:line, the mutation, and the
reason recorded for it in `bench/mutants-equivalent.toml` when it is argued equivalent). Results
are cached by source hash and mutant id (`bench/.mutants-cache.json`), so a run resumes.

    .venv/bin/python bench/bench_mutants.py [--packages node/raft,node/controller] [--sample 40]
        [--seed 1] [--workers 1] [--timeout 300] [--list]

Target (issue 15): at least 90% of the non-equivalent mutants of the Raft core and the controller
killed.
"""

from __future__ import annotations

import argparse
import ast
import concurrent.futures
import hashlib
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("kraftlab", "node", "control", "nemesis", "workloads", "checker", "spark_analysis", "tests")
CACHE = ROOT / "bench" / ".mutants-cache.json"
EQUIVALENT = ROOT / "bench" / "mutants-equivalent.toml"
SIM_TESTS = ["tests/raft", "tests/sim", "tests/controller", "tests/broker", "tests/zoo/test_sim_zoo.py",
             "tests/zoo/test_cluster_zoo.py", "tests/checker/test_checker_sim_journals.py"]
MARKS = "not slow and not netns and not e2e and not docker and not spark"

COMPARE_FLIPS: dict[type, type] = {ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt,
                                   ast.Eq: ast.NotEq, ast.NotEq: ast.Eq, ast.In: ast.NotIn, ast.NotIn: ast.In,
                                   ast.Is: ast.IsNot, ast.IsNot: ast.Is}
BINOP_SWAPS: dict[type, type] = {ast.Add: ast.Sub, ast.Sub: ast.Add}


@dataclass(frozen=True)
class Mutant:
    file: str  # relative to the repository
    line: int
    col: int
    kind: str
    detail: str
    index: int  # the site's position in the file's walk (which node to change)

    @property
    def id(self) -> str:
        return f"{self.file}:{self.line}:{self.col}:{self.kind}"


def _sites(tree: ast.AST) -> Iterator[tuple[int, ast.AST, str, str]]:
    """(walk index, node, kind, detail) for every mutable site, in a stable order."""
    for i, node in enumerate(ast.walk(tree)):
        if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in COMPARE_FLIPS:
            op = type(node.ops[0])
            yield i, node, "compare", f"{op.__name__} → {COMPARE_FLIPS[op].__name__}"
        elif isinstance(node, ast.BoolOp):
            yield i, node, "boolop", "and → or" if isinstance(node.op, ast.And) else "or → and"
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            yield i, node, "not", "not x → x"
        elif isinstance(node, ast.BinOp) and type(node.op) in BINOP_SWAPS:
            yield i, node, "binop", f"{type(node.op).__name__} → {BINOP_SWAPS[type(node.op)].__name__}"
        elif isinstance(node, ast.Constant) and type(node.value) is bool:
            yield i, node, "bool", f"{node.value} → {not node.value}"
        elif isinstance(node, ast.Constant) and type(node.value) is int and -1 <= node.value <= 2:
            yield i, node, "int", f"{node.value} → {node.value + 1}"
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
            yield i, node, "drop-call", f"drop {ast.unparse(node)[:60]}"
        elif isinstance(node, ast.AugAssign):
            yield i, node, "drop-augassign", f"drop {ast.unparse(node)[:60]}"


def _is_zoo_switch(test: ast.AST) -> bool:
    """`self.bugs.on(...)` / `config.bugs.on(...)` (a test-only bug switch of the zoo) in a condition."""
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "on"
               and "bugs" in ast.unparse(n.func.value) for n in ast.walk(test))


def _in_docstring_or_annotation(tree: ast.AST) -> set[int]:
    """ids of nodes not worth mutating: annotations, logging calls, and the zoo's test-only bug code
    (`_zoo_*` functions and the branches a `bugs.on(...)` switch guards: dead in the correct node)."""
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name.startswith("_zoo_"):
            skip |= {id(n) for n in ast.walk(node)}
        if isinstance(node, ast.If) and _is_zoo_switch(node.test):
            skip |= {id(n) for stmt in node.body for n in ast.walk(stmt)} | {id(n) for n in ast.walk(node.test)}
        if isinstance(node, ast.IfExp | ast.BoolOp) and _is_zoo_switch(node):
            skip |= {id(n) for n in ast.walk(node)}
        for ann in [getattr(node, "annotation", None), getattr(node, "returns", None)]:
            if ann is not None:
                skip |= {id(n) for n in ast.walk(ann)}
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in (
                "debug", "info", "warning", "exception", "error"):
            skip |= {id(n) for n in ast.walk(node)}
    return skip


def mutants_of(path: Path) -> list[Mutant]:
    rel = str(path.relative_to(ROOT))
    tree = ast.parse(path.read_text())
    skip = _in_docstring_or_annotation(tree)
    return [Mutant(rel, node.lineno, node.col_offset, kind, detail, i)  # type: ignore[attr-defined]
            for i, node, kind, detail in _sites(tree) if id(node) not in skip and hasattr(node, "lineno")]


class _Apply(ast.NodeTransformer):
    def __init__(self, target: int) -> None:
        self.target = target
        self.order: dict[int, int] = {}  # id(node) → walk index, filled before transforming

    def visit(self, node: ast.AST) -> ast.AST:
        if self.order.get(id(node)) == self.target:
            return self._mutate(node)
        return super().visit(node)

    @staticmethod
    def _mutate(node: ast.AST) -> ast.AST:
        if isinstance(node, ast.Compare):
            node.ops = [COMPARE_FLIPS[type(node.ops[0])]()]
        elif isinstance(node, ast.BoolOp):
            node.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()
        elif isinstance(node, ast.UnaryOp):
            return node.operand
        elif isinstance(node, ast.BinOp):
            node.op = BINOP_SWAPS[type(node.op)]()
        elif isinstance(node, ast.Constant) and type(node.value) is bool:
            node.value = not node.value
        elif isinstance(node, ast.Constant):
            node.value = node.value + 1
        elif isinstance(node, ast.Expr | ast.AugAssign):
            return ast.Pass()
        return node


def mutated_source(path: Path, m: Mutant) -> str:
    tree = ast.parse(path.read_text())
    applier = _Apply(m.index)
    applier.order = {id(n): i for i, n in enumerate(ast.walk(tree))}
    return ast.unparse(ast.fix_missing_locations(applier.visit(tree)))


def _copy_tree(dest: Path) -> None:
    for name in PACKAGES:
        shutil.copytree(ROOT / name, dest / name, symlinks=True,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc", ".hypothesis"))
    for f in ("pyproject.toml", "conftest.py"):
        if (ROOT / f).exists():
            shutil.copy(ROOT / f, dest / f)


def run_mutant(m: Mutant, timeout: float) -> tuple[str, float, str]:
    """('killed' | 'survived' | 'timeout' | 'error', seconds, what failed)."""
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="mutant-") as tmp:
        tree = Path(tmp)
        _copy_tree(tree)
        try:
            (tree / m.file).write_text(mutated_source(ROOT / m.file, m))
        except (SyntaxError, ValueError) as exc:
            return "error", 0.0, f"cannot apply: {exc}"
        env = {**os.environ, "PYTHONPATH": str(tree)}  # the copy's `kraftlab` before the installed one
        cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "-m", MARKS,
               *[t for t in SIM_TESTS if (tree / t).exists()]]
        try:
            out = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return "timeout", time.monotonic() - t0, "the simulators did not finish (counted killed: a hang)"
    seconds = time.monotonic() - t0
    if out.returncode == 0:
        return "survived", seconds, ""
    failed = next((ln for ln in out.stdout.splitlines() if ln.startswith("FAILED") or ln.startswith("ERROR")), "")
    return "killed", seconds, failed[:200]


def _source_hash(file: str) -> str:
    return hashlib.sha256((ROOT / file).read_bytes()).hexdigest()[:16]


def _load(path: Path) -> dict[str, dict[str, str]]:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def _equivalent() -> dict[str, str]:
    if not EQUIVALENT.is_file():
        return {}
    return {k: str(v) for k, v in tomllib.loads(EQUIVALENT.read_text()).get("equivalent", {}).items()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--packages", default="node/raft,node/controller", help="comma-separated folders to mutate")
    ap.add_argument("--sample", type=int, default=40, help="mutants to run (0: all), drawn with --seed")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per mutant before it counts as a hang")
    ap.add_argument("--only", default="", help="run only mutants whose id contains this (e.g. states.py:128)")
    ap.add_argument("--list", action="store_true", help="only count the mutants per file")
    ap.add_argument("--report", action="store_true", help="report the cached results of the sample, run nothing")
    args = ap.parse_args()

    files = sorted(p for d in args.packages.split(",") if d for p in (ROOT / d).rglob("*.py")
                   if not p.name.startswith("fake_"))  # test doubles: their mutants say nothing of the node
    everything = [m for f in files for m in mutants_of(f) if args.only in m.id]
    if args.list:
        per = defaultdict(int)
        for m in everything:
            per[m.file] += 1
        for f, n in sorted(per.items()):
            print(f"{n:5d}  {f}")
        print(f"{len(everything):5d}  mutants in {len(files)} files")
        return 0
    chosen = everything if args.sample <= 0 else random.Random(args.seed).sample(everything, min(args.sample,
                                                                                                 len(everything)))
    cache = _load(CACHE)
    if args.report:
        return report(chosen, cache)
    todo = [m for m in chosen if f"{_source_hash(m.file)}:{m.id}" not in cache]
    print(f"{len(everything)} mutants in {len(files)} files under {args.packages}; running {len(chosen)} "
          f"({len(chosen) - len(todo)} cached), {args.workers} worker(s)", flush=True)
    with concurrent.futures.ThreadPoolExecutor(args.workers) as pool:
        futures = {pool.submit(run_mutant, m, args.timeout): m for m in todo}
        for fut in concurrent.futures.as_completed(futures):
            m = futures[fut]
            status, seconds, why = fut.result()
            cache[f"{_source_hash(m.file)}:{m.id}"] = {"status": status, "seconds": f"{seconds:.1f}", "why": why,
                                                        **{k: str(v) for k, v in asdict(m).items()}}
            CACHE.write_text(json.dumps(cache, indent=1, sort_keys=True))
            print(f"  {status:8s} {seconds:6.1f}s  {m.id}  {m.detail}", flush=True)
    return report(chosen, cache)


def report(chosen: list[Mutant], cache: dict[str, dict[str, str]]) -> int:
    equivalent = _equivalent()
    rows = [(m, cache[key]) for m in chosen if (key := f"{_source_hash(m.file)}:{m.id}") in cache]
    if len(rows) < len(chosen):
        print(f"({len(chosen) - len(rows)} of the {len(chosen)} sampled mutants not run yet: not counted)")
    by_pkg: dict[str, list[str]] = defaultdict(list)
    for m, r in rows:
        status = "equivalent" if r["status"] == "survived" and m.id in equivalent else r["status"]
        by_pkg["/".join(m.file.split("/")[:2])].append(status)
    print(f"\n{'package':18} {'mutants':>8} {'killed':>7} {'survived':>9} {'equivalent':>11} {'error':>6} {'score':>7}")
    total_killed = total_counted = 0
    for pkg, statuses in sorted(by_pkg.items()):
        killed = sum(s in ("killed", "timeout") for s in statuses)
        survived = statuses.count("survived")
        counted = killed + survived
        total_killed += killed
        total_counted += counted
        score = f"{100 * killed / counted:.0f}%" if counted else "–"
        print(f"{pkg:18} {len(statuses):8d} {killed:7d} {survived:9d} {statuses.count('equivalent'):11d} "
              f"{statuses.count('error'):6d} {score:>7}")
    overall = 100 * total_killed / total_counted if total_counted else 0.0
    print(f"{'all':18} {'':8} {total_killed:7d} {total_counted - total_killed:9d} {'':11} {'':6} {overall:6.0f}%")
    print("\nsurvivors (non-equivalent first):")
    for m, r in sorted(rows, key=lambda x: (x[0].id in equivalent, x[0].id)):
        if r["status"] == "survived":
            why = equivalent.get(m.id, "missed: no simulator test fails")
            print(f"  {m.id:60s} {m.detail[:50]:50s}  {why}")
    print(f"\nmutation score (non-equivalent, simulators): {overall:.0f}%  (target ≥ 90%)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
