"""Benchmark: mutation testing of the suite itself (issue 15). How many small, plausible bugs put
into the node's Raft core, controller and broker do the simulators find?

Stage 1, the simulators. Every mutant (bench/mutation_ops.py: flipped comparisons and
conditions, `and`/`or`, arithmetic swaps, off-by-one constants and slices, swapped arguments and
fields, dropped calls, assignments and returns, negated booleans) is applied to a COPY of the
tree (one per worker, never the working tree) and run against the simulators' tests — the Raft
simulator (node/sim) and its property test, the cluster simulator with controllers and brokers,
the zoo simulator runs, the cores' unit and property tests; hypothesis derandomized — but only
against the tests that execute the mutated lines (measured once per tree by
bench/mutation_lines.py), fastest first, stopping at the first failure. A failure or a hang past
the time limit kills the mutant; a mutant on a line no test runs survives unrun ("uncovered").

Stage 2 (`--e2e`), the real run. Each survivor of stage 1 that is not argued equivalent is
installed into the lab's node processes (the copy on PYTHONPATH: namespace hosts run this
machine's interpreter and inherit it) and judged by one generic end-to-end run,
`kraftlab test --workload mixed --nemesis all --time-limit 60 --seed S`; exit 1 (invalid) or a
crash kills it, 0 leaves it alive, 2 (unknown) is recorded as unknown. `--e2e-wrapper` names a
command to prefix each run with (a machine-wide lock, `nice`, …).

It prints the mutation score per package, then every survivor with file:line, the mutation, the
diff and either the argued reason it is equivalent (bench/mutants-equivalent.toml, keyed by the
mutant's stable id, reviewed like code) or "missed". Results are cached (bench/.mutants-cache.json)
by the mutated file's hash and the mutant id, so an interrupted run resumes; a survivor is re-run
when the rest of the tree (tests, simulators) has changed since, a kill is kept.

    .venv/bin/python bench/bench_mutants.py [--packages node/raft,node/controller] [--sample 200]
        [--seed 1] [--files core.py,states.py] [--kinds compare,drop-call] [--workers 2]
        [--budget 3600] [--e2e [--e2e-wrapper CMD]] [--list] [--only ID] [--show ID] [--fresh]

Target (issue 15): at least 90% of the non-equivalent mutants of the Raft core and the controller
killed. Not part of the default test suite (it runs for hours on two cores); tests/bench holds a
seconds-long smoke test of the operators and one mutant.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import difflib
import hashlib
import json
import os
import random
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import tomllib
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from mutation_ops import Mutant, mutants_of, mutated_source, unmutated_source

from kraftlab.exits import EXIT_BAD_ARGS
from kraftlab.testing.interrupts import interrupt_on_sigterm

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"
COPIED = ("kraftlab", "node", "control", "nemesis", "workloads", "checker", "spark_analysis", "tests", "bench")
CACHE = BENCH / ".mutants-cache.json"
LINES_CACHE = BENCH / ".mutants-lines.json"
EQUIVALENT = BENCH / "mutants-equivalent.toml"
# The simulators' tests: what CI runs of them (seeded, bounded), the mutants' judges.
SIM_TESTS = ("tests/raft", "tests/membership", "tests/sim", "tests/controller", "tests/broker",
             "tests/zoo/test_sim_zoo.py", "tests/zoo/test_cluster_zoo.py", "tests/zoo/test_storage_zoo.py",
             "tests/checker/test_checker_sim_journals.py")
MARKS = "not slow and not netns and not e2e and not docker and not spark"
DEFAULT_PACKAGES = "node/raft,node/controller"
E2E_COMMAND = ("kraftlab", "test", "--workload", "mixed", "--nemesis", "all", "--time-limit", "60")
KILLED = ("killed", "timeout", "e2e-killed")
_print_lock = threading.Lock()
STOP = threading.Event()  # set on an interrupt: no new mutant starts, running ones are ended


# ----------------------------------------------------------------------------- the tree and its hashes

def _digest(paths: Iterable[Path]) -> str:
    h = hashlib.sha256()
    for p in sorted(paths):
        h.update(str(p.relative_to(ROOT)).encode())
        h.update(p.read_bytes())
    return h.hexdigest()[:16]


def _python_files(packages: Iterable[str]) -> list[Path]:
    return sorted(p for d in packages if d for p in (ROOT / d).rglob("*.py") if "__pycache__" not in p.parts)


def mutable_files(packages: Iterable[str]) -> list[Path]:
    """The files to mutate: test doubles (fake_*.py) say nothing of the node."""
    return [p for p in _python_files(packages) if not p.name.startswith("fake_")]


# The mutated files' text as it was when this run began: the workers' copies, the cache keys and
# the diffs all use it, so a checkout that changes under a running benchmark changes nothing.
SOURCES: dict[str, str] = {}


def source(file: str) -> str:
    if file not in SOURCES:
        SOURCES[file] = (ROOT / file).read_text()
    return SOURCES[file]


def file_hash(file: str) -> str:
    return hashlib.sha256(source(file).encode()).hexdigest()[:16]


def suite_hash() -> str:
    """Everything a mutant's verdict depends on besides its own file: the code the tests import."""
    return _digest([*_python_files(["node", "tests", "checker"]), ROOT / "pyproject.toml",
                    BENCH / "mutation_lines.py"])


