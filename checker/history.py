"""The history type every checker reads, and the project's JSON Lines history format.

A history is a list of `Event`s in recorded (real-time) order, with Jepsen's meaning: `invoke`
starts an operation, `ok` says it took effect, `fail` that it did not, `info` that nobody knows
(it may take effect at any later time, or never). `pair_ops` turns events into `Op`s
(invocation + completion), which is what the linearizability search works on — and what the
report draws. A `Completion` is how one operation ended, as a client or the nemesis hands it to
the recorder before it becomes a history line. The JSON Lines reader comes strict (`read_jsonl`)
and as the runner's history is read everywhere (`iter_jsonl_tolerant`: a torn last line dropped
with a note); nemesis events give the fault windows (`fault_windows`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

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


@dataclass(frozen=True, slots=True)
class Completion:
    """How one operation ended, Jepsen's meaning: `ok` took effect, `fail` certainly did not,
    `info` unknown (may take effect at any later time). For a fault: `ok` applied exactly, `fail` not
    applied, `info` partly applied or unknown. `f` names the operation where the completion travels
    apart from its invocation (the nemesis's ops and schedules)."""

    type: Literal["ok", "fail", "info"]
    value: Any = None
    error: str | None = None
    f: str | None = None


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
    node: str | None = None
    """The node the invocation was sent to (the history line's `node`)."""

    @property
    def crashed(self) -> bool:
        return self.ret is None

    @property
    def start(self) -> int:
        """The invocation's time (ns since the test started; 0 for a history without times)."""
        return self.call_time or 0

    @property
    def end(self) -> int | None:
        """The completion's time; None when no completion was recorded (the runner died)."""
        return self.ret_time

    @property
    def latency_ms(self) -> float | None:
        return None if self.ret_time is None or self.call_time is None else (self.ret_time - self.call_time) / 1e6

    def label(self, words: Callable[[Op], str] | None = None) -> str:
        """The op in a line: `p<process> <words> [<status> <error>]`. `words` is how the model
        that judges this op says it (a model's `describe_op`: Kafka's words for the workload ops,
        checker.op_words); without it, or for a value not of that model's shape, the generic
        `f(value) -> output`."""
        st = "" if self.status == "ok" else f" [{self.status}{'' if self.error is None else ' ' + str(self.error)}]"
        if words is not None:
            try:
                return f"p{self.process} {words(self)}{st}"
            except (KeyError, TypeError, ValueError, AttributeError):
                pass  # not the model's shape: the generic label
        value, output = _kv(self.value), _kv(self.output)
        out = "" if output is None or output == value else f" -> {short(output)}"
        arg = "" if value is None else short(value)
        return f"p{self.process} {self.f}({arg}){out}{st}"


def _kv(v: Any) -> Any:
    """{"key": k, "value": x} reads better as k, x (or k alone when x is nil)."""
    if isinstance(v, dict) and "key" in v and set(v) <= {"key", "value"}:
        return v["key"] if v.get("value") is None else f"{v['key']}, {short(v['value'], 30)}"
    return v


def short(v: Any, limit: int = 40) -> str:
    """A value in at most `limit` characters (JSON for structures)."""
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
            op = Op(len(ops), e.process, e.f, e.value, None, "info", pos, None, None, e.time, None, e.line, 0, e.node)
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
    """Read the project's history.jsonl strictly: a torn last line (a crashed writer) is an error too."""
    return History(list(iter_jsonl(path)), str(path), "jsonl")


def torn_line_note(path: str | Path, line: int) -> str:
    return f"{path}:{line}: torn last line dropped (the runner was killed mid-write)"


def iter_jsonl_tolerant(path: str | Path, notes: list[str]) -> Iterator[Event]:
    """The events of a history.jsonl as the runner may leave it: a last line with no newline after
    it that does not parse (the runner was killed mid-write) is dropped with a note in `notes`; any
    other malformed line is an error naming file and line. Streams: a large history is never held
    as text."""
    with open(path, encoding="utf-8") as fh:
        index = 0
        pending: tuple[int, str] | None = None
        for lineno, text in enumerate(fh, 1):
            if pending is not None:
                yield parse_jsonl_line(pending[1], path, pending[0], index)
                index += 1
                pending = None
            if not text.strip():
                continue
            if text.endswith("\n"):
                yield parse_jsonl_line(text, path, lineno, index)
                index += 1
            else:
                pending = (lineno, text)  # the last line, without its newline
        if pending is not None:
            try:
                yield parse_jsonl_line(pending[1], path, pending[0], index)
            except HistoryError:
                notes.append(torn_line_note(path, pending[0]))


def load_jsonl_tolerant(path: str | Path) -> tuple[History, list[str]]:
    """The run's history (`iter_jsonl_tolerant`) and its notes; a missing file is an empty history."""
    notes: list[str] = []
    if not Path(path).is_file():
        return History([], str(path), "jsonl"), notes
    return History(list(iter_jsonl_tolerant(path, notes)), str(path), "jsonl"), notes


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
