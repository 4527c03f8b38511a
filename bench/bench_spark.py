"""Spark path vs one process on generated kv histories (valid: both must check every key).

For each size (default 1M ops; `--sizes 1000000,10000000`) over `--keys` keys (10,000), the
same history is checked:
- by one process, the anchor: the single-process path of `kraftlab analyze` on the same input
  (read the history, keep the judged client events, pair them, race the keys' searches with
  `checker.linearizable.check_linearizable`: the race forks a worker per core);
- on Spark (`--master`, default local[2]): convert to Parquet on every core, start the session,
  check every key on the executors (`spark_analysis.job.check_dataset`).
Each runs in a child process; printed: wall time per phase, the CPU seconds of the whole process tree (what a shared,
loaded machine distorts least: each process's last figure sampled from /proc every 0.5 s, so the Spark JVM and its
Python workers count; processes living less than that are missed), the range of the machine's 1-minute load average
during the run, and memory sampled as well over the child's process tree: peak RSS of the largest single
process (a Spark executor JVM or Python worker, a forked race worker), and peak total PSS (shared pages split
between the processes that share them, so forked copy-on-write pages are not counted twice). A child still
running after `--timeout` seconds is stopped and its phases so far are printed; a one-process
child is capped at `--single-max-gb` of address space per process (a MemoryError rather than
the machine's OOM killer) and goes first if the machine runs out of memory. Medians over
`--repeat` runs, then the scaling figures. Run: `nice -n 10 .venv/bin/python bench/bench_spark.py`.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PAGE = os.sysconf("SC_PAGE_SIZE")
TICKS = os.sysconf("SC_CLK_TCK")


def _tree(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as fh:
                    children.setdefault(int(fh.read().rsplit(")", 1)[1].split()[1]), []).append(int(d))
            except (OSError, IndexError, ValueError):
                continue
    todo, seen = [pid], []
    while todo:
        p = todo.pop()
        seen.append(p)
        todo += children.get(p, [])
    return seen


def _cpu(pid: int) -> float:
    """CPU seconds (user + system) of one process so far (0 if it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / TICKS
    except (OSError, IndexError, ValueError):
        return 0.0


def _mem(pid: int) -> tuple[int, int]:
    """(rss, pss) in bytes of one process (0, 0 if it is gone)."""
    rss = pss = 0
    try:
        with open(f"/proc/{pid}/smaps_rollup") as fh:
            for line in fh:
                if line.startswith("Rss:"):
                    rss = int(line.split()[1]) * 1024
                elif line.startswith("Pss:"):
                    pss = int(line.split()[1]) * 1024
    except OSError:
        pass
    return rss, pss


def _limits(max_gb: float | None) -> Any:
    """The child's set-up: it goes first if the machine runs out of memory (a shared machine), and
    a process of it larger than `max_gb` gets a MemoryError instead of the OOM killer."""

    def setup() -> None:
        with open("/proc/self/oom_score_adj", "w") as fh:
            fh.write("1000")
        if max_gb:
            lim = int(max_gb * 2**30)
            resource.setrlimit(resource.RLIMIT_AS, (lim, lim))

    return setup


def measure(cmd: list[str], timeout: float, max_gb: float | None = None) -> dict[str, Any]:
    """Run a child; its last JSON line plus wall seconds, peak single-process RSS and total PSS (MB)."""
    t0 = time.perf_counter()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                            start_new_session=True, preexec_fn=_limits(max_gb))
    peak = {"proc_rss": 0, "tree_pss": 0}
    cpu: dict[int, float] = {}  # the last CPU seconds seen of each process of the tree (the JVM, its workers too)
    loads = [os.getloadavg()[0]]
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            pids = _tree(proc.pid)
            mems = [_mem(p) for p in pids]
            peak["proc_rss"] = max(peak["proc_rss"], max((r for r, _ in mems), default=0))
            peak["tree_pss"] = max(peak["tree_pss"], sum(p for _, p in mems))
            for p in pids:
                cpu[p] = max(cpu.get(p, 0.0), _cpu(p))
            loads.append(os.getloadavg()[0])
            done.wait(0.5)

    th = threading.Thread(target=sample, daemon=True)
    th.start()
    try:
        out, err = proc.communicate(timeout=timeout)
        stopped = False
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        stopped = True
    done.set()
    th.join()
    lines = [json.loads(x) for x in out.splitlines() if x.startswith("{")]
    res: dict[str, Any] = lines[-1] if lines else {}
    if stopped:
        res["stopped_after_s"] = round(timeout)
    elif proc.returncode != 0:
        res["failed"] = f"exit {proc.returncode}: {err.strip().splitlines()[-1] if err.strip() else ''}"
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    reaped = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    res.update(wall_s=round(time.perf_counter() - t0, 1), cpu_s=round(max(reaped, sum(cpu.values())), 1),
               peak_proc_rss_mb=peak["proc_rss"] // 2**20, peak_tree_pss_mb=peak["tree_pss"] // 2**20,
               load=f"{min(loads):.1f}-{max(loads):.1f}")
    return res


def _progress(state: dict[str, Any]) -> None:
    print(json.dumps(state), flush=True)


