"""The full bug-zoo table: per bug, caught in every seed base?, by what, median time to detection.

Simulator part (default): for each bug, `--seeds` hunts starting from different seed bases
(0, 1000, 2000, …); time to detection is simulated time of the catching run plus the simulated
time of the seeds tried before it, and the wall seconds the hunt took. Then `--controls` clean
runs of every scenario, which must be caught by nothing (false alarms).
End-to-end part (`--e2e`): `kraftlab.zoo` with each seed base, `--budget` wall seconds per bug;
median wall time to detection, plus a clean control per seed base. `--bugs` limits it to some bugs.
False alarms end to end (`--e2e-controls N`): N clean runs of the zoo's control plan (mixed
workload, every fault, no bug), each must come out valid; prints each verdict and the total.

    .venv/bin/python bench/bench_zoo.py [--seeds 3] [--max-seeds 40] [--controls 10] [--e2e --budget 120]
    .venv/bin/python bench/bench_zoo.py --no-sim --e2e-controls 10 [--attempt 60]
    .venv/bin/python bench/bench_zoo.py --no-sim --recipe-controls      # each targeted schedule, no bug
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

from kraftlab.node.sim import membership_zoo
from kraftlab.node.sim.membership_zoo import MEMBERSHIP_SCENARIOS
from kraftlab.node.sim.zoo import RAFT_SCENARIOS, SimOutcome, run_once
from kraftlab.zoo import Attempt, attempt_line
from kraftlab.zoo.cluster_sim import CLUSTER_SCENARIOS, run_cluster_once


def _sim_hunt(bug: str, base: int, max_seeds: int) -> tuple[SimOutcome, int, float]:
    """(catching or last outcome, simulated ms until caught, wall seconds)."""
    sim_ms = 0
    wall = time.perf_counter()
    outcome: SimOutcome | None = None
    for seed in range(base, base + max_seeds):
        if bug in RAFT_SCENARIOS:
            outcome = run_once(bug, seed)
        elif bug in MEMBERSHIP_SCENARIOS:
            outcome = membership_zoo.run_once(bug, seed)
        else:
            outcome = run_cluster_once(bug, seed, CLUSTER_SCENARIOS[bug])
        sim_ms += outcome.sim_ms
        if outcome.caught_by is not None:
            break
    assert outcome is not None
    return outcome, sim_ms, time.perf_counter() - wall


def bench_sim(seeds: int, max_seeds: int, controls: int) -> bool:
    bugs = list(RAFT_SCENARIOS) + list(MEMBERSHIP_SCENARIOS) + list(CLUSTER_SCENARIOS)
    print(f"{'bug':28} {'caught':>7}  {'median sim s':>12}  {'median wall s':>13}  caught by")
    all_caught = True
    for bug in bugs:
        runs = [_sim_hunt(bug, 1000 * i, max_seeds) for i in range(seeds)]
        caught = [r for r in runs if r[0].caught_by is not None]
        all_caught &= len(caught) == seeds
        by = sorted({r[0].caught_by or "-" for r in caught})
        sim_s = statistics.median(r[1] for r in caught) / 1000 if caught else float("nan")
        wall_s = statistics.median(r[2] for r in caught) if caught else float("nan")
        print(f"{bug:28} {len(caught):>3}/{seeds:<3}  {sim_s:>12.1f}  {wall_s:>13.2f}  {','.join(by)}", flush=True)
    alarms = 0
    wall = time.perf_counter()
    for scenario in RAFT_SCENARIOS.values():
        alarms += sum(run_once(None, 5000 + s, scenario).caught_by is not None for s in range(controls))
    membership_scenarios = set(MEMBERSHIP_SCENARIOS.values())
    for mscenario in membership_scenarios:
        alarms += sum(membership_zoo.run_once(None, 5000 + s, mscenario).caught_by is not None for s in range(controls))
    for cscenario in CLUSTER_SCENARIOS.values():
        alarms += sum(run_cluster_once(None, 5000 + s, cscenario).caught_by is not None for s in range(controls))
    total = controls * (len(RAFT_SCENARIOS) + len(membership_scenarios) + len(CLUSTER_SCENARIOS))
    print(f"false alarms in clean runs: {alarms}/{total} ({time.perf_counter() - wall:.0f} s)")
    return all_caught and alarms == 0


def bench_e2e(seeds: int, budget: float, attempt: float | None, bugs: list[str], control: bool = True) -> bool:
    from kraftlab.runner import TestOptions
    from kraftlab.zoo import real_runner, run_zoo, select

    chosen = select(bugs, None)
    reports = [run_zoo(chosen, TestOptions(nemesis_interval=5.0), real_runner, attempt_s=attempt, budget_s=budget,
                       seed=1 + 1000 * i, control=control, on_attempt=_print_attempt) for i in range(seeds)]
    print(f"{'bug':28} {'found':>7}  {'median s to detection':>22}  found by")
    for j, bug in enumerate(chosen):
        results = [r.bugs[j] for r in reports]
        times = [t for t in (b.time_to_detection for b in results) if t is not None]
        med = f"{statistics.median(times):.0f}" if times else "-"
        by = sorted({c for b in results for c in b.found_by})
        print(f"{bug:28} {len(times):>3}/{seeds:<3}  {med:>22}  {','.join(by) or '-'}")
    if control:
        clean = sum(1 for r in reports if r.control is not None and r.control.code == 0)
        print(f"clean control runs valid: {clean}/{seeds}")
    return all(r.ok for r in reports)


def _print_attempt(bug: str, a: Attempt) -> None:
    print(f"  {attempt_line(bug, a)}", flush=True)


def bench_e2e_controls(n: int, attempt: float | None, first_seed: int) -> bool:
    """N clean control runs end to end; every one must be valid (exit 0, no checker false)."""
    from kraftlab.runner import TestOptions
    from kraftlab.zoo import control_run, real_runner

    alarms, unknown, seconds = 0, 0, []
    for i in range(n):
        a = control_run(TestOptions(nemesis_interval=5.0), real_runner, attempt_s=attempt, seed=first_seed + i)
        seconds.append(a.seconds)
        alarms += bool(a.found_by)
        unknown += a.code != 0 and not a.found_by
        print(attempt_line("control", a), flush=True)
    print(f"end-to-end false alarms: {alarms}/{n}; not valid otherwise (unknown/crashed): {unknown}/{n}; "
          f"median run {statistics.median(seconds):.0f} s")
    return alarms == 0 and unknown == 0


def bench_recipe_controls(attempt: float | None, seed: int, only: list[str]) -> bool:
    """Every targeted recipe (or those in `only`) once on the correct node (no bug): each run must be valid."""
    from kraftlab.runner import TestOptions
    from kraftlab.zoo import control_run, real_runner, targeted_plans

    alarms = 0
    chosen = {r: p for r, p in targeted_plans().items() if not only or r in only}
    for recipe, plan in chosen.items():
        a = control_run(TestOptions(), real_runner, attempt_s=attempt, seed=seed, plan=plan)
        alarms += a.code != 0
        print(f"  recipe {recipe}: {attempt_line('control', a)}", flush=True)
    print(f"targeted recipes on the correct node: {alarms} not valid of {len(chosen)}")
    return alarms == 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, default=3, help="seed bases per bug (default 3)")
    p.add_argument("--max-seeds", type=int, default=40, help="simulator: seeds tried per hunt (default 40)")
    p.add_argument("--controls", type=int, default=10, help="simulator: clean runs per scenario (default 10)")
    p.add_argument("--e2e", action="store_true", help="also run the end-to-end zoo (long: real clusters)")
    p.add_argument("--budget", type=float, default=120.0, help="end-to-end: wall seconds per bug (default 120)")
    p.add_argument("--attempt", type=float, default=None,
                   help="end-to-end: workload seconds per attempt (default: each plan's)")
    p.add_argument("--bugs", nargs="*", default=[], help="end-to-end: only these bugs (default all)")
    p.add_argument("--e2e-controls", type=int, default=0, metavar="N",
                   help="end-to-end: N clean control runs (mixed, all faults, no bug), counting false alarms")
    p.add_argument("--control-seed", type=int, default=101, help="end-to-end: seed of the first control run")
    p.add_argument("--recipe-controls", nargs="*", metavar="RECIPE", default=None,
                   help="end-to-end: every targeted recipe (or these) once without its bug (must be valid)")
    p.add_argument("--no-sim", action="store_true", help="skip the simulator table")
    p.add_argument("--no-control", action="store_true", help="end-to-end: no control run per seed base")
    args = p.parse_args()
    ok = True
    if not args.no_sim:
        ok = bench_sim(args.seeds, args.max_seeds, args.controls)
    if args.e2e:
        ok = bench_e2e(args.seeds, args.budget, args.attempt, args.bugs, control=not args.no_control) and ok
    if args.recipe_controls is not None:
        ok = bench_recipe_controls(args.attempt, args.control_seed, args.recipe_controls) and ok
    if args.e2e_controls:
        ok = bench_e2e_controls(args.e2e_controls, args.attempt, args.control_seed) and ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
