"""Spark path vs one process on generated kv histories with planted anomalies... or none.

For each size (default 1M ops; `--sizes 1000000,10000000`) over `--keys` keys (10,000): a
valid generated history is checked (1) by the single-process checker (read, pair, race — the
race forks one worker per core, as `kraftlab analyze` does), and (2) on Spark (`--master`,
default local[2]: convert to Parquet, start the session, check). Each runs in a child process;
printed: wall time per phase, the peak resident memory of the whole process tree (sampled
from /proc every 0.2 s) and of its largest single process (a Spark executor's JVM or Python
worker). Medians over `--repeat` runs. Run: `.venv/bin/python bench/bench_spark.py`.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
PAGE = os.sysconf("SC_PAGE_SIZE")


def _tree_rss(pid: int) -> tuple[int, int]:
    """(sum, max) RSS in bytes over `pid` and its descendants."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as fh:
                parts = fh.read().rsplit(")", 1)[1].split()
            children.setdefault(int(parts[1]), []).append(int(d))
            rss[int(d)] = int(parts[21]) * PAGE
        except (OSError, IndexError, ValueError):
            continue
    todo, seen = [pid], []
    while todo:
        p = todo.pop()
        seen.append(p)
        todo += children.get(p, [])
    sizes = [rss.get(p, 0) for p in seen]
    return sum(sizes), max(sizes, default=0)


def measure(cmd: list[str]) -> dict[str, Any]:
    """Run a child; its JSON output plus wall seconds and peak tree/single RSS (MB)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    peak = [0, 0]
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            total, single = _tree_rss(proc.pid)
            peak[0], peak[1] = max(peak[0], total), max(peak[1], single)
            done.wait(0.2)

    th = threading.Thread(target=sample, daemon=True)
    th.start()
    out, err = proc.communicate()
    done.set()
    th.join()
    if proc.returncode != 0:
        raise SystemExit(f"{cmd} failed ({proc.returncode}):\n{err[-3000:]}")
    res = json.loads(out.strip().splitlines()[-1])
    res.update(wall_s=round(time.perf_counter() - t0, 2), peak_tree_mb=peak[0] // 2**20, peak_proc_mb=peak[1] // 2**20)
    return res


def child_single(history: str) -> dict[str, Any]:
    from checker.formats import read_history
    from checker.history import pair_ops
    from checker.linear.race import race
    from checker.models import build_model

    t0 = time.perf_counter()
    ops = pair_ops(read_history(history))
    t1 = time.perf_counter()
    r = race(ops, build_model("kv"))
    return {"valid": r.valid, "read_s": round(t1 - t0, 2), "check_s": round(time.perf_counter() - t1, 2)}


def child_spark(history: str, master: str, work: str) -> dict[str, Any]:
    from spark_analysis.convert import ModelSpec, convert
    from spark_analysis.job import check_dataset
    from spark_analysis.session import spark_session

    t0 = time.perf_counter()
    convert(history, Path(work) / "parquet", [ModelSpec("kv")])
    t1 = time.perf_counter()
    spark = spark_session(master, Path(work) / "logs")
    t2 = time.perf_counter()
    r = check_dataset(spark, Path(work) / "parquet")["linearizable-kv"]
    t3 = time.perf_counter()
    spark.stop()
    return {"valid": r["valid"], "convert_s": round(t1 - t0, 2), "session_s": round(t2 - t1, 2),
            "check_s": round(t3 - t2, 2)}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="1000000")
    p.add_argument("--keys", type=int, default=10_000)
    p.add_argument("--master", default="local[2]")
    p.add_argument("--repeat", type=int, default=1)
    p.add_argument("--dir", default=None, help="where histories are generated (kept between runs)")
    p.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        kind, *rest = args.child
        print(json.dumps(child_single(*rest) if kind == "single" else child_spark(*rest)))
        return 0
    from spark_analysis.synth import generate

    base = Path(args.dir or tempfile.mkdtemp(prefix="bench-spark-"))
    base.mkdir(parents=True, exist_ok=True)
    print(f"machine: {os.cpu_count()} cpus, load {os.getloadavg()[0]:.1f}; master {args.master}; keys {args.keys}")
    for size in (int(s) for s in args.sizes.split(",")):
        h = base / f"kv-{size}-{args.keys}.jsonl"
        if not h.is_file():
            t0 = time.perf_counter()
            generate(h, size, keys=args.keys, seed=size)
            print(f"{size:>10} ops: generated in {time.perf_counter() - t0:.1f} s ({h.stat().st_size // 2**20} MB)")
        rows: dict[str, list[dict[str, Any]]] = {"single": [], "spark": []}
        for _ in range(args.repeat):
            me = [sys.executable, str(Path(__file__).resolve()), "--child"]
            rows["single"].append(measure([*me, "single", str(h)]))
            with tempfile.TemporaryDirectory(dir=base) as work:
                rows["spark"].append(measure([*me, "spark", str(h), args.master, work]))
        for kind, runs in rows.items():
            med = {k: statistics.median(r[k] for r in runs) for k in runs[0] if isinstance(runs[0][k], int | float)
                   and not isinstance(runs[0][k], bool)}
            detail = ", ".join(f"{k} {v:g}" for k, v in med.items())
            print(f"{size:>10} ops  {kind:<6} valid={runs[0]['valid']}  {detail}")
        ratio = statistics.median(r["wall_s"] for r in rows["single"]) / statistics.median(
            r["wall_s"] for r in rows["spark"])
        print(f"{size:>10} ops  speed-up of Spark over one process: {ratio:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
