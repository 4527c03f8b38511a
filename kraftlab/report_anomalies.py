"""The report's "Anomalies explained" section: every anomaly of every failing checker, readable alone.

- Linearizability (`nonlinearizable`): the op that cannot be linearized; every model state the
  search got stuck in, with the op it cannot get past and why (the rule broken, in the model's
  words); the last consistent prefix with the state after each op; and the interactive timeline of
  the failing key (kraftlab.report_timeline).
- Cross-key violations (`cross-key`) and anomaly cycles (`cycle`, Elle's form): the explanation,
  what the anomaly's name means, the ops involved.
- Rule violations of the journal checkers (Raft, fencing, metadata, forwarding, recovery, …),
  rendered generically from the shape of docs/contracts.md ("Anomalies in results.json"):
  `{type, explanation, entries, before?, after?, rule?}` — grouped per rule: the rule in one
  sentence, how often it broke, and for the first few violations the explanation, the state before
  and after, the journal entries (where, node, event, fields) and a picture of them per node — or,
  for the history's own rules (the queue checker), the ops that show it with their history lines.
"""

from __future__ import annotations

import functools
import html
import re
from collections.abc import Sequence
from typing import Any

from kraftlab.report_timeline import SCRIPT, event_timeline, op_timeline

SHOWN_PER_RULE = 3
"""Violations of one rule explained in full; the rest are counted."""
SHOWN_ENTRIES = 12
PREFIX_SHOWN = 12
PICTURE_MIN_ENTRIES = 3
"""A violation's entries get a picture when there are this many, or they span several nodes."""


def _esc(x: Any) -> str:
    return html.escape(str(x))


RULE_SOURCES = ("kraftlab.checker.metadata.check", "kraftlab.checker.raft", "kraftlab.checker.fencing",
                "kraftlab.checker.forwarding", "kraftlab.checker.quorum", "kraftlab.checker.authorization",
                "kraftlab.checker.recovery",
                "kraftlab.checker.availability", "kraftlab.checker.queue")
"""The checker modules whose rules the report can state: each declares `RULES: dict[str, str]` (rule
name → the rule in one sentence), or lists its rules in its docstring as `- Name: the rule. More…`
bullets (the first sentence is taken)."""

_BULLET = re.compile(r"^- (\w+): (.*?)(?=^- |^\S|\Z)", re.M | re.S)
_SENTENCE_END = re.compile(r"(?<=\.)\s+(?=[A-Z])")


def _declared_rules(module: Any) -> dict[str, str]:
    """Rule name → "The rule: …" (a RULES dict states the rule) or "What checker.x judges: …" (a
    docstring bullet may state the rule or the violation it finds)."""
    rules = getattr(module, "RULES", None)
    out = {k: f"The rule: {v}" for k, v in rules.items() if isinstance(v, str)} if isinstance(rules, dict) else {}
    where = module.__name__.removeprefix("kraftlab.")
    for m in _BULLET.finditer(module.__doc__ or ""):
        text = " ".join(m.group(2).split())
        out.setdefault(m.group(1), f"What {where} judges: {_SENTENCE_END.split(text, maxsplit=1)[0].rstrip('.')}")
    return out


@functools.cache
def _all_rules() -> dict[str, str]:
    import importlib

    out: dict[str, str] = {}
    for name in RULE_SOURCES:
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        for rule, said in _declared_rules(module).items():
            out.setdefault(rule, said)
    return out


def rule_words(rule: str) -> str | None:
    """The rule in one sentence, from the checker module that states it (None when none does):
    "The rule: …" or "What checker.raft judges: …"."""
    return _all_rules().get(rule)


