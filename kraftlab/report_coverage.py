"""The report's coverage section: what the run exercised (results.json `coverage`, see
checker.coverage) as small tables — the headline figures, Raft, brokers, partitions, client
outcomes per fault kind, rule reach (how often each controller/broker rule could have been broken),
and disk faults."""

from __future__ import annotations

import html
from collections.abc import Mapping
from typing import Any

from kraftlab.checker.coverage import headline
from kraftlab.checker.reach import RULES as REACH_RULES


def _table(header: list[str], rows: list[list[Any]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def _words(key: str) -> str:
    return key.replace("_", " ")


def coverage_section(cov: Mapping[str, Any] | None) -> list[str]:
    """HTML parts of the coverage section (nothing for a run checked before coverage existed)."""
    if not cov:
        return []
    out = ["<h2>Coverage</h2>", "<div class='small'>What this run exercised, from the node journals, the "
           "committed metadata log (decoded with Kafka's schemas) and the history. A valid run that never "
           "reached a path says nothing about it.</div>"]
    head = headline(cov)
    out.append(_table(list(head), [["–" if v is None else v for v in head.values()]]))
    if raft := cov.get("raft"):
        counts = {k: v for k, v in raft.items() if not isinstance(v, Mapping)}
        out.append("<h3>Raft</h3>" + _table([_words(k) for k in counts], [list(counts.values())]))
        if kinds := raft.get("truncation_kinds"):
            out.append("<h3>Truncations by kind</h3>" + _table([_words(k) for k in kinds], [list(kinds.values())])
                       + "<div class='small'>diverging epoch present: the leader's log holds the follower's last "
                         "epoch but ends it earlier; absent: the leader's log never held that epoch (KIP-595's "
                         "DivergingEpoch names an older one); lost un-fsynced tail: a restart recovered a shorter "
                         "log than the node had appended.</div>")
    if brokers := cov.get("brokers"):
        keys = [k for k in ("registrations", "fences", "unfences", "self_fences", "controlled_shutdowns")
                if any(k in s for s in brokers.values())]
        rows = [[side, *(s.get(k, "–") for k in keys),
                 ", ".join(f"{r}: {n}" for r, n in sorted((s.get("fence_reasons") or {}).items())) or "–"]
                for side, s in brokers.items()]
        out.append("<h3>Brokers</h3>" + _table(["", *(_words(k) for k in keys), "fence reasons (journalled)"], rows)
                   + "<div class='small'>nodes: the lab's broker processes; agents: brokers the workload "
                     "registers from the client side.</div>")
    if parts := cov.get("partitions"):
        out.append("<h3>Partitions (committed)</h3>" + _table([_words(k) for k in parts], [list(parts.values())]))
    if reach := cov.get("rules"):
        out.append(_reach(reach))
    if faults := cov.get("faults"):
        rows = [[kind, v.get("windows", 0), v.get("seconds", 0), v.get("ok", 0), v.get("fail", 0), v.get("info", 0)]
                for kind, v in faults.items()]
        out.append("<h3>Client outcomes per fault kind</h3>"
                   + _table(["fault in force", "windows", "seconds", "ok", "fail", "info"], rows)
                   + "<div class='small'>An operation invoked while several faults were in force counts for each; "
                     "“none”: no fault in force.</div>")
    if (disk := cov.get("disk")) and (disk.get("power_losses") or disk.get("damages")):
        counts = {k: v for k, v in disk.items() if k not in ("damages", "outcomes")}
        damages = ", ".join(f"{k}: {n}" for k, n in (disk.get("damages") or {}).items()) or "none"
        out.append("<h3>Disk</h3>" + _table([_words(k) for k in counts], [list(counts.values())])
                   + f"<div class='small'>Power losses: kills on the disk-fault filesystem, which drop what the "
                     f"node never fsynced. Damaged nodes afterwards: restarted and serving, rebuilt after "
                     f"refusing (broker-only nodes), or left down refusing (voters). Damages (mode, zone), "
                     f"per node: {html.escape(damages)}.</div>")
        if outcomes := disk.get("outcomes"):
            kinds = ("served", "formatted", "rebuilt", "refused")
            out.append("<h4>What became of each damage</h4>"
                       + _table(["damage (mode, zone)", *kinds],
                                [[where, *(c.get(k, 0) for k in kinds)] for where, c in outcomes.items()])
                       + "<div class='small'>Per damaged node: served (it started on its damaged files and ran; the "
                         "checkers judge what it served), formatted (wiped, formatted anew), rebuilt "
                         "(it refused; a broker-only node re-made from the quorum), refused (a voter left "
                         "down).</div>")
    return out


def _reach(reach: Mapping[str, Any]) -> str:
    """Rule reach: per rule, its opportunities and of which kinds; the rules never reached named."""
    how = reach.get("how") or {}
    rows = [[rule, n, ", ".join(f"{_words(k)}: {c}" for k, c in (how.get(rule) or {}).items()) or "–",
             REACH_RULES.get(rule, "")] for rule, n in (reach.get("rules") or {}).items()]
    missing = ", ".join(reach.get("not_reached") or []) or "none"
    blind = ", ".join(reach.get("unknown") or [])
    return ("<h3>Rule reach</h3>" + _table(["rule", "opportunities", "of which", "an opportunity is"], rows)
            + f"<div class='small'>How often the run put the node in the position to break each rule, judged "
              f"against the committed metadata log. Not reached: {html.escape(missing)}."
            + (f" Not countable from these journals: {html.escape(blind)}." if blind else "") + "</div>")
