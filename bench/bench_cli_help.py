"""Benchmark: how fast `kraftlab --help` and `kraft-node --help` answer (target: ≤ 0.3 s each).

Each command runs as a fresh process, as a user types it; the figures are medians (and the
minimum) of wall-clock seconds over `--runs` runs, and the median CPU seconds (user + system, the
kernel's accounting of the finished child: what a loaded machine does not inflate), beside the
bare interpreter's start (`python -c pass`), which no command can beat: on a loaded machine
compare the difference.

    .venv/bin/python bench/bench_cli_help.py [--runs 15]
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

BIN = Path(sys.executable).parent
TARGET_S = 0.3
COMMANDS: dict[str, list[str]] = {
    "python -c pass": [sys.executable, "-c", "pass"],
    "kraftlab --help": [str(BIN / "kraftlab"), "--help"],
    "kraftlab lab --help": [str(BIN / "kraftlab"), "lab", "--help"],
    "kraft-node --help": [str(BIN / "kraft-node"), "--help"],
}


def seconds(argv: list[str]) -> tuple[float, float]:
    """(wall, cpu) seconds of one run of `argv`."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=15)
    args = ap.parse_args()
    for argv in COMMANDS.values():
        seconds(argv)  # warm the page cache
    base: float | None = None
    print(f"{'command':22} {'median s':>9} {'min s':>7} {'cpu s':>6} {'minus python':>13}  target {TARGET_S} s")
    for name, argv in COMMANDS.items():
        runs = [seconds(argv) for _ in range(args.runs)]
        times = [w for w, _ in runs]
        med = statistics.median(times)
        cpu = statistics.median(c for _, c in runs)
        base = med if base is None else base
        extra = "" if name.startswith("python") else f"{med - base:13.3f}"
        verdict = "" if name.startswith("python") else ("  ok" if med <= TARGET_S else "  OVER")
        print(f"{name:22} {med:9.3f} {min(times):7.3f} {cpu:6.3f} {extra:>13}{verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