def copy_tree(dest: Path) -> None:
    for name in COPIED:
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, dest / name, symlinks=True,
                            ignore=shutil.ignore_patterns("__pycache__", "*.pyc", ".hypothesis", ".mutants-*"))
    for f in ("pyproject.toml", "conftest.py"):
        if (ROOT / f).exists():
            shutil.copy(ROOT / f, dest / f)


def _env(tree: Path, **extra: str) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": f"{tree}{os.pathsep}{tree / 'bench'}", "PYTHONHASHSEED": "0",
            "HYPOTHESIS_PROFILE": "mutation", **extra}


def _pytest(tree: Path, tests: list[str], *extra: str) -> list[str]:
    return ["nice", "-n", "10", sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p",
            "mutation_lines", "--no-header", "-o", "addopts=", "-W", "ignore", *extra, *tests]


# ----------------------------------------------------------------------------- which tests run which lines

def _test_files(tree: Path) -> list[str]:
    """SIM_TESTS as test files (a folder stands for every test_*.py under it)."""
    files: list[str] = []
    for t in SIM_TESTS:
        path = tree / t
        if path.is_dir():
            files += sorted(str(f.relative_to(tree)) for f in path.rglob("test_*.py"))
        elif path.exists():
            files.append(t)
    return files


def shard_tests(files: list[str], durations: dict[str, float], shards: int) -> list[list[str]]:
    """The test files split into `shards` groups of about equal time (longest first, each to the
    lightest group), timed by an earlier map's per-test durations; a file never timed weighs 1 s."""
    weight = dict.fromkeys(files, 0.0)
    for nodeid, seconds in durations.items():
        f = nodeid.split("::", 1)[0]
        if f in weight:
            weight[f] += seconds
    groups: list[tuple[float, list[str]]] = [(0.0, []) for _ in range(max(1, shards))]
    for f in sorted(files, key=lambda f: (-(weight[f] or 1.0), f)):
        i = min(range(len(groups)), key=lambda i: groups[i][0])
        total, members = groups[i]
        groups[i] = (total + (weight[f] or 1.0), [*members, f])
    return [sorted(members) for _, members in groups if members]


