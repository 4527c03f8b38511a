"""The data-plane bench's reading of the scheduler's accounting (/proc/PID/schedstat), printed
beside the paced latency: a live process has CPU time, a pid that is gone adds nothing."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

BENCH = Path(__file__).resolve().parents[2] / "bench"


def _bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_dataplane", BENCH / "bench_dataplane.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_sched_ns_sums_live_processes_and_skips_gone_ones() -> None:
    bench = _bench()
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    on, waiting = bench.sched_ns([os.getpid()])
    assert on > 0 and waiting >= 0
    assert bench.sched_ns([gone.pid]) == (0, 0)
    both = bench.sched_ns([os.getpid(), gone.pid])
    assert both[0] >= on
