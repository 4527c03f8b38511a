"""Benchmark: a long run (the soak) — `kraftlab test --workload mixed --nemesis all` for an hour
by default — and whether it stays healthy: the verdict, every fault window healed, and the runner's
and each node's resident memory flat (the median of the last tenth of the run against the median
of the second tenth: the first tenth is start-up and warm-up).

The runner's memory is sampled from /proc every `--sample` seconds while it runs (up to the history's
last write: the check that follows is not the run); the nodes' from their own
`process_resident_memory_bytes` in the run's metrics.jsonl (scraped by the runner).

    .venv/bin/python bench/bench_soak.py [--minutes 60] [--seed 1] [--store store] [--sample 15]
    .venv/bin/python bench/bench_soak.py --run RUN_DIR --runner-rss FILE   (re-read a finished soak)

Target (issue 15): valid; every fault healed; runner and node memory flat (last/second tenth ≤ 1.25).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FLAT = 1.25


def _rss_of_tree(pid: int) -> int:
    """Resident bytes of a process and its descendants (the runner forks checker workers)."""
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        try:
            total += int(Path(f"/proc/{p}/statm").read_text().split()[1]) * 4096
            todo += [int(c) for t in Path(f"/proc/{p}/task").iterdir()
                     for c in (t / "children").read_text().split()]
        except (OSError, ValueError):
            continue
    return total


def _tenths(samples: list[tuple[float, float]]) -> tuple[float, float] | None:
    """Medians of the second and the last tenth of (time, value) samples, by time."""
    if len(samples) < 10:
        return None
    t0, t1 = samples[0][0], samples[-1][0]
    span = (t1 - t0) or 1.0
    second = [v for t, v in samples if 0.1 <= (t - t0) / span < 0.2]
    last = [v for t, v in samples if (t - t0) / span >= 0.9]
    if not second or not last:
        return None
    return statistics.median(second), statistics.median(last)


def node_rss(run: Path) -> dict[str, list[tuple[float, float]]]:
    out: dict[str, list[tuple[float, float]]] = defaultdict(list)
    path = run / "metrics.jsonl"
    if path.is_file():
        for line in path.read_text().splitlines():
            try:
                s = json.loads(line)
            except ValueError:
                continue
            v = (s.get("metrics") or {}).get("process_resident_memory_bytes")
            if isinstance(v, int | float):
                out[str(s.get("node"))].append((float(s.get("time") or 0), float(v)))
    return out


def healed(run: Path) -> tuple[int, int]:
    """(fault windows opened, openers never followed by a successful closer) from the history."""
    from kraftlab.checker.history import read_jsonl
    from kraftlab.nemesis.packages import WINDOWS

    openers = dict(WINDOWS)
    opened, pending = 0, []
    for e in read_jsonl(run / "history.jsonl").events:
        if e.process != "nemesis" or e.type == "invoke":
            continue
        if e.f in openers and e.type != "fail":
            opened += 1
            pending.append(e.f)
        elif e.type == "ok":
            pending = [f for f in pending if openers[f] != e.f]
    return opened, len(pending)


def run_phase(run: Path, runner: list[tuple[float, float]], started: float) -> list[tuple[float, float]]:
    """The runner's samples up to the history's last write (the end of the run and its final reads):
    the check that follows loads the whole history and runs the checkers in child processes, which
    is not the runner's memory over a long run."""
    try:
        end = (run / "history.jsonl").stat().st_mtime - started
    except OSError:
        return runner
    return [(t, v) for t, v in runner if t <= end]


def report(run: Path, runner: list[tuple[float, float]], code: int) -> int:
    results = json.loads((run / "results.json").read_text())
    opened, open_at_end = healed(run)
    print(f"run: {run}")
    from kraftlab.report import run_shape

    print(f"cluster: {run_shape(json.loads((run / 'test.json').read_text())) or 'as the options fixed it'}")
    print(f"verdict: {results.get('valid')} (exit {code}); checkers: "
          + ", ".join(f"{k}={v.get('valid')}" for k, v in sorted(results.get("checkers", {}).items())))
    print(f"fault windows: {opened} opened, {open_at_end} left open at the end")
    ok = results.get("valid") is True and open_at_end == 0
    print(f"{'process':10} {'2nd tenth MB':>13} {'last tenth MB':>14} {'ratio':>6}")
    for name, samples in [("runner", runner), *sorted(node_rss(run).items())]:
        t = _tenths(samples)
        if t is None:
            print(f"{name:10} {'(too few samples)':>35}")
            continue
        ratio = t[1] / t[0] if t[0] else float("inf")
        ok &= ratio <= FLAT
        print(f"{name:10} {t[0] / 1e6:13.1f} {t[1] / 1e6:14.1f} {ratio:6.2f}")
    if cov := results.get("coverage"):
        from kraftlab.checker.coverage import headline

        print("coverage: " + ", ".join(f"{k} {v}" for k, v in headline(cov).items()))
    print(f"soak: {'PASS' if ok else 'FAIL'} (valid, every fault healed, memory ratio ≤ {FLAT})")
    return 0 if ok else 1


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minutes", type=float, default=60.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--store", type=Path, default=ROOT / "store")
    ap.add_argument("--sample", type=float, default=15.0, help="seconds between runner memory samples")
    ap.add_argument("--run", type=Path, help="a finished soak's run directory: report only")
    ap.add_argument("--runner-rss", type=Path, help="with --run: the runner samples a soak wrote")
    args = ap.parse_args()
    if args.run:
        saved = json.loads(args.runner_rss.read_text()) if args.runner_rss else {"samples": []}
        if isinstance(saved, list):  # older files: samples only, the run directory's name is its start
            saved = {"samples": saved, "started": time.mktime(time.strptime(args.run.name[:15], "%Y%m%dT%H%M%S"))}
        samples = [(float(t), float(v)) for t, v in saved["samples"]]
        return report(args.run, run_phase(args.run, samples, float(saved.get("started") or 0)), -1)
    cmd = [str(Path(sys.executable).parent / "kraftlab"), "test", "--workload", "mixed", "--nemesis", "all",
           "--time-limit", str(int(args.minutes * 60)), "--seed", str(args.seed), "--store", str(args.store)]
    print("$ " + " ".join(cmd), flush=True)
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    runner: list[tuple[float, float]] = []
    t0, started = time.monotonic(), time.time()
    while proc.poll() is None:
        runner.append((time.monotonic() - t0, float(_rss_of_tree(proc.pid))))
        time.sleep(args.sample)
    err = proc.stderr.read() if proc.stderr else ""
    run = (args.store / "latest").resolve()
    (run / "soak-runner-rss.json").write_text(json.dumps({"started": started, "samples": runner}))
    if not (run / "results.json").is_file():
        print(f"no results.json in {run}; runner stderr:\n{err[-3000:]}")
        return 2
    return report(run, run_phase(run, runner, started), proc.returncode)


if __name__ == "__main__":
    sys.exit(main())
