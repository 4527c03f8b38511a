"""What every fault needs: the lab name, its nodes, the fault state, and per-node command fan-out."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import TypeVar, cast

from kraftlab.control.host import CommandResult, Host
from kraftlab.nemesis.errors import FaultError, PartialFault
from kraftlab.nemesis.fanout import Outcome, errors, fan_out
from kraftlab.nemesis.ports import NodeControl
from kraftlab.nemesis.state import FaultState

T = TypeVar("T")


ACTIVE_WAIT_S = 3.0
"""How long a fault aimed at the active controller waits for one to be known — an election in
progress takes a follower's fetch timeout and an election (`Timing.election_wait_s`; this is its
value at the node's defaults) — before it fails. Leader-aimed windows often open right after another
fault moved leadership: failing them at once lost several windows a run."""


@dataclass
class FaultContext:
    lab: str
    control: NodeControl
    state: FaultState
    sleep: Callable[[float], None] = time.sleep
    clock: Callable[[], float] = time.monotonic
    active_wait_s: float = ACTIVE_WAIT_S

    def host(self, node: str) -> Host:
        return self.control.host(node)

    def active_controller(self, wait_s: float | None = None, poll_s: float = 0.2) -> str | None:
        """The active controller, asked again every `poll_s` for up to `wait_s` (default: the
        context's `active_wait_s`) while none is known (None: still none)."""
        deadline = self.clock() + (self.active_wait_s if wait_s is None else wait_s)
        while True:
            active = self.control.active_controller()
            if active is not None or self.clock() >= deadline:
                return active
            self.sleep(poll_s)

    def address(self, node: str) -> str:
        return self.control.host(node).address

    def run_each(self, scripts: Mapping[str, str], *, timeout: float = 30.0) -> dict[str, CommandResult]:
        """Run one script per node, in parallel; raise if any failed (PartialFault when some did not)."""
        outcomes = fan_out({node: _runner(self.host(node), script, timeout) for node, script in scripts.items()})
        return check_outcomes(outcomes, {n: o.value.stdout.strip() for n, o in outcomes.items() if o.ok and o.value})

    def call_each(self, nodes: Iterable[str], action: Callable[[str], object]) -> dict[str, Outcome[object]]:
        return fan_out({node: partial(action, node) for node in nodes})


def _runner(host: Host, script: str, timeout: float) -> Callable[[], CommandResult]:
    return lambda: host.run(script, timeout=timeout, check=True)


def check_outcomes(outcomes: Mapping[str, Outcome[T]], done: object) -> dict[str, T]:
    """Nothing failed: the results. Everything failed: FaultError. Some failed: PartialFault(done)."""
    failed = errors(outcomes)
    if not failed:
        return {n: cast(T, o.value) for n, o in outcomes.items()}  # no error: each outcome holds its result
    message = "; ".join(f"{n}: {e}" for n, e in sorted(failed.items()))
    if len(failed) == len(outcomes):
        raise FaultError(message)
    raise PartialFault(done, message)
