"""The nemesis: every fault kind behind one `invoke(f, value)`, each op recorded (invoke, then
ok | fail | info), the faults in force persisted, `status()`, and an idempotent `heal_all()`."""

from __future__ import annotations

import random
import shlex
import threading
from functools import partial
from typing import Any

from kraftlab.checker.history import Completion
from kraftlab.nemesis import netfilter, packet
from kraftlab.nemesis.context import ACTIVE_WAIT_S, FaultContext
from kraftlab.nemesis.errors import FaultError, PartialFault, Unsupported
from kraftlab.nemesis.fanout import fan_out
from kraftlab.nemesis.fault import Fault, Handler
from kraftlab.nemesis.packages import FAULT_KINDS
from kraftlab.nemesis.ports import Ledger, MemoryLedger, NodeControl, OpRecorder, null_recorder
from kraftlab.nemesis.state import FaultState


class Nemesis:
    def __init__(self, lab: str, control: NodeControl, *, recorder: OpRecorder = null_recorder,
                 ledger: Ledger | None = None, seed: int = 0, local_boot_id: str | None = None,
                 active_wait_s: float = ACTIVE_WAIT_S) -> None:
        self.lab = lab
        self.control = control
        self.recorder = recorder
        self.ctx = FaultContext(lab, control, FaultState(ledger if ledger is not None else MemoryLedger(), lab),
                                active_wait_s=active_wait_s)
        rng = random.Random(seed)
        # in heal order (nemesis.packages): wake processes, then the network, then clocks, then disks
        options = {"local_boot_id": local_boot_id}
        self.faults: list[Fault] = [
            kind.make(self.ctx, random.Random(rng.random()), **{k: options[k] for k in kind.options})
            for kind in FAULT_KINDS
        ]
        self._handlers: dict[str, Handler] = {}
        for fault in self.faults:
            self._handlers.update(fault.operations())
        self._lock = threading.RLock()

    @property
    def operations(self) -> list[str]:
        return sorted(self._handlers)

    def invoke(self, f: str, value: dict[str, Any] | None = None) -> Completion:
        """Apply one op now; never raises for a fault that could not be applied (the completion says)."""
        value = dict(value or {})
        with self._lock:
            self.recorder("invoke", f, value)
            handler = self._handlers.get(f)
            try:
                if handler is None:
                    raise FaultError(f"unknown nemesis op {f!r}; known: {', '.join(self.operations)}")
                done = Completion("ok", handler(value), f=f)
            except Unsupported as exc:
                done = Completion("fail", value, f"unsupported here: {exc}", f=f)
            except FaultError as exc:
                done = Completion("fail", value, str(exc), f=f)
            except PartialFault as exc:
                done = Completion("info", exc.value, exc.error, f=f)
            except Exception as exc:  # unknown effect: Jepsen's info
                done = Completion("info", value, f"{type(exc).__name__}: {exc}", f=f)
            self.recorder(done.type, f, done.value, error=done.error)
            return done

    def heal_all(self) -> list[Completion]:
        """Undo everything in force; safe to call any number of times and from any exit path."""
        with self._lock:
            done: list[Completion] = []
            for fault in self.faults:
                for f, value in fault.heal_ops():
                    done.append(self.invoke(f, value))
            return done

    def status(self) -> dict[str, Any]:
        """What is in force where (from the persisted state)."""
        return self.ctx.state.in_force()

    def observed(self) -> dict[str, dict[str, Any]]:
        """What the hosts themselves show now, per node: the lab's iptables rules, the root qdisc
        and the clock file (or the error reaching the host)."""
        control = self.control

        def look(node: str) -> dict[str, Any]:
            host = control.host(node)
            rules = host.run(netfilter.listing_script(self.lab), timeout=15).stdout.split("\n")
            qdisc = host.run(f"{packet.iface_script(host.address)}; tc qdisc show dev \"$IF\" root", timeout=15)
            clock = host.run(f"cat {shlex.quote(control.clock_file(node))} 2>/dev/null; true", timeout=15)
            return {"rules": [r for r in rules if r.startswith("-A ")],
                    "qdisc": qdisc.stdout.strip() or qdisc.stderr.strip(), "clock": clock.stdout.strip() or None}

        outcomes = fan_out({n: partial(look, n) for n in control.nodes()})
        return {node: (o.value if o.value is not None else {"error": o.error}) for node, o in outcomes.items()}

    def close(self) -> None:
        for fault in self.faults:
            fault.close()