def merge_line_maps(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """One map from the shards' maps: every test's duration, and per line the union of its tests."""
    tests: dict[str, float] = {}
    lines: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for part in parts:
        tests.update(part["tests"])
        for f, per in part["lines"].items():
            for n, ids in per.items():
                lines[f][n].update(ids)
    return {"tests": tests, "lines": {f: {n: sorted(ids) for n, ids in sorted(per.items(), key=lambda kv: int(kv[0]))}
                                      for f, per in sorted(lines.items())}}


def line_map(packages: list[str], shards: int = 1) -> dict[str, Any]:
    """{"tests": {nodeid: seconds}, "lines": {file: {line: [nodeids]}}} for the current tree (cached).
    Measured in `shards` pytest processes at once (one per worker), each tracing its share of the
    test files; a map measured for more packages serves fewer."""
    suite = f"{suite_hash()}:{','.join(SIM_TESTS)}"
    previous: dict[str, Any] = {}
    with contextlib.suppress(OSError, ValueError):
        previous = json.loads(LINES_CACHE.read_text())
    measured = previous.get("packages", [])
    if previous.get("suite") == suite and all(any(p == q or p.startswith(q + "/") for q in measured)
                                              for p in packages):
        return previous
    print(f"measuring which simulator tests run which lines (once per tree; {shards} shard(s))…", flush=True)
    with tempfile.TemporaryDirectory(prefix="mutants-map-") as tmp:
        tree = Path(tmp)
        copy_tree(tree)
        groups = shard_tests(_test_files(tree), previous.get("tests", {}), shards)
        t0 = time.monotonic()
        runs = []
        for i, group in enumerate(groups):
            out = tree / f"lines-{i}.json"
            env = _env(tree, MUTATION_LINES_OUT=str(out), MUTATION_LINES_PACKAGES=",".join(packages))
            # No per-test timeout: line tracing makes the long property tests several times slower.
            log = open(tree / f"lines-{i}.log", "w+")  # noqa: SIM115 — closed below
            proc = subprocess.Popen(_pytest(tree, group, "-m", MARKS, "--timeout", "0"), cwd=tree, stdout=log,
                                    stderr=subprocess.STDOUT, text=True, env=env)
            runs.append((proc, log, out))
        parts = []
        for proc, log, out in runs:
            rc = proc.wait()
            log.seek(0)
            text = log.read()
            log.close()
            if rc not in (0, 5):  # 5: a shard whose tests the marks all deselect
                for other, _, _ in runs:
                    other.kill()
                sys.exit(f"the simulators' tests fail on the unmutated tree; fix that first:\n{text[-3000:]}")
            if out.exists():
                parts.append(json.loads(out.read_text()))
        data = merge_line_maps(parts)
        print(f"  {len(data['tests'])} tests, {time.monotonic() - t0:.0f} s with line tracing", flush=True)
    data["suite"], data["packages"] = suite, sorted(packages)
    LINES_CACHE.write_text(json.dumps(data))
    return data


def tests_for(m: Mutant, lines: dict[str, Any]) -> list[str]:
    """The tests to run against a mutant, fastest first; [] when no test executes its lines;
    every test when module-level code runs them (every test depends on it)."""
    per_file: dict[str, list[str]] = lines["lines"].get(m.file, {})
    durations: dict[str, float] = lines["tests"]
    chosen: set[str] = set()
    for n in range(m.line, m.end_line + 1):
        chosen.update(per_file.get(str(n), ()))
    if "<import>" in chosen or m.top_level:
        chosen = set(durations)  # code that runs at import: every test depends on it
    return sorted(chosen, key=lambda t: (durations.get(t, 0.0), t))


# ----------------------------------------------------------------------------- running mutants

class Worker:
    """One copy of the tree, reused for one mutant after another (the mutated file restored after each)."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen[str] | None = None
        self.dir = Path(tempfile.mkdtemp(prefix="mutant-"))
        copy_tree(self.dir)
        # Compiled once: a run then imports the unmutated modules from bytecode and writes none.
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(self.dir)], capture_output=True)

    def close(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)

    def _mutate(self, m: Mutant) -> str | None:
        original = source(m.file)
        text = mutated_source(original, m)
        if text == unmutated_source(original):
            return None
        target = self.dir / m.file
        for stale in target.parent.glob(f"__pycache__/{target.stem}.*.pyc"):
            stale.unlink()
        target.write_text(text)
        return original

    def _restore(self, m: Mutant) -> None:
        (self.dir / m.file).write_text(source(m.file))

    def simulate(self, m: Mutant, tests: list[str], seconds: float) -> tuple[str, str]:
        if self._mutate(m) is None:
            return "identical", "the mutation does not change the program"
        try:
            code, out = self._run(_pytest(self.dir, tests, "-x", "-p", "no:randomly"), self.dir,
                                  _env(self.dir, PYTHONDONTWRITEBYTECODE="1"), seconds)
        finally:
            self._restore(m)
        if code is None:
            return "timeout", f"the simulators did not finish in {seconds:.0f} s (a hang)"
        if code == 0:
            return "survived", ""
        lines = out.splitlines()
        failed = next((ln for ln in lines if ln.startswith(("FAILED", "ERROR"))), "") or (lines or [""])[-1]
        return "killed", failed[:300]

    def end_to_end(self, m: Mutant, seed: int, wrapper: list[str], extra: Iterable[str] = ()) -> tuple[str, str]:
        """The mutant judged by one generic run (`extra`: more `kraftlab test` arguments)."""
        if self._mutate(m) is None:
            return "identical", ""
        kraftlab = str(Path(sys.executable).parent / "kraftlab")
        cmd = [*wrapper, kraftlab, *E2E_COMMAND[1:], *extra, "--seed", str(seed)]
        try:
            code, out = self._run(cmd, ROOT, _env(self.dir), 1800.0)
        finally:
            self._restore(m)
        tail = " ".join(out.strip().splitlines()[-2:])[:300]
        if code is None:
            return "e2e-unknown", "the end-to-end run did not finish in 30 min"
        if code == 0:
            return "e2e-survived", tail
        if code == 2:
            return "e2e-unknown", tail
        return "e2e-killed", f"exit {code}: {tail}"

    def _run(self, cmd: list[str], cwd: Path, env: dict[str, str], seconds: float) -> tuple[int | None, str]:
        """(exit code or None on timeout, stdout + stderr); the whole process group ends with it."""
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                start_new_session=True)
        self.proc = proc
        try:
            out, _ = proc.communicate(timeout=seconds)
            return proc.returncode, out
        except subprocess.TimeoutExpired:
            self.kill()
            return None, proc.communicate()[0]
        finally:
            self.proc = None

    def kill(self) -> None:
        proc = self.proc
        if proc is not None and proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
                time.sleep(2)
                os.killpg(proc.pid, signal.SIGKILL)


def _budget_left(deadline: float | None) -> bool:
    return deadline is None or time.monotonic() < deadline


def _load_cache() -> dict[str, dict[str, str]]:
    try:
        return json.loads(CACHE.read_text())
    except (OSError, ValueError):
        return {}


def cache_key(m: Mutant) -> str:
    return f"{file_hash(m.file)}:{m.id}"


def _fresh(entry: dict[str, str] | None, suite: str) -> bool:
    """A cached verdict still holds: a kill always (the tests only grow stronger), a survivor only
    while the tests and simulators are unchanged."""
    return entry is not None and (entry["status"] in (*KILLED, "identical") or (
        entry.get("suite") == suite and entry["status"] != "uncovered"))  # uncovered: cheap to re-check


def run_simulators(todo: list[Mutant], lines: dict[str, Any], cache: dict[str, dict[str, str]], suite: str,
                   workers: int, deadline: float | None) -> None:
    durations: dict[str, float] = lines["tests"]
    pool_workers = [Worker() for _ in range(max(1, workers))]
    free = list(pool_workers)
    lock = threading.Lock()
    done = [0]

    def one(m: Mutant) -> None:
        if not _budget_left(deadline) or STOP.is_set():
            return
        tests = tests_for(m, lines)
        t0 = time.monotonic()
        if not tests:
            status, why = "uncovered", "no simulator test executes these lines"
        else:
            with lock:
                w = free.pop()
            try:
                limit = 60.0 + 3 * sum(durations.get(t, 1.0) for t in tests)
                status, why = w.simulate(m, tests, limit)
            finally:
                with lock:
                    free.append(w)
            if STOP.is_set():
                return  # interrupted: not a verdict
        seconds = time.monotonic() - t0
        with lock:
            cache[cache_key(m)] = {"status": status, "why": why, "seconds": f"{seconds:.1f}", "suite": suite,
                                   "tests": str(len(tests)), **{k: str(v) for k, v in asdict(m).items()}}
            CACHE.write_text(json.dumps(cache, indent=1, sort_keys=True))
            done[0] += 1
            with _print_lock:
                print(f"  [{done[0]}/{len(todo)}] {status:9s} {seconds:6.1f}s {len(tests):4d} tests  {m.where}  "
                      f"{m.kind}: {m.detail[:70]}", flush=True)

    pool = concurrent.futures.ThreadPoolExecutor(len(pool_workers))
    try:
        for fut in [pool.submit(one, m) for m in todo]:
            fut.result()
    finally:
        STOP.set()
        for w in pool_workers:
            w.kill()
        pool.shutdown(wait=True, cancel_futures=True)
        for w in pool_workers:
            w.close()
        STOP.clear()


def run_end_to_end(survivors: list[Mutant], cache: dict[str, dict[str, str]], seed: int, wrapper: list[str],
                   deadline: float | None) -> None:
    w = Worker()
    try:
        for m in survivors:
            entry = cache[cache_key(m)]
            if entry.get("e2e") or not _budget_left(deadline):
                continue
            t0 = time.monotonic()
            status, why = w.end_to_end(m, seed, wrapper)
            entry.update({"e2e": status, "e2e_why": why, "e2e_seconds": f"{time.monotonic() - t0:.0f}"})
            if status == "e2e-killed":
                entry["status"] = status
            CACHE.write_text(json.dumps(cache, indent=1, sort_keys=True))
            print(f"  e2e {status:12s} {m.where}  {m.kind}: {m.detail[:60]}  {why[:100]}", flush=True)
    finally:
        w.kill()
        w.close()


# ----------------------------------------------------------------------------- the report

def _reasons(table_name: str) -> dict[str, str]:
    if not EQUIVALENT.is_file():
        return {}
    table = tomllib.loads(EQUIVALENT.read_text()).get(table_name, {})
    return {k: str(v) for k, v in table.items()}


def equivalent_reasons() -> dict[str, str]:
    """[equivalent]: mutant id → why no run could tell it from the node (left out of the score)."""
    return _reasons("equivalent")


def missed_notes() -> dict[str, str]:
    """[missed]: mutant id → what kind of bug it is and what would find it (still counted as missed)."""
    return _reasons("missed")


def diff_of(m: Mutant) -> str:
    original = unmutated_source(source(m.file)).splitlines()
    mutated = mutated_source(source(m.file), m).splitlines()
    lines = [ln for ln in difflib.unified_diff(original, mutated, lineterm="", n=0) if not ln.startswith(
        ("---", "+++", "@@"))]
    return "\n".join(lines[:6])


def _package(file: str) -> str:
    return "/".join(file.split("/")[:2])


def report(chosen: list[Mutant], cache: dict[str, dict[str, str]], *, diffs: bool = True) -> dict[str, object]:
    """Print the score per package and the survivors; return the figures (for docs and tests)."""
    equivalent = equivalent_reasons()
    notes = missed_notes()
    rows = [(m, cache[k]) for m in chosen if (k := cache_key(m)) in cache]
    table: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for m, r in rows:
        status = r["status"]
        if status in ("survived", "uncovered") and m.id in equivalent:
            status = "equivalent"
        elif status in KILLED:
            status = "killed"
        table[_package(m.file)][status] += 1
        table["all"][status] += 1
    head = f"{'package':18} {'mutants':>7} {'killed':>7} {'survived':>8} {'uncovered':>9} {'equivalent':>10} " \
           f"{'identical':>9} {'score':>6}"
    print("\n" + head + "\n" + "-" * len(head))
    scores: dict[str, float] = {}
    for pkg in [*sorted(p for p in table if p != "all"), "all"]:
        t = table[pkg]
        killed, alive = t["killed"], t["survived"] + t["uncovered"]
        scores[pkg] = 100.0 * killed / (killed + alive) if killed + alive else 0.0
        print(f"{pkg:18} {sum(t.values()):7d} {killed:7d} {t['survived']:8d} {t['uncovered']:9d} "
              f"{t['equivalent']:10d} {t['identical']:9d} {scores[pkg]:5.1f}%")
    survivors = [(m, r) for m, r in rows if r["status"] in ("survived", "uncovered")]
    survivors.sort(key=lambda x: (x[0].id in equivalent, x[0].file, x[0].line))
    print(f"\nsurvivors ({sum(m.id not in equivalent for m, _ in survivors)} missed, "
          f"{sum(m.id in equivalent for m, _ in survivors)} argued equivalent):")
    for m, r in survivors:
        verdict = f"equivalent: {equivalent[m.id]}" if m.id in equivalent else (
            "missed (no simulator test executes it)" if r["status"] == "uncovered" else "missed")
        if m.id not in equivalent and m.id in notes:
            verdict += f": {notes[m.id]}"
        if r.get("e2e"):
            verdict += f" [end-to-end: {r['e2e'].removeprefix('e2e-')}]"
        print(f"  {m.where:34s} {m.kind:14s} {m.detail[:80]}\n      id {m.id}\n      {verdict}")
        if diffs:
            print("\n".join("        " + ln for ln in diff_of(m).splitlines()))
    print(f"\nmutation score (killed / non-equivalent): {scores.get('all', 0.0):.1f}% over "
          f"{sum(table['all'].values())} mutants (target ≥ 90% for node/raft and node/controller)")
    return {"scores": scores, "table": {k: dict(v) for k, v in table.items()}}


# ----------------------------------------------------------------------------- the command

def select(args: argparse.Namespace) -> tuple[list[Mutant], int]:
    packages = [p for p in args.packages.split(",") if p]
    files = mutable_files(packages)
    if args.files:
        wanted = [f for f in args.files.split(",") if f]
        files = [f for f in files if any(str(f.relative_to(ROOT)).endswith(w) for w in wanted)]
    kinds = set(args.kinds.split(",")) if args.kinds else None
    everything = [m for f in files for m in mutants_of(source(str(f.relative_to(ROOT))), str(f.relative_to(ROOT)))
                  if any(o in m.id for o in args.only.split(",")) and (kinds is None or m.kind in kinds)]
    chosen = everything if args.sample <= 0 else random.Random(args.seed).sample(
        everything, min(args.sample, len(everything)))
    return sorted(chosen, key=lambda m: (m.file, m.line, m.id)), len(everything)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--packages", default=DEFAULT_PACKAGES, help="comma-separated folders whose .py files to mutate")
    ap.add_argument("--files", default="", help="only files whose path ends with one of these (comma-separated)")
    ap.add_argument("--kinds", default="", help="only these operators (comma-separated; see bench/mutation_ops.py)")
    ap.add_argument("--only", default="", help="only mutants whose id contains one of these (comma-separated)")
    ap.add_argument("--sample", type=int, default=200, help="mutants to draw with --seed (0: all of them)")
    ap.add_argument("--seed", type=int, default=1, help="draws the sample; also the end-to-end run's seed")
    ap.add_argument("--workers", type=int, default=2, help="mutants run at once (each a copy of the tree)")
    ap.add_argument("--budget", type=float, default=0.0, help="seconds after which no new mutant starts (0: none)")
    ap.add_argument("--e2e", action="store_true", help="judge the simulators' survivors by one generic real run")
    ap.add_argument("--e2e-wrapper", default="", help="a command to prefix each end-to-end run with")
    ap.add_argument("--fresh", action="store_true", help="forget cached results of the chosen mutants")
    ap.add_argument("--list", action="store_true", help="only count the mutants per file and operator")
    ap.add_argument("--report", action="store_true", help="print the table of the cached results; run nothing")
    ap.add_argument("--show", default="", help="print the diff of the mutant with this id and stop")
    ap.add_argument("--json", default="", help="also write the figures to this file")
    args = ap.parse_args(argv)
    if args.workers < 1 or args.sample < 0 or args.budget < 0:
        ap.error("--workers ≥ 1, --sample ≥ 0 and --budget ≥ 0")

    chosen, total = select(args)
    if args.show:
        for m in chosen:
            if m.id == args.show:
                print(f"{m.where}  {m.kind}: {m.detail}\n{diff_of(m)}")
                return 0
        print(f"no mutant {args.show!r} (with --sample 0 to see them all)", file=sys.stderr)
        return EXIT_BAD_ARGS
    if args.list:
        per: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        for m in chosen:
            per[m.file][m.kind] += 1
        for f, kinds in sorted(per.items()):
            print(f"{sum(kinds.values()):5d}  {f}  " + " ".join(f"{k}={n}" for k, n in sorted(kinds.items())))
        print(f"{len(chosen):5d}  mutants chosen of {total}")
        return 0
    if not chosen:
        print("no mutants chosen", file=sys.stderr)
        return EXIT_BAD_ARGS

    if args.report:
        report(chosen, _load_cache())
        return 0
    interrupt_on_sigterm()
    deadline = time.monotonic() + args.budget if args.budget else None
    packages = sorted({_package(m.file) for m in chosen})
    suite = suite_hash()
    cache = _load_cache()
    if args.fresh:
        for m in chosen:
            cache.pop(cache_key(m), None)
    todo = [m for m in chosen if not _fresh(cache.get(cache_key(m)), suite)]
    print(f"{total} mutants under {args.packages}; {len(chosen)} chosen (--sample {args.sample} --seed "
          f"{args.seed}), {len(chosen) - len(todo)} cached, {args.workers} worker(s)", flush=True)
    t0 = time.monotonic()
    interrupted = False
    try:
        if todo:
            lines = line_map(packages, args.workers)
            run_simulators(todo, lines, cache, suite, args.workers, deadline)
        if args.e2e:
            equivalent = equivalent_reasons()
            alive = [m for m in chosen if cache.get(cache_key(m), {}).get("status") in ("survived", "uncovered")
                     and m.id not in equivalent]
            print(f"\nend-to-end stage: {len(alive)} survivor(s), one generic 60-s run each", flush=True)
            run_end_to_end(alive, cache, args.seed, shlex.split(args.e2e_wrapper), deadline)
    except KeyboardInterrupt:
        interrupted = True
        print("\ninterrupted: what finished is cached; run the same command to resume", flush=True)
    figures = report(chosen, cache)
    unrun = sum(cache_key(m) not in cache for m in chosen)
    why = "interrupted" if interrupted else "budget spent"
    print(f"({time.monotonic() - t0:.0f} s this run" + (f"; {unrun} chosen mutants not run: {why})" if unrun else ")"))
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=1))
    return 130 if interrupted else 0


if __name__ == "__main__":
    sys.exit(main())
