"""The bug zoo: planted bugs (test-only switches of the node) that every layer of the suite must
catch — the proof that the checkers can fail.

Where each part lives:
- the switches: node/bugs.py (the registry: names, tickets, layers) and `# BUG ZOO: <name>`
  branches in the node's cores — the node's own, read by the suite through node.admin.bug_names;
- plans.py: per bug, the workload, nemesis and config that expose it end to end;
- recipes.py: targeted nemesis schedules (the rare interleavings a plan may name);
- hunt.py: the end-to-end hunt (`kraftlab zoo`): attempts with new seeds until a checker finds
  the bug, and the clean control run;
- cluster_sim.py: the controller and broker bugs on the whole-cluster simulator (node/sim/kraft.py)
  judged by the real checkers; the Raft bugs' simulator scenarios are node/sim/zoo.py (the
  simulator beside the Raft core it drives).
"""

from __future__ import annotations

from kraftlab.zoo.hunt import (
    Attempt,
    BugResult,
    ZooReport,
    ZooRunner,
    attempt_line,
    control_run,
    failed_checkers,
    hunt,
    real_runner,
    run_zoo,
    select,
)
from kraftlab.zoo.plans import CONTROL, PLANS, Plan, missing_plans, targeted_plans

__all__ = ["CONTROL", "PLANS", "Attempt", "BugResult", "Plan", "ZooReport", "ZooRunner", "attempt_line",
           "control_run", "failed_checkers", "hunt", "missing_plans", "real_runner", "run_zoo", "select",
           "targeted_plans"]