def _where(where: Any) -> str:
    """A journal line as a link into the run directory (journals live under `nodes/`)."""
    text = str(where or "")
    k = text.rfind("nodes/")
    if k < 0:
        return _esc(text)
    rel = text[k:]
    path = rel.rsplit(":", 1)[0]
    return f'<a href="{_esc(path)}">{_esc(rel)}</a>'


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    head = "".join(f"<th>{_esc(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{_esc(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def _linearizability(a: dict[str, Any], windows: Sequence[Any], ident: str) -> list[str]:
    op = a.get("op") or {}
    line = op.get("complete_line") or op.get("invoke_line")
    out = [f"<h4>Key {_esc(a.get('key'))}: not linearizable</h4>",
           f"<p>The op that cannot be linearized: <b>{_esc(op.get('label', '?'))}</b> (history line {_esc(line)}). "
           "The shortest prefix of the history that cannot be linearized ends with its completion; every order of "
           "the ops before it gets stuck in one of these model states:</p>"]
    cands = [c for c in a.get("candidates") or [] if isinstance(c, dict)]
    if cands:
        out.append(_table(["model state", "ops linearized", "the op it cannot get past", "why"],
                          [[c.get("state"), c.get("linearized"), c.get("blocked") or "–", c.get("reason")]
                           for c in cands]))
    partial = (a.get("partial_linearizations") or [[]])[0]
    if partial:
        shown = partial[-PREFIX_SHOWN:]
        first = len(partial) - len(shown)
        rows = [[first + i + 1, label, state] for i, (label, state) in enumerate(shown)]
        more = f" (the last {len(shown)} of {len(partial)})" if first else ""
        out.append(f"<details open><summary>Last consistent prefix{more}, from "
                   f"[{_esc(a.get('initial_state', 'the initial state'))}]</summary>"
                   + _table(["#", "op", "model state after it"], rows) + "</details>")
    if not a.get("complete", True):
        out.append("<p class='small'>The explanation was cut short by its time budget.</p>")
    pic = op_timeline(a, windows, ident)
    if pic:
        out.append(f"<h4>Timeline of key {_esc(a.get('key'))}</h4>{pic}")
    return out


def _cycle(a: dict[str, Any]) -> list[str]:
    meaning = f" — {_esc(a['meaning'])}" if a.get("meaning") else ""
    return [f"<h4>{_esc(a.get('type'))}{meaning}</h4><p>{_esc(a.get('explanation'))}</p>"]


def _cross_key(a: dict[str, Any]) -> list[str]:
    ops = "".join(f"<li>{_esc(o.get('label'))} (history line {_esc(o.get('invoke_line'))})</li>"
                  for o in a.get("ops") or [] if isinstance(o, dict))
    return [f"<h4>Across keys</h4><p>{_esc(a.get('explanation'))}</p><ul>{ops}</ul>"]


def _entry_fields(e: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in e.items() if k not in ("where", "node", "ev", "ts", "value"))


def _rule(rule: str, vs: list[dict[str, Any]], ident: str) -> list[str]:
    said = f"The rule: {vs[0]['rule']}" if vs[0].get("rule") else rule_words(rule)
    out = [f"<h4>{_esc(rule)} — broken {len(vs)} time{'s' if len(vs) != 1 else ''}</h4>"]
    if said:
        out.append(f"<p><i>{_esc(said)}.</i></p>")
    for k, v in enumerate(vs[:SHOWN_PER_RULE]):
        out.append(f"<p><b>{k + 1}.</b> {_esc(v.get('explanation'))}</p>")
        if v.get("before") is not None or v.get("after") is not None:
            out.append(_table(["before", "after"], [[v.get("before", "–"), v.get("after", "–")]]))
        ops = [o for o in v.get("ops") or [] if isinstance(o, dict)]
        if ops:
            out.append(_table(["#", "process", "operation", "history line"],
                              [[i + 1, f"p{o.get('process')}", o.get("label"), o.get("invoke_line")]
                               for i, o in enumerate(ops[:SHOWN_ENTRIES])]))
        entries = [e for e in v.get("entries") or [] if isinstance(e, dict)]
        if entries:
            shown = entries[:SHOWN_ENTRIES]
            rows = "".join(f"<tr><td>{i + 1}</td><td>{_esc(e.get('node'))}</td><td>{_esc(e.get('ev'))}</td>"
                           f"<td>{_esc(_entry_fields(e))}</td><td>{_where(e.get('where'))}</td></tr>"
                           for i, e in enumerate(shown))
            out.append("<table><tr><th>#</th><th>node</th><th>event</th><th>fields</th><th>journal line</th></tr>"
                       f"{rows}</table>")
            if len(shown) >= PICTURE_MIN_ENTRIES or len({e.get("node") for e in shown}) > 1:
                out.append(event_timeline(shown, f"{ident}-{k}", f"{rule} {k + 1}"))
    if len(vs) > SHOWN_PER_RULE:
        out.append(f"<p class='small'>… and {len(vs) - SHOWN_PER_RULE} more (results.json).</p>")
    return out


def anomaly_sections(results: dict[str, Any], windows: Sequence[Any] = ()) -> list[str]:
    """HTML parts of the section (nothing when no checker found an anomaly)."""
    out: list[str] = []
    for name, res in sorted((results.get("checkers") or {}).items()):
        if not isinstance(res, dict) or res.get("valid") is not False:
            continue
        anomalies = [a for a in res.get("anomalies") or [] if isinstance(a, dict)]
        if not anomalies:
            continue
        out.append(f"<h3 id='anomalies-{_esc(name)}'>{_esc(name)}</h3>")
        rules: dict[str, list[dict[str, Any]]] = {}
        for i, a in enumerate(anomalies):
            if a.get("type") == "nonlinearizable":
                out += _linearizability(a, windows, f"kl-{name}-{i}")
            elif a.get("type") == "cross-key":
                out += _cross_key(a)
            elif "cycle" in a:
                out += _cycle(a)
            else:
                rules.setdefault(str(a.get("type")), []).append(a)
        for j, (rule, vs) in enumerate(rules.items()):
            out += _rule(rule, vs, f"kl-{name}-r{j}")
    if not out:
        return []
    return ["<h2>Anomalies explained</h2>", *out, SCRIPT]
