"""Readers for external history formats, all into the project's `History` type.

- `edn`: Jepsen/Knossos EDN (a vector or list of op maps, or one op map per line, as in
  Porcupine's kv files; a `:key` field moves into the value: `{"key": k, "value": v}`).
- `etcd-log`: Jepsen etcd logs as Porcupine ships them (`INFO jepsen.util - P :type :f VALUE`).
  A `:fail :cas` there is a definite compare mismatch: it becomes a `fail` with error
  `compare-mismatch`, which the cas-register model keeps as an observation.
- `jsonl`: the project's own history (checker.history).
`read_history` picks the reader from the file's name and first bytes unless told.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from kraftlab.checker.edn import read_elements
from kraftlab.checker.history import EVENT_TYPES, Event, History, HistoryError, read_jsonl

FORMATS = ("jsonl", "edn", "etcd-log")

_ETCD = re.compile(r"^INFO\s+jepsen\.util\s+-\s+(\d+|:nemesis)\s+:(invoke|ok|fail|info)\s+:([\w-]+)\s*(.*?)\s*$")


def _edn_event(form: Any, path: str, line: int, index: int) -> Event:
    if not isinstance(form, dict):
        raise HistoryError(path, line, "an op must be an EDN map")
    for key in ("process", "type", "f"):
        if key not in form:
            raise HistoryError(path, line, f"missing :{key}")
    if form["type"] not in EVENT_TYPES:
        raise HistoryError(path, line, f":type must be one of {EVENT_TYPES}, not {form['type']!r}")
    proc = form["process"]
    if not isinstance(proc, int) and proc != "nemesis":
        raise HistoryError(path, line, f":process must be an integer or :nemesis, not {proc!r}")
    value = form.get("value")
    if "key" in form:
        value = {"key": form["key"], "value": value}
    time = form.get("time")
    return Event(
        index=index, process=proc, type=form["type"], f=str(form["f"]), value=value,
        time=time if isinstance(time, int) else None, error=form.get("error"), line=line,
    )


def read_edn(path: str | Path, text: str | None = None) -> History:
    p = str(path)
    body = Path(path).read_text(encoding="utf-8") if text is None else text
    events = [_edn_event(form, p, line, i) for i, (line, form) in enumerate(read_elements(body, p))]
    return History(events, p, "edn")


def _etcd_value(raw: str, path: str, line: int) -> Any:
    if raw in ("nil", ""):
        return None
    if raw.startswith(":"):
        return raw[1:]
    m = re.fullmatch(r"\[\s*(-?\d+)\s+(-?\d+)\s*\]", raw)
    if m:
        return [int(m.group(1)), int(m.group(2))]
    if re.fullmatch(r"-?\d+", raw):
        return int(raw)
    raise HistoryError(path, line, f"cannot read value {raw!r}")


def read_etcd_log(path: str | Path, text: str | None = None) -> History:
    """Jepsen etcd log lines; lines that are not op lines (other loggers) are skipped."""
    p = str(path)
    body = Path(path).read_text(encoding="utf-8") if text is None else text
    events: list[Event] = []
    for lineno, line in enumerate(body.splitlines(), 1):
        if "jepsen.util" not in line:
            continue
        m = _ETCD.match(line)
        if not m:
            raise HistoryError(p, lineno, "not a 'INFO jepsen.util - PROCESS :type :f VALUE' line")
        proc_s, typ, f, raw = m.groups()
        proc: Any = "nemesis" if proc_s == ":nemesis" else int(proc_s)
        value = _etcd_value(raw, p, lineno)
        error = None
        if typ in ("fail", "info") and isinstance(value, str):
            error, value = value, None  # ':fail :read :timed-out': the value is the reason
        elif typ == "fail" and f == "cas":
            error = "compare-mismatch"
        events.append(Event(len(events), proc, typ, f, value, None, None, error, lineno))
    return History(events, p, "etcd-log")


def detect_format(path: str | Path) -> str:
    name = str(path)
    if name.endswith((".jsonl", ".json")):
        return "jsonl"
    if name.endswith(".edn"):
        return "edn"
    with open(path, encoding="utf-8", errors="replace") as fh:
        head = fh.read(4096).lstrip()
    if head.startswith("{\"") or head.startswith("{ \""):
        return "jsonl"
    if "jepsen.util" in head:
        return "etcd-log"
    if head.startswith(("[", "(", "{", ";")):
        return "edn"
    raise HistoryError(path, 1, "cannot tell the history format (jsonl, edn or etcd-log); pass it explicitly")


def read_history(path: str | Path, fmt: str | None = None) -> History:
    """Read any supported history file; errors name the file, the line and the reason."""
    if not Path(path).is_file():
        raise HistoryError(path, 0, "no such file")
    fmt = fmt or detect_format(path)
    if fmt == "jsonl":
        return read_jsonl(path)
    if fmt == "edn":
        return read_edn(path)
    if fmt == "etcd-log":
        return read_etcd_log(path)
    raise HistoryError(path, 0, f"unknown format {fmt!r}; one of {FORMATS}")
