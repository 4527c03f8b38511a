"""Benchmark: how long each nemesis op takes on a five-namespace lab (median of N runs, ms).

The target is ≤ 50 ms to apply and ≤ 50 ms to heal a partition across five hosts. Needs root.
Run: .venv/bin/python bench/bench_nemesis.py [--runs 20]
"""

from __future__ import annotations

import argparse
import os
import secrets
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from typing import TypeVar

from kraftlab.control.labs import clean, lab_up
from kraftlab.nemesis.cleanup import ledger_for
from kraftlab.nemesis.core import Nemesis
from kraftlab.nemesis.daemon_control import DaemonNodeControl

PAIRS: list[tuple[str, tuple[str, dict], tuple[str, dict]]] = [
    ("partition halves", ("start-partition", {"topology": "halves"}), ("stop-partition", {})),
    ("partition majorities-ring", ("start-partition", {"topology": "majorities-ring", "seed": 1}),
     ("stop-partition", {})),
    ("loss 10% (5 hosts)", ("start-packet", {"kind": "loss", "probability": 0.1}), ("stop-packet", {})),
    ("bandwidth 1mbit (5 hosts)", ("start-packet", {"kind": "bandwidth", "rate": "1mbit"}), ("stop-packet", {})),
    ("delay (netem)", ("start-packet", {"kind": "delay", "delay_ms": 50}), ("stop-packet", {})),
    ("clock bump (1 node)", ("clock-bump", {"nodes": ["n3"], "delta_ms": 30000}), ("clock-reset", {})),
    ("clock rate (5 nodes)", ("clock-rate", {"target": "all", "rate": 1.5}), ("clock-reset", {})),
    ("pause/resume (majority)", ("pause", {"nodes": ["n1", "n2", "n3"]}), ("resume", {})),
    ("kill/restart (1 node)", ("kill", {"nodes": ["n2"]}), ("restart", {})),
]


T = TypeVar("T")


def timed(fn: Callable[[], T]) -> tuple[float, T]:
    t0 = time.perf_counter()
    out = fn()
    return (time.perf_counter() - t0) * 1000.0, out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("bench_nemesis: needs root (network namespaces)", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as state:
        os.environ["KRAFTLAB_STATE_DIR"] = state
        name = "nb" + secrets.token_hex(4)
        t0 = time.perf_counter()
        lab = lab_up(name, "netns", 5)
        print(f"lab up: {(time.perf_counter() - t0) * 1000:.0f} ms (5 namespaces); "
              f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; median of {args.runs} runs")
        try:
            control = DaemonNodeControl(lab.hosts, daemon="node", command=lambda n: "sleep 3600")
            for n in control.nodes():
                control.start(n)
            nemesis = Nemesis(lab.name, control, ledger=ledger_for(lab.name), seed=1)  # fsynced, as in a run
            print(f"{'op':32} {'apply ms':>9} {'heal ms':>9}  outcome")
            for label, (f_on, v_on), (f_off, v_off) in PAIRS:
                applies, heals, outcome = [], [], ""
                for _ in range(args.runs):
                    ms, done = timed(partial(nemesis.invoke, f_on, v_on))
                    outcome = done.type if done.error is None else f"{done.type}: {done.error[:60]}"
                    applies.append(ms)
                    heals.append(timed(partial(nemesis.invoke, f_off, v_off))[0])
                    if done.type == "fail":
                        break
                print(f"{label:32} {statistics.median(applies):9.1f} {statistics.median(heals):9.1f}  {outcome}")
            nemesis.close()
            nemesis.heal_all()
        finally:
            lab.close()
            clean(name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
