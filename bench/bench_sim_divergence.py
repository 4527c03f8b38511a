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

Then, over seeds 0..2N-1 (`--bug-seeds`), how many runs catch a leader whose Fetch validation never
answers a diverging epoch (a bug of the class the issue's held-out set had: the follower keeps its
divergent tail), with no log and with a few KiB of log kept behind the snapshots.
"""

from __future__ import annotations

import argparse
import statistics
import time

from kraftlab.node.raft.core import RaftCore
from kraftlab.node.raft.ports import OffsetAndEpoch
from kraftlab.node.sim.cluster import InvariantViolation, LivenessViolation, SimParams, run
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


class NoDivergingEpoch(RaftCore):
    """The leader's Fetch validation never answers a DivergingEpoch (a follower below its log start
    still gets the snapshot): the follower's divergent tail is kept and served as committed."""

    def _validate_fetch(self, offset: int, last_epoch: int) -> tuple[OffsetAndEpoch | None, OffsetAndEpoch | None]:
        return None, super()._validate_fetch(offset, last_epoch)[1]


def caught(seeds: int, retention_bytes: int) -> tuple[int, set[str]]:
    """(runs of seeds 0..seeds-1 in which the simulator's invariants catch NoDivergingEpoch, their names)."""
    found = 0
    names: set[str] = set()
    for seed in range(seeds):
        params = SimParams(seed=seed, voters=3, observers=1, faults=("crash", "partition"),
                           retention_bytes=retention_bytes)
        try:
            run(params, core_class=NoDivergingEpoch)
        except InvariantViolation as exc:
            found += 1
            names.add(exc.name)
        except LivenessViolation:
            found += 1
            names.add("Liveness")
    return found, names


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, default=20)
    p.add_argument("--voters", type=int, nargs="+", default=[3, 5])
    p.add_argument("--bug-seeds", type=int, default=40)
    args = p.parse_args()
    print(f"{'voters':>6} {'snapshots':>18}  {'faults':<26} {'runs diverging':>14} {'epoch absent':>12} "
          f"{'median trunc.':>13} {'s':>6}")
    for voters in args.voters:
        for every, retention_bytes, label in SNAPSHOTS:
            for name, faults in PROFILES.items():
                reached, absent, median, secs = measure(faults, voters, args.seeds, every, retention_bytes)
                print(f"{voters:>6} {label:>18}  {name:<26} {f'{reached}/{args.seeds}':>14} "
                      f"{f'{absent}/{args.seeds}':>12} {median:>13} {secs:>6.1f}")
    print("\nleader Fetch validation without DivergingEpoch (3 voters, 1 observer, partition,crash, "
          "snapshots every 25):")
    for retention_bytes, label in ((0, "no log kept"), (SMALL_BYTES, f"{SMALL_BYTES // 1024} KiB kept")):
        found, names = caught(args.bug_seeds, retention_bytes)
        print(f"  {label:>12}: caught in {found}/{args.bug_seeds} runs ({', '.join(sorted(names)) or 'none'})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
