"""The history type every checker reads, and the project's JSON Lines history format.

A history is a list of `Event`s in recorded (real-time) order, with Jepsen's meaning: `invoke`
starts an operation, `ok` says it took effect, `fail` that it did not, `info` that nobody knows
(it may take effect at any later time, or never). `pair_ops` turns events into `Op`s
(invocation + completion), which is what the linearizability search works on.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

EVENT_TYPES = ("invoke", "ok", "fail", "info")


class HistoryError(ValueError):
    """Malformed input: names the file, the line and the reason."""

    def __init__(self, path: str | Path, line: int, reason: str) -> None:
        super().__init__(f"{path}:{line}: {reason}")
        self.path = str(path)
        self.line = line
        self.reason = reason


@dataclass(slots=True)
class Event:
    """One history line: an invocation or a completion."""

    index: int
    process: Any
    type: str
    f: str
    value: Any = None
    time: int | None = None
    node: str | None = None
    error: Any = None
    line: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "index": self.index,
            "time": self.time,
            "process": self.process,
            "type": self.type,
            "f": self.f,
            "value": self.value,
            "node": self.node,
            "error": self.error,
        }
        out.update(self.extra)
        return out


@dataclass(slots=True)
class Op:
    """An invocation paired with its completion (or with none: a crashed/pending op).

    `call` and `ret` are positions in the event list (real-time order); `ret` is None when the
    outcome is unknown (`info`, or no completion at all). `status` is `ok`, `fail` or `info`.
    `value` is the invocation's argument, `output` the completion's value.
    """

    id: int
    process: Any
    f: str
    value: Any
    output: Any
    status: str
    call: int
    ret: int | None
    error: Any = None
    call_time: int | None = None
    ret_time: int | None = None
    call_line: int = 0
    ret_line: int = 0

    @property
    def crashed(self) -> bool:
        return self.ret is None

    def label(self) -> str:
        """The op in a line: Kafka's words for the workload ops (docs/workload-ops.md: the request,
        the fields the models judge, what came back), a generic `f(value) -> output` otherwise."""
        st = "" if self.status == "ok" else f" [{self.status}{'' if self.error is None else ' ' + str(self.error)}]"
        words = _KAFKA_WORDS.get(self.f)
        if words is not None and isinstance(self.value, dict):
            try:
                return f"p{self.process} {words(self.value, self.output if self.status == 'ok' else None)}{st}"
            except (KeyError, TypeError, ValueError):
                pass  # not the workload's shape: the generic label
        value, output = _kv(self.value), _kv(self.output)
        out = "" if output is None or output == value else f" -> {_short(output)}"
        arg = "" if value is None else _short(value)
        return f"p{self.process} {self.f}({arg}){out}{st}"


def _alter_words(v: dict[str, Any], out: Any) -> str:
    got = ""
    if isinstance(out, dict) and "partition_epoch" in out:
        got = (f" ⇒ partition epoch {out['partition_epoch']}, leader epoch {out.get('leader_epoch')}, "
               f"ISR {out.get('isr')}")
    return (f"AlterPartition {v['topic']}-{v['partition']} by broker {v['leader']} (broker epoch {v['broker_epoch']}) "
            f"at partition epoch {v['partition_epoch']}, leader epoch {v['leader_epoch']}: ISR → {v['isr']}{got}")


def _register_words(v: dict[str, Any], out: Any) -> str:
    retry = f" (re-sent: {v['retry']})" if v.get("retry") else ""
    got = f" ⇒ broker epoch {out['epoch']}" if isinstance(out, dict) and "epoch" in out else ""
    return f"BrokerRegistration broker {v['broker']} incarnation {str(v['incarnation'])[:8]}{retry}{got}"


def _heartbeat_words(v: dict[str, Any], out: Any) -> str:
    asks = [w for w, k in (("fence", "want_fence"), ("shut down", "want_shut_down")) if v.get(k)]
    offset = v.get("offset")
    at = "" if offset is None or int(offset) >= 2**62 else f", metadata offset {offset}"
    got = ""
    if isinstance(out, dict) and "fenced" in out:
        got = f" ⇒ {'fenced' if out['fenced'] else 'unfenced'}" + (", shut down" if out.get("should_shut_down") else "")
    zombie = " (a zombie's)" if v.get("zombie") else ""
    return (f"BrokerHeartbeat broker {v['broker']} at broker epoch {v['epoch']}{at}"
            f"{' asking to ' + ' and '.join(asks) if asks else ''}{zombie}{got}")


def _topic_words(api: str) -> Callable[[dict[str, Any], Any], str]:
    def words(v: dict[str, Any], out: Any) -> str:
        via = " (to the controller)" if v.get("via") == "controller" else ""
        return f"{api} {v['topic']}{via}"

    return words


def _read_words(f: str) -> Callable[[dict[str, Any], Any], str]:
    def words(v: dict[str, Any], out: Any) -> str:
        what = f"{v['topic']}-{v['partition']}" if "partition" in v else v.get("topic") or "every topic"
        where = f" on {v['node']}" if v.get("node") else ""
        final = " (final)" if v.get("final") else ""
        part = f" (one key of a {v['from']})" if v.get("from") else ""
        got = f" ⇒ {_short(out, 80)}" if out is not None else ""
        return f"{f} {what}{where}{final}{part}{got}"

    return words


_KAFKA_WORDS: dict[str, Callable[[dict[str, Any], Any], str]] = {
    "alter": _alter_words, "register": _register_words, "heartbeat": _heartbeat_words,
    "unregister": lambda v, out: f"UnregisterBroker broker {v['broker']}",
    "create": _topic_words("CreateTopics"), "delete": _topic_words("DeleteTopics"),
    "read": _read_words("read"), "describe": _read_words("describe"), "list": _read_words("list"),
}
"""Kafka's words for the workload ops (docs/workload-ops.md), by `f`: (value, ok output) → text."""


