"""The committed broker registrations, read from the `apply` lines nodes journal as they replay
committed metadata records: one view, in log order, for every fencing rule that asks what the
log (not an answer) says of a broker.

- `committed_broker_records`: the broker records (registration, registration change, fence,
  unfence, unregistration) any node applied, one per offset, in log order (every node applies the
  same record at an offset; a controller that resigned before answering may still have its record
  committed by the next leader: the log, not the answer, says what happened).
- `Registrations`: one node's committed state of each broker (epoch and fenced), folded from its own
  `apply` lines in the order it journalled them (a RegisterBrokerRecord at offset N registers epoch
  N with the `fenced` it left; fence, unfence and registration change records change a live
  registration; an unregistration ends it). `forget()` on a new process life or a snapshot load:
  nothing is known until a record says so.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kraftlab.checker.journal import Entry, Journals

BROKER_RECORDS = ("RegisterBrokerRecord", "BrokerRegistrationChangeRecord", "FenceBrokerRecord",
                  "UnfenceBrokerRecord", "UnregisterBrokerRecord")


def committed_broker_records(journals: Journals, types: tuple[str, ...] = BROKER_RECORDS) -> list[Entry]:
    """The `apply` lines of broker records of `types`, one per offset, in log order."""
    by_offset: dict[int, Entry] = {}
    for e in journals.all():
        if e.ev == "apply" and e.get("type") in types and isinstance(e.get("offset"), int):
            by_offset.setdefault(int(e["offset"]), e)
    return [by_offset[o] for o in sorted(by_offset)]


@dataclass
class Registrations:
    state: dict[Any, tuple[Any, bool]] = field(default_factory=dict)
    """broker → (broker epoch, fenced) of its live registration, as far as the applies show."""
    evidence: dict[Any, Entry] = field(default_factory=dict)
    """broker → the `apply` line that last changed its state."""

    def forget(self) -> None:
        self.state, self.evidence = {}, {}

    def apply(self, e: Entry) -> None:
        """Fold one `apply` line in (lines of other records are ignored)."""
        kind, broker, fenced = e.get("type"), e.get("broker"), e.get("fenced")
        if kind == "RegisterBrokerRecord" and isinstance(fenced, bool):
            self.state[broker] = (e.get("offset"), fenced)
        elif kind in ("FenceBrokerRecord", "UnfenceBrokerRecord") and broker in self.state:
            self.state[broker] = (self.state[broker][0], kind == "FenceBrokerRecord")
        elif kind == "BrokerRegistrationChangeRecord" and broker in self.state and isinstance(fenced, bool):
            self.state[broker] = (self.state[broker][0], fenced)
        elif kind == "UnregisterBrokerRecord":
            self.state.pop(broker, None)
        else:
            return
        self.evidence[broker] = e
