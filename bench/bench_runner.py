"""Runner throughput and memory: operations per second the runner sustains against a fresh
five-node namespace lab without and with faults, and the runner's resident memory over a long
run (it must stay flat: the history is streamed to disk, not kept).

    .venv/bin/python bench/bench_runner.py                    # 60 s per condition, mixed workload
    .venv/bin/python bench/bench_runner.py --duration 600     # the 10-minute memory run
Prints one row per condition: completed ops/s (ok, fail, info), and RSS at start, at the end of the
workload phase, its maximum and its growth rate (MB/min, a least-squares slope over samples taken
every 5 s during the workload phase, after its first minute — or its second half when shorter).
The check and the report that follow a run are not part of the runner's steady state.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import threading
import time
from pathlib import Path

from kraftlab.runner import TestOptions, run_test


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def slope(samples: list[tuple[float, float]]) -> float:
    """MB per minute, least squares."""
    if len(samples) < 2:
        return 0.0
    n = len(samples)
    mx = sum(t for t, _ in samples) / n
    my = sum(m for _, m in samples) / n
    den = sum((t - mx) ** 2 for t, _ in samples) or 1.0
    return 60 * sum((t - mx) * (m - my) for t, m in samples) / den


def run(workload: str, nemesis: str, duration: float, rate: float, store: Path) -> dict[str, object]:
    samples: list[tuple[float, float]] = []
    stop = threading.Event()
    t0 = time.monotonic()

    first_op: list[float] = []  # when the workload began (the first history line)

    def sample() -> None:
        while not stop.wait(5.0):
            now = time.monotonic() - t0
            if not first_op and any(store.glob("*/*/history.jsonl")) and any(
                    p.stat().st_size for p in store.glob("*/*/history.jsonl")):
                first_op.append(now)
            if first_op and now <= first_op[0] + duration:  # the workload phase only, not the check
                samples.append((now, rss_mb()))
            elif first_op:
                # printed now: the check and the report that follow can take long on a long run
                steady_now = [(t, m) for t, m in samples if t > first_op[0] + min(60.0, duration / 2)]
                end = samples[-1][1] if samples else 0.0
                top = max((m for _, m in samples), default=0.0)
                print(f"workload phase over: rss start {start_rss:.1f} MB, end {end:.1f} MB, max {top:.1f} MB, "
                      f"growth {slope(steady_now):.2f} MB/min", flush=True)
                return  # gone before the check starts: checkers are then forked, not pickled to a forkserver

    start_rss = rss_mb()
    th = threading.Thread(target=sample, daemon=True)
    th.start()
    code, rundir = run_test(TestOptions(workload=workload, nemesis=nemesis, time_limit=duration, seed=11,
                                        rate=rate, store=store, nemesis_interval=10))
    stop.set()
    th.join()
    counts = {"ok": 0, "fail": 0, "info": 0}
    for line in rundir.history.read_text().splitlines():
        op = json.loads(line)
        if op["process"] != "nemesis" and op["type"] in counts:
            counts[op["type"]] += 1
    steady = [(t, m) for t, m in samples if t > first_op[0] + min(60.0, duration / 2)] if first_op else samples
    return {"nemesis": nemesis, "exit": code, "ops_per_s": {k: round(v / duration, 1) for k, v in counts.items()},
            "rss_start_mb": round(start_rss, 1), "rss_end_mb": round(samples[-1][1] if samples else start_rss, 1),
            "rss_max_mb": round(max((m for _, m in samples), default=start_rss), 1),
            "rss_growth_mb_per_min": round(slope(steady), 2), "run": str(rundir.path)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workload", default="mixed")
    ap.add_argument("--duration", type=float, default=60.0)
    ap.add_argument("--rate", type=float, default=50.0, help="ops/s per client process asked for")
    ap.add_argument("--nemeses", default="none;partition,kill,clock")
    args = ap.parse_args()
    rows = []
    for n in args.nemeses.split(";"):
        store = Path(tempfile.mkdtemp(prefix="bench-runner-"))  # kept: the runs are printed
        rows.append(run(args.workload, n, args.duration, args.rate, store))
    print(f"{'nemesis':<22} {'exit':>4} {'ok/s':>7} {'fail/s':>7} {'info/s':>7} {'rss0':>7} {'rss_end':>8} "
          f"{'rss_max':>8} {'MB/min':>7}")
    for r in rows:
        print(f"  {r['nemesis']}: {r['run']}")
    for r in rows:
        o = r["ops_per_s"]
        assert isinstance(o, dict)
        print(f"{r['nemesis']:<22} {r['exit']:>4} {o['ok']:>7} {o['fail']:>7} {o['info']:>7} {r['rss_start_mb']:>7} "
              f"{r['rss_end_mb']:>8} {r['rss_max_mb']:>8} {r['rss_growth_mb_per_min']:>7}")


if __name__ == "__main__":
    main()