def _kv(v: Any) -> Any:
    """{"key": k, "value": x} reads better as k, x (or k alone when x is nil)."""
    if isinstance(v, dict) and "key" in v and set(v) <= {"key", "value"}:
        return v["key"] if v.get("value") is None else f"{v['key']}, {_short(v['value'], 30)}"
    return v


def _short(v: Any, limit: int = 40) -> str:
    s = "nil" if v is None else json.dumps(v, default=str, sort_keys=True) if not isinstance(v, str) else v
    return s if len(s) <= limit else s[: limit - 1] + "…"


@dataclass(slots=True)
class History:
    """Events in order, plus where they came from and any format-specific semantics."""

    events: list[Event]
    source: str = "<memory>"
    format: str = "jsonl"

    def client_events(self) -> list[Event]:
        return [e for e in self.events if e.process != "nemesis"]

    def __len__(self) -> int:
        return len(self.events)


def pair_ops(history: History | Iterable[Event]) -> list[Op]:
    """Pair each invocation with its process's next completion; nemesis events are skipped.

    An invocation with no completion is an `info` op. A completion with no open invocation, or
    an invocation on a process that already has one open, is a malformed history.
    """
    events = history.events if isinstance(history, History) else list(history)
    source = history.source if isinstance(history, History) else "<memory>"
    open_: dict[Any, Op] = {}
    ops: list[Op] = []
    for pos, e in enumerate(events):
        if e.process == "nemesis":
            continue
        if e.type == "invoke":
            if e.process in open_:
                raise HistoryError(source, e.line, f"process {e.process} invokes while its op is still open")
            op = Op(len(ops), e.process, e.f, e.value, None, "info", pos, None, None, e.time, None, e.line, 0)
            open_[e.process] = op
            ops.append(op)
            continue
        op_or_none = open_.pop(e.process, None)
        if op_or_none is None:
            raise HistoryError(source, e.line, f"{e.type} completion of process {e.process} with no open invocation")
        op = op_or_none
        op.status = e.type
        op.output = e.value
        op.error = e.error
        op.ret_time = e.time
        op.ret_line = e.line
        if e.type != "info":
            op.ret = pos
    return ops


_REQUIRED = ("process", "type", "f")


