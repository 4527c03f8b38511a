"""Building queue histories by hand for the checker's tests: sends, polls and final reads in the
suite's shape (docs/workload-ops.md, "queue"), one op after another unless opened and closed apart."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kraftlab.checker.history import Event, History

Records = dict[str, list[tuple[int, Any]]]


@dataclass
class QH:
    events: list[Event] = field(default_factory=list)

    def _ev(self, process: int, type_: str, f: str, value: Any, error: str | None = None) -> None:
        i = len(self.events)
        self.events.append(Event(i, process, type_, f, value, time=i * 1000, error=error, line=i + 1,
                                 extra={"workload": "queue"}))

    def invoke_send(self, p: int, key: str, value: Any) -> None:
        self._ev(p, "invoke", "send", {"key": key, "value": value})

    def ack_send(self, p: int, key: str, value: Any, offset: int) -> None:
        self._ev(p, "ok", "send", {"key": key, "value": value, "offset": offset})

    def send(self, p: int, key: str, value: Any, offset: int | None, status: str = "ok",
             error: str | None = None) -> QH:
        self.invoke_send(p, key, value)
        if status == "ok":
            assert offset is not None
            self.ack_send(p, key, value, offset)
        else:
            self._ev(p, status, "send", None, error or ("NOT_ENOUGH_REPLICAS" if status == "fail" else "timeout"))
        return self

    def poll(self, p: int, positions: dict[str, int], records: Records, final: bool = False,
             hws: dict[str, int] | None = None) -> QH:
        inv: dict[str, Any] = {"positions": positions}
        if final:
            inv["final"] = True
        self._ev(p, "invoke", "poll", inv)
        out: dict[str, Any] = {"records": {k: [[o, v] for o, v in rs] for k, rs in records.items()}}
        if hws is not None:
            out["high_water_marks"] = hws
        self._ev(p, "ok", "poll", out)
        return self

    def final(self, p: int, key: str, records: list[tuple[int, Any]], hw: int | None = None) -> QH:
        end = hw if hw is not None else (max((o for o, _ in records), default=-1) + 1)
        return self.poll(p, {key: 0}, {key: records}, final=True, hws={key: end})

    def history(self) -> History:
        return History(list(self.events))


def healthy(n: int = 6, key: str = "q-0") -> QH:
    """n acknowledged sends by two producers, a consumer reading them in two polls, a final read."""
    h = QH()
    for i in range(n):
        h.send(i % 2, key, i, i)
    half = n // 2
    h.poll(5, {key: 0}, {key: [(i, i) for i in range(half)]})
    h.poll(5, {key: half}, {key: [(i, i) for i in range(half, n)]})
    return h.final(9, key, [(i, i) for i in range(n)])
