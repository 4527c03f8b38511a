"""Benchmark: do generic runs on the disk-fault filesystem find durability bugs nobody named?

The zoo's fsync bugs are switches the node knows about; a real durability bug is one it does not
know it has — a rename into place whose directory is never fsynced, a directory created without an
fsync of its parent, a file replaced without its own fsync. Each such bug here is one mutant of the
node's storage code (bench/mutation_ops.py, by its stable id: no switch names it), installed into the
lab's node processes as the mutation bench does (a copy of the tree first on PYTHONPATH), and judged
by generic runs with the filesystem fault on:

    kraftlab test --workload mixed --nemesis all --time-limit 60 --diskfs --seed S

seed after seed until one is invalid (the bug found) or the seeds run out. It prints, per bug, the
seeds tried, the first that found it, which checkers said so, and how long that took. The correct
node under the same command is measured by plain runs (docs/diskfs.md).

    .venv/bin/python bench/bench_durability_mutants.py [--seeds 1,2,3] [--bugs NAME,...]
        [--e2e-wrapper CMD] [--store DIR] [--json FILE]

Not part of the test suite: each run takes minutes and needs the machine-wide lab slot
(`--e2e-wrapper`).
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_mutants import Worker, source
from mutation_ops import Mutant, mutants_of

from kraftlab.exits import EXIT_BAD_ARGS

BUGS: dict[str, tuple[str, str]] = {
    "rename-without-dir-fsync": (
        "node/storage/atomic.py::write_atomically::drop-call:cc49a3cb",
        "a small file (quorum-state, checkpoints, meta.properties) renamed into place, its directory never "
        "fsynced: a power loss may bring the old file back"),
    "mkdir-without-parent-fsync": (
        "node/storage/atomic.py::make_dirs_durably::drop-call:831e676b",
        "a new directory (a partition's, the metadata log's) whose parent is never fsynced: a power loss "
        "may take the directory and all it holds"),
    "replace-without-file-fsync": (
        "node/storage/atomic.py::write_atomically::drop-call:54783ffe",
        "a small file's new content renamed into place before it is fsynced: a power loss may leave it "
        "empty or torn"),
}


def find(mutant_id: str) -> Mutant:
    file = mutant_id.split("::", 1)[0]
    for m in mutants_of(source(file), file):
        if m.id == mutant_id:
            return m
    raise SystemExit(f"no mutant {mutant_id} in {file} any more: the code changed; pick its new id with "
                     f"`bench/bench_mutants.py --packages node/storage --files {Path(file).name} --sample 0 --list`")


def flagged(store: Path) -> list[str]:
    """The checkers that did not find a run in `store` valid (its newest results.json)."""
    found = sorted(store.glob("*/*/results.json"), key=lambda p: p.stat().st_mtime)
    if not found:
        return []
    results = json.loads(found[-1].read_text())
    return sorted(k for k, c in results.get("checkers", {}).items() if c.get("valid") is not True)


def judge(name: str, seeds: list[int], wrapper: list[str], store: Path) -> dict[str, Any]:
    mutant_id, what = BUGS[name]
    m = find(mutant_id)
    worker = Worker()
    tried: list[dict[str, Any]] = []
    try:
        for seed in seeds:
            run_store = store / name / str(seed)
            run_store.mkdir(parents=True, exist_ok=True)
            t0 = time.monotonic()
            status, why = worker.end_to_end(m, seed, wrapper, ["--diskfs", "--store", str(run_store)])
            tried.append({"seed": seed, "status": status, "seconds": round(time.monotonic() - t0),
                          "checkers": flagged(run_store), "why": why})
            print(f"  {name} seed {seed}: {status} {tried[-1]['checkers']} ({tried[-1]['seconds']} s)", flush=True)
            if status == "e2e-killed":
                break
    finally:
        worker.kill()
        worker.close()
    found = next((t for t in tried if t["status"] == "e2e-killed"), None)
    return {"bug": name, "mutant": mutant_id, "what": what, "tried": tried,
            "found_at_seed": found["seed"] if found else None, "checkers": found["checkers"] if found else [],
            "seconds_to_find": sum(t["seconds"] for t in tried) if found else None}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bugs", default=",".join(BUGS), help=f"comma-separated, of: {', '.join(BUGS)}")
    ap.add_argument("--seeds", default="1,2,3", help="seeds to try in order, until one finds the bug")
    ap.add_argument("--e2e-wrapper", default="", help="a command to prefix each run with (the lab slot)")
    ap.add_argument("--store", default="", help="where the runs go (default: a new temporary directory)")
    ap.add_argument("--json", default="", help="also write the figures to this file")
    args = ap.parse_args(argv)
    names = [b for b in args.bugs.split(",") if b]
    unknown = [b for b in names if b not in BUGS]
    try:
        seeds = [int(s) for s in args.seeds.split(",") if s]
    except ValueError:
        seeds = []
    if unknown or not names or not seeds:
        print(f"bugs are {', '.join(BUGS)} (not {unknown}); seeds a comma-separated list of integers",
              file=sys.stderr)
        return EXIT_BAD_ARGS
    store = Path(args.store or tempfile.mkdtemp(prefix="durability-mutants-"))
    print(f"{len(names)} durability bug(s), seeds {seeds}, runs under {store}", flush=True)
    figures = [judge(n, seeds, shlex.split(args.e2e_wrapper), store) for n in names]
    print(f"\n{'bug':28s} {'found at seed':>13s} {'runs':>5s} {'seconds':>8s}  checkers")
    for f in figures:
        at = "-" if f["found_at_seed"] is None else str(f["found_at_seed"])
        secs = "-" if f["seconds_to_find"] is None else str(f["seconds_to_find"])
        print(f"{f['bug']:28s} {at:>13s} {len(f['tried']):5d} {secs:>8s}  {', '.join(f['checkers']) or '-'}")
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