def parse_jsonl_line(text: str, path: str | Path, lineno: int, index: int) -> Event:
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise HistoryError(path, lineno, f"not JSON: {exc.msg} at column {exc.colno}") from None
    if not isinstance(raw, dict):
        raise HistoryError(path, lineno, "an op must be a JSON object")
    for key in _REQUIRED:
        if key not in raw:
            raise HistoryError(path, lineno, f"missing field {key!r}")
    if raw["type"] not in EVENT_TYPES:
        raise HistoryError(path, lineno, f"type must be one of {EVENT_TYPES}, not {raw['type']!r}")
    if not isinstance(raw["f"], str):
        raise HistoryError(path, lineno, "f must be a string")
    proc = raw["process"]
    if not (isinstance(proc, int) and not isinstance(proc, bool)) and proc != "nemesis":
        raise HistoryError(path, lineno, f"process must be an integer or \"nemesis\", not {proc!r}")
    t = raw.get("time")
    if t is not None and not isinstance(t, int):
        raise HistoryError(path, lineno, "time must be an integer (ns)")
    known = {"index", "time", "process", "type", "f", "value", "node", "error"}
    extra = {k: v for k, v in raw.items() if k not in known}
    return Event(
        index=raw.get("index", index), process=proc, type=raw["type"], f=raw["f"], value=raw.get("value"),
        time=t, node=raw.get("node"), error=raw.get("error"), line=lineno, extra=extra,
    )


def iter_jsonl(path: str | Path) -> Iterator[Event]:
    with open(path, encoding="utf-8") as fh:
        index = 0
        for lineno, text in enumerate(fh, 1):
            if not text.strip():
                continue
            yield parse_jsonl_line(text, path, lineno, index)
            index += 1


def read_jsonl(path: str | Path) -> History:
    """Read the project's history.jsonl. A torn last line (a crashed writer) is an error too."""
    return History(list(iter_jsonl(path)), str(path), "jsonl")


def write_jsonl(history: History | Iterable[Event], path: str | Path) -> None:
    events = history.events if isinstance(history, History) else history
    with open(path, "w", encoding="utf-8") as fh:
        for e in events:
            fh.write(json.dumps(e.to_json(), default=str) + "\n")


@dataclass(frozen=True, slots=True)
class FaultWindow:
    """A fault in force from `start` to `end` (ns since test start), opened by nemesis op `opener`."""

    kind: str
    """The opener without its `start-` prefix (`partition`, `kill`, `clock-bump`, …)."""
    start: int
    end: int
    detail: Any
    """The opener's completion value: what was done to which nodes."""
    opener: str = ""


def fault_windows(events: Iterable[Event | dict[str, Any]], openers: dict[str, str],
                  end: int | None = None) -> list[FaultWindow]:
    """Fault windows from a history's nemesis ops. `openers` maps each `f` that opens a window to
    the `f` that closes it (the nemesis packages declare it). A window opens at the invocation of
    an opener that was applied (its completion is not `fail`: a graceful stop of every node takes
    seconds, and it is in effect from the start) and closes at its closer's completion; a closer
    shared by several openers (`clock-reset`, `restart`) closes them all; a window still open when
    the history ends closes at its last op (or `end`)."""
    open_: dict[str, tuple[int, Any, str]] = {}
    invoked: dict[str, int] = {}
    closers: dict[str, list[str]] = {}
    for o, c in openers.items():
        closers.setdefault(c, []).append(o)
    windows: list[FaultWindow] = []
    last = 0
    for ev in events:
        e = ev if isinstance(ev, dict) else {"process": ev.process, "type": ev.type, "f": ev.f,
                                             "value": ev.value, "time": ev.time}
        t = int(e.get("time") or 0)
        last = max(last, t)
        if e.get("process") != "nemesis":
            continue
        f = str(e.get("f"))
        if e.get("type") == "invoke":
            invoked[f] = t  # the nemesis runs one op at a time: its completion follows
            continue
        if f in openers and e.get("type") != "fail":
            kind = f.removeprefix("start-")
            open_.setdefault(kind, (invoked.get(f, t), e.get("value"), f))
        for opener in closers.get(f, ()):
            kind = opener.removeprefix("start-")
            if kind in open_:
                t0, detail, how = open_.pop(kind)
                windows.append(FaultWindow(kind, t0, t, detail, how))
    stop = max(last, end or 0)
    windows += [FaultWindow(kind, t0, stop, detail, how) for kind, (t0, detail, how) in open_.items()]
    windows.sort(key=lambda w: w.start)
    return windows
