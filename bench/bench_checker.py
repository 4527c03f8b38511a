"""Benchmark: the linearizability checker on Porcupine's etcd and kv histories, beside
Porcupine's own (Go) median times on this kind of machine from the histories' manifest.

Times are medians of several runs of the check alone (files are parsed once, outside the
timing), per file and in total. The kv files are checked partitioned by key and without
partitioning (the whole map as one state); kv c50 without partitioning runs once, in a child
process, under a time and memory budget, and its peak resident memory is printed.

    .venv/bin/python bench/bench_checker.py [--runs 7] [--budget 60] [--skip-c50-whole]
    .venv/bin/python bench/bench_checker.py --run RUN_DIR [--runs 3]
    .venv/bin/python bench/bench_checker.py --registry-sim

`--registry-sim`: simulated registry histories (10 clients, 10 brokers, some crashed ops;
kraftlab/testing/registry_sim.py) checked per broker and unsplit, CPU seconds.

With `--run`, a stored run's history instead: each workload's judged part checked with its
keyed model and with the unsplit one (`registry-whole`, `topics-whole`), median wall and CPU
seconds of the search in this process (no worker processes), partitions and verdicts.

Targets (issue 7): etcd total ≤ 150 ms; kv c50 partitioned ≤ 340 ms; kv c10 unpartitioned
≤ 2 s; kv c50 unpartitioned ends (verdict or unknown) under 2 GB.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import resource
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from kraftlab.checker.formats import read_history
from kraftlab.checker.history import pair_ops
from kraftlab.checker.linear.budget import Budget, rss_bytes
from kraftlab.checker.linear.race import race
from kraftlab.checker.reference import Reference, load_manifest


def _time(ops: list[Any], ref: Reference, partitioned: bool, runs: int, budget: Budget,
          workers: int = 1) -> tuple[float, float, Any]:
    """Median wall ms and median CPU ms of this process (workers=1: the search runs here)."""
    walls, cpus = [], []
    verdict: Any = None
    for _ in range(runs):
        model = ref.build(partitioned)
        t0, c0 = time.perf_counter(), time.process_time()
        res = race(ops, model, budget, workers)
        walls.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
        verdict = res.valid
    return statistics.median(walls) * 1000, statistics.median(cpus) * 1000, verdict


def _word(v: Any) -> str:
    return {True: "Ok", False: "Illegal"}.get(v, "Unknown")


def _child(path: str, fmt: str, ref: Reference, seconds: float, rss: int, q: Any) -> None:
    ops = pair_ops(read_history(path, fmt))
    t0 = time.perf_counter()
    # the budget counts what the search adds; `rss` bounds the whole process
    res = race(ops, ref.build(False), Budget(seconds=seconds, max_rss_bytes=rss - rss_bytes()), workers=1)
    q.put((time.perf_counter() - t0, res.valid, res.reason, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss))


def bench_run(run_dir: Path, runs: int) -> int:
    """Keyed vs unsplit check of each workload of a stored run."""
    from kraftlab.checker.history import load_jsonl_tolerant
    from kraftlab.checker.judged import linearizable_part
    from kraftlab.checker.models import MODELS, build_model
    from kraftlab.checker.run import split_by_workload

    t0 = time.perf_counter()
    history, _ = load_jsonl_tolerant(run_dir / "history.jsonl")
    lin = linearizable_part(history)
    print(f"{run_dir}: {len(history.events)} events, {len(lin.events)} judged; loaded in "
          f"{time.perf_counter() - t0:.1f} s; load average {os.getloadavg()[0]:.1f}")
    for w, (name, part) in split_by_workload(lin).items():
        ops = pair_ops(part)
        for model in [name, f"{name}-whole"] if f"{name}-whole" in MODELS else [name]:
            walls, cpus = [], []
            for _ in range(runs):
                w0, c0 = time.perf_counter(), time.process_time()
                res = race(ops, build_model(model), Budget(seconds=600), workers=1)
                walls.append(time.perf_counter() - w0)
                cpus.append(time.process_time() - c0)
            print(f"  {w:10s} {model:15s} {len(ops):6d} ops  {res.partitions:3d} partitions  {_word(res.valid):8s} "
                  f"wall {statistics.median(walls):7.2f} s  cpu {statistics.median(cpus):7.2f} s")
    return 0


def bench_registry_sim(budget: float) -> int:
    from kraftlab.checker.models import build_model
    from kraftlab.testing.registry_sim import RegistrySim

    for n, crash in ((2000, 0.0), (2000, 0.05), (4000, 0.05)):
        ops = pair_ops(RegistrySim(7, None, brokers=10, processes=10, ops=n, crash_rate=crash).run())
        for m in ("registry", "registry-whole"):
            c0, w0 = time.process_time(), time.perf_counter()
            r = race(ops, build_model(m), Budget(seconds=budget), workers=1)
            print(f"  {n} ops, crash rate {crash}: {m:15s} {_word(r.valid):8s} {r.partitions:2d} partitions  "
                  f"wall {time.perf_counter() - w0:6.2f} s  cpu {time.process_time() - c0:6.2f} s  {r.reason[:70]}")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--budget", type=float, default=60.0, help="seconds for kv c50 without partitioning")
    ap.add_argument("--skip-c50-whole", action="store_true")
    ap.add_argument("--run", type=Path, help="a stored run directory: its workloads keyed vs unsplit")
    ap.add_argument("--registry-sim", action="store_true", help="simulated registry histories, keyed vs unsplit")
    args = ap.parse_args()
    if args.run:
        return bench_run(args.run, args.runs)
    if args.registry_sim:
        return bench_registry_sim(args.budget)
    refs = load_manifest()
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs (wall times suffer under load; "
          "cpu = this process's CPU time)")
    budget = Budget(seconds=120)
    mismatches = 0

    print("== Porcupine etcd logs (cas-register), ms: this checker, median wall (cpu) vs Porcupine (Go) ==")
    total = total_cpu = total_go = 0.0
    for ref in [r for r in refs if r.format == "jepsen-etcd-log"]:
        ops = pair_ops(read_history(ref.path, ref.reader_format))
        ms, cpu, v = _time(ops, ref, True, args.runs, budget)
        go = ref.porcupine_ms.get("etcd", float("nan"))
        total, total_cpu, total_go = total + ms, total_cpu + cpu, total_go + go
        mismatches += v is not ref.expected
        print(f"  {ref.path.name:14s} {len(ops):5d} ops  {_word(v):8s} {ms:9.3f} (cpu {cpu:9.3f})   go {go:9.3f}")
    print(f"  etcd TOTAL ({sum(r.format == 'jepsen-etcd-log' for r in refs)} files): {total:.1f} ms "
          f"(cpu {total_cpu:.1f} ms)   go {total_go:.1f} ms   target ≤ 150 ms")

    print("== Porcupine kv histories, ms: partitioned by key | without partitioning ==")
    kv = [r for r in refs if r.model == "kv"]
    for ref in kv:
        ops = pair_ops(read_history(ref.path, ref.reader_format))
        ms, cpu, v = _time(ops, ref, True, args.runs, budget)
        mismatches += v is not ref.expected
        line = (f"  {ref.path.name:12s} {len(ops):5d} ops  partitioned {_word(v):8s} {ms:9.2f} (cpu {cpu:8.2f})"
                f"  (go {ref.porcupine_ms.get('kv-partitioned', float('nan')):.2f})")
        if ref.n_ops >= 1000:
            ms2, _, v2 = _time(ops, ref, True, args.runs, budget, workers=2)
            mismatches += v2 is not ref.expected
            line += f" | 2 worker processes {ms2:9.2f}"
        else:
            ms2, cpu2, v2 = _time(ops, ref, False, max(1, args.runs // 2), budget)
            mismatches += v2 is not ref.expected
            line += (f" | whole {_word(v2):8s} {ms2:9.2f} (cpu {cpu2:8.2f})"
                     f"  (go {ref.porcupine_ms.get('kv-no-partition', float('nan')):.2f})")
        print(line)
    if not args.skip_c50_whole:
        ctx = multiprocessing.get_context("fork")
        for ref in [r for r in kv if r.n_ops >= 1000]:
            q = ctx.Queue()
            p = ctx.Process(target=_child, args=(str(ref.path), ref.reader_format, ref, args.budget,
                                                 1_900_000_000, q))
            p.start()
            secs, v, reason, maxrss_kb = q.get()
            p.join()
            mismatches += v is False and ref.expected is True
            print(f"  {ref.path.name:12s} whole (budget {args.budget:g} s, 1.9 GB): {_word(v)} in {secs:.1f} s, "
                  f"peak RSS {maxrss_kb / 1024:.0f} MB  (go: {ref.porcupine_ms.get('kv-no-partition', 0):.0f} ms, "
                  f"Unknown)  {reason}")
    print(f"verdict mismatches against the manifest: {mismatches}")
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