def child_single(history: str) -> None:
    from kraftlab.checker.formats import read_history
    from kraftlab.checker.history import History, pair_ops
    from kraftlab.checker.judged import client_events
    from kraftlab.checker.linearizable import check_linearizable
    from kraftlab.checker.models import build_model

    state: dict[str, Any] = {}
    t0 = time.perf_counter()
    h = read_history(history)
    ops = pair_ops(History(list(client_events(h.events)), h.source, h.format))
    del h
    state["read_pair_s"] = round(time.perf_counter() - t0, 1)
    _progress(state)
    t1 = time.perf_counter()
    r = check_linearizable(ops, build_model("kv"))
    state.update(valid=r["valid"], keys=r["stats"]["partitions"], check_s=round(time.perf_counter() - t1, 1))
    _progress(state)


def child_spark(history: str, master: str, work: str) -> None:
    from kraftlab.spark_analysis.convert import ModelSpec, convert
    from kraftlab.spark_analysis.job import check_dataset
    from kraftlab.spark_analysis.session import spark_session

    state: dict[str, Any] = {}
    t0 = time.perf_counter()
    meta = convert(history, Path(work) / "parquet", [ModelSpec("kv")])
    state.update(convert_s=round(time.perf_counter() - t0, 1), chunks=meta["chunks"])
    _progress(state)
    t1 = time.perf_counter()
    spark = spark_session(master, Path(work) / "logs")
    state["session_s"] = round(time.perf_counter() - t1, 1)
    _progress(state)
    t2 = time.perf_counter()
    r = check_dataset(spark, Path(work) / "parquet")["linearizable-kv"]
    state.update(valid=r["valid"], keys=r["stats"]["partitions"], check_s=round(time.perf_counter() - t2, 1))
    _progress(state)
    spark.stop()


def _median(runs: list[dict[str, Any]]) -> dict[str, Any]:
    keys = [k for k, v in runs[0].items() if isinstance(v, int | float) and not isinstance(v, bool)]
    return {**runs[0], **{k: statistics.median(r[k] for r in runs if k in r) for k in keys}}


def _finished(r: dict[str, Any]) -> bool:
    return "valid" in r and "stopped_after_s" not in r and "failed" not in r


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="1000000")
    p.add_argument("--keys", type=int, default=10_000)
    p.add_argument("--master", default="local[2]")
    p.add_argument("--repeat", type=int, default=1)
    p.add_argument("--timeout", type=float, default=2400.0, help="seconds before a child is stopped")
    p.add_argument("--only", choices=["single", "spark"], default=None)
    p.add_argument("--single-max-gb", type=float, default=16.0,
                   help="address-space cap of each one-process child (a MemoryError, not the OOM killer)")
    p.add_argument("--dir", default=None, help="where histories are generated (kept between runs)")
    p.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        kind, *rest = args.child
        child_single(*rest) if kind == "single" else child_spark(*rest)
        return 0
    from kraftlab.spark_analysis.synth import generate

    base = Path(args.dir or tempfile.mkdtemp(prefix="bench-spark-"))
    base.mkdir(parents=True, exist_ok=True)
    print(f"machine: {os.cpu_count()} cpus, load {os.getloadavg()[0]:.1f}; master {args.master}; keys {args.keys}")
    kinds = [args.only] if args.only else ["single", "spark"]
    table: dict[int, dict[str, dict[str, Any]]] = {}
    for size in (int(s) for s in args.sizes.split(",")):
        h = base / f"kv-{size}-{args.keys}.jsonl"
        if not h.is_file():
            t0 = time.perf_counter()
            generate(h, size, keys=args.keys, seed=size)
            print(f"{size:>10} ops: generated in {time.perf_counter() - t0:.1f} s ({h.stat().st_size // 2**20} MB)")
        me = [sys.executable, str(Path(__file__).resolve()), "--child"]
        for kind in kinds:
            runs = []
            for _ in range(args.repeat):
                if kind == "single":
                    runs.append(measure([*me, "single", str(h)], args.timeout, args.single_max_gb))
                else:
                    with tempfile.TemporaryDirectory(dir=base) as work:
                        runs.append(measure([*me, "spark", str(h), args.master, work], args.timeout))
            med = _median(runs)
            table.setdefault(size, {})[kind] = med
            print(f"{size:>10} ops  {kind:<6} " + ", ".join(f"{k} {v}" for k, v in med.items()), flush=True)
    print("scaling (wall s; CPU s; peak largest-process RSS MB; peak total PSS MB; 1-min load average min-max):")
    for size, row in table.items():
        cells = [f"{k} {r['wall_s']:g} s{'' if _finished(r) else ' (unfinished)'}, {r.get('cpu_s', '?')} CPU s, "
                 f"{r['peak_proc_rss_mb']} MB, "
                 f"{r['peak_tree_pss_mb']} MB, load {r.get('load')}" for k, r in row.items()]
        ratio = ""
        if len(row) == 2 and _finished(row["spark"]):
            s, k = row["single"], row["spark"]
            ratio = f"; one process / Spark wall: {s['wall_s'] / k['wall_s']:.2f}" + (
                "" if _finished(s) else " (one process unfinished: a lower bound)")
        print(f"{size:>10} ops: " + " | ".join(cells) + ratio)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
