"""How often the Raft simulator reaches log divergence: over seeds 1..N (default 20), how many runs
see a diverging truncation (KIP-595's DivergingEpoch cutting a follower's tail), and how many see
one whose last epoch the leader's log never held, with and without the `flapping` fault (Jepsen's
flapping partition with the lab's shapes: random halves, bridge, majorities ring, leader isolated).

    .venv/bin/python bench/bench_sim_divergence.py [--seeds 20] [--voters 3 5]

Each run: one observer, faults `partition,crash` (+ `flapping`), 8 s of faults then settling,
every invariant checked after every event (a violation stops the bench with its replay command);
with the simulator's default snapshots (every 25 records) and no log kept behind them
(`metadata.max.retention.bytes=0`: a leader's log start soon passes a lagging follower's
divergence, which a snapshot fetch then replaces), with a few KiB of log kept behind them (the
simulator's "small" retention draw: a follower that comes back within the kept log is cut by a
truncation), and without snapshots (every divergence is cut by a truncation).
"""

from __future__ import annotations

import argparse
import statistics
import time

from kraftlab.node.sim.cluster import SimParams, run
from kraftlab.node.sim.retention import SMALL_BYTES

# (snapshot every N records, metadata.max.retention.bytes, label)
SNAPSHOTS = ((25, 0, "25, no log kept"), (25, SMALL_BYTES, f"25, {SMALL_BYTES // 1024} KiB kept"), (0, 0, "none"))
PROFILES = {"partition,crash": ("crash", "partition"), "partition,crash,flapping": ("crash", "flapping", "partition")}


def measure(
    faults: tuple[str, ...], voters: int, seeds: int, snapshot_every: int, retention_bytes: int
) -> tuple[int, int, float, float]:
    """(runs with a diverging truncation, runs with an epoch-absent one, median truncations, seconds)."""
    reached = absent = 0
    counts = []
    t0 = time.perf_counter()
    for seed in range(1, seeds + 1):
        params = SimParams(seed=seed, voters=voters, observers=1, faults=faults, journal=True,
                           snapshot_every=snapshot_every, retention_bytes=retention_bytes)
        try:
            result = run(params)
        except AssertionError as exc:
            raise SystemExit(f"invariant broken: {exc}\nreplay: {params.replay_command()}") from None
        total = sum(result.truncations.values())
        counts.append(total)
        reached += total > 0
        absent += result.truncations.get("epoch_absent", 0) > 0
    return reached, absent, statistics.median(counts), time.perf_counter() - t0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, default=20)
    p.add_argument("--voters", type=int, nargs="+", default=[3, 5])
    args = p.parse_args()
    print(f"{'voters':>6} {'snapshots':>18}  {'faults':<26} {'runs diverging':>14} {'epoch absent':>12} "
          f"{'median trunc.':>13} {'s':>6}")
    for voters in args.voters:
        for every, retention_bytes, label in SNAPSHOTS:
            for name, faults in PROFILES.items():
                reached, absent, median, secs = measure(faults, voters, args.seeds, every, retention_bytes)
                print(f"{voters:>6} {label:>18}  {name:<26} {f'{reached}/{args.seeds}':>14} "
                      f"{f'{absent}/{args.seeds}':>12} {median:>13} {secs:>6.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
