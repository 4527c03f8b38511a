"""False alarms of the cluster simulator's rules over many seeds: each seed runs KraftSim (3 to 5
brokers, a lossy network on even seeds, 15 s of faults and 15 s to settle, resignations of the
active controller, the clients, the admin and token clients at drawn versions, the reader) with every in-run check,
then the final convergence check and the real runs' `metadata` and `fencing` checkers over its
journals. Prints each violation, and the counts: seeds, violations, partition records whose leader
choice was judged, runs in which a controller led again in the same process life, seconds.

    .venv/bin/python bench/bench_cluster_seeds.py --first 100 --count 100
"""

from __future__ import annotations

import argparse
import time

from kraftlab.checker.fencing import check_fencing
from kraftlab.checker.journal import journals_from
from kraftlab.checker.metadata.check import check_metadata
from kraftlab.node.sim.kraft import KraftSim, SimViolation


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--first", type=int, default=100, help="the first seed")
    ap.add_argument("--count", type=int, default=100, help="how many seeds")
    args = ap.parse_args()
    started = time.monotonic()
    violations = judged = led_again = 0
    for seed in range(args.first, args.first + args.count):
        sim = KraftSim(seed=seed, brokers=3 + seed % 3, lossy=seed % 2 == 0)
        try:
            sim.run(fault_ms=15_000, settle_ms=15_000)
            sim.check_converged()
        except SimViolation as exc:
            violations += 1
            print(f"seed {seed}: simulator: {str(exc)[:400]}", flush=True)
            continue
        judged += len(sim.leader_choice.judged)
        entries = sim.journal_dicts()
        led_again += sim.led_again()
        for name, res in (("metadata", check_metadata(journals_from(entries, "sim"))),
                          ("fencing", check_fencing(journals_from(entries, "sim"),
                                                    session_timeout_ms=sim.session_timeout_ms))):
            if not res["valid"]:
                violations += 1
                print(f"seed {seed}: {name}: {[str(a)[:300] for a in res['anomalies'][:2]]}", flush=True)
    print(f"seeds {args.first}..{args.first + args.count - 1}: {violations} violations, {judged} partition records "
          f"judged for their leader, {led_again} runs where a controller led again in one life, "
          f"{time.monotonic() - started:.0f} s")


if __name__ == "__main__":
    main()
