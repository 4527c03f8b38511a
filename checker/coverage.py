"""What a run exercised, read from its node journals, its committed metadata log and its history:
the `coverage` section of results.json, drawn in the report and summed by `test-all`.

A run that is valid but never elected a second leader, fenced a broker or loaded a snapshot says
little about those paths; coverage says which paths a run reached, so a nightly matrix can tell a
quiet pass from a searching one (docs/contracts.md, "Coverage").

- raft: leader epochs (distinct epochs with a leader), failovers (a new leader on another node),
  elections started (candidate or prospective), contested elections (epochs in which two or more
  nodes stood as candidate), double-vote chances (a voter asked for its vote in an epoch by a second
  candidate — after another candidate's request or its own candidacy —, the request not refused for
  its epoch or voter set: each is where SingleVote could be broken), diverging-log truncations,
  and truncations by kind (`truncation_kinds`:
  a diverging epoch the leader's log holds or lacks, a restart that lost an un-fsynced tail, a
  snapshot replacing the log — and, among those, `snapshot_over_divergent_tail`: one that removed
  entries differing from the committed ones, a divergence below the leader's log start answered
  with a SnapshotId —, a corrupt tail cut on recovery), snapshots created, loaded and
  fetched, node restarts, voter changes committed (KIP-853: the leaders' `voter_change`).
- brokers: committed registrations, fences and unfences (from the committed log, decoded with
  Kafka's schemas), fence reasons as the controllers journalled them, self-fences and controlled
  shutdowns (the brokers' journals), split between the lab's own broker processes (`nodes`) and
  the workload's agents (brokers the workload registers from the client side, to reach the
  controller's rules at a high rate).
- partitions: from the committed log: ISR shrinks and expands, partition leader changes, and
  changes that left a partition leaderless.
- faults: per fault kind, how many windows and seconds, and the client operations invoked while it
  was in force by outcome (ok / fail / info), plus the same for operations with no fault in force.
- rules: rule reach (checker.reach) — per controller and broker rule, how often the run put the
  node in the position to break it, judged against the decoded committed log; `not_reached`
  names the rules a run gave no chance.
- disk: from the nemesis's completions: power losses (kills on the disk-fault filesystem), how
  many of them dropped anything (a kill seldom lands while something is un-fsynced unless the disk
  is slow), and what they dropped (bytes, files rolled back, names removed or restored), damages by mode and
  KRaft zone, and what became of damaged nodes (restarted and served, rebuilt after refusing,
  left down refusing), also per damage and zone (`outcomes`: served, formatted, rebuilt, refused).
"""

from __future__ import annotations

import itertools
from collections import Counter, defaultdict
from collections.abc import Collection, Mapping
from typing import Any

from kraftlab.checker.history import History, fault_windows, pair_ops
from kraftlab.checker.journal import Journals
from kraftlab.checker.metadata.check import committed_log
from kraftlab.checker.metadata.decode import NO_LEADER_CHANGE, DecodeError, decode
from kraftlab.checker.metadata.model import NO_LEADER
from kraftlab.checker.raft.replay import Replay
from kraftlab.checker.reach import rule_reach


def _truncation_kind(e: Any) -> str:
    """A diverging truncation's kind, from the DivergingEpoch the leader answered and the
    LastFetchedEpoch the follower had sent (KIP-595): the leader's log holds that epoch but ends it
    earlier, or holds no such epoch at all (journals before these fields: `diverging`)."""
    diverging, last = e.get("diverging_epoch"), e.get("last_fetched_epoch")
    if diverging is None or last is None:
        return "diverging"
    return "diverging_epoch_present" if int(diverging) == int(last) else "diverging_epoch_absent"


def _snapshots_over_divergent_tails(replay: Replay) -> int:
    """Snapshots that replaced entries differing from what was committed at their offsets (a
    truncation to a fetched snapshot with its load counts once; a snapshot loaded on restart over
    such a log counts too): a follower whose divergence lay below the leader's log start, so the
    leader answered its Fetch with a SnapshotId instead of a DivergingEpoch."""
    committed = replay.committed
    count = 0
    episode: dict[int, bool] = {}  # node → a snapshot truncation in progress found divergence so far
    for e, removed in replay.dropped:
        divergent = any((c := committed.get(o)) is not None and c.crc != x[1] for o, x in removed.items())
        if e.ev == "truncate":
            if e.get("reason") == "snapshot":
                episode[e.node] = divergent
            else:
                episode.pop(e.node, None)
        elif e.node in episode:  # the snapshot load or fetch that follows it
            count += episode.pop(e.node) or divergent
        else:  # a snapshot loaded (e.g. on restart) over a log it replaces
            count += divergent
    count += sum(episode.values())
    return count


VOTE_NOT_WEIGHED = ("stale epoch", "not a voter", "another directory id")
"""Vote refusals taken before the voter looks at its vote (the node's `vote` event reasons)."""


def _raft(journals: Journals) -> dict[str, Any]:
    leaders: dict[int, int] = {}
    candidates: defaultdict[int, set[int]] = defaultdict(set)
    asked: defaultdict[tuple[int, int], set[int]] = defaultdict(set)  # (voter, epoch) → candidates
    elections = truncations = restarts = voter_changes = 0
    snapshots: Counter[str] = Counter()
    kinds: Counter[str] = Counter({"diverging_epoch_present": 0, "diverging_epoch_absent": 0,
                                   "lost_unflushed_tail": 0, "snapshot": 0, "corrupt_tail": 0})
    for node, entries in journals.by_node.items():
        starts = 0
        end = 0  # the node's log end offset as its journal goes
        for e in entries:
            if e.ev == "role":
                if e.get("role") == "leader":
                    leaders.setdefault(int(e["epoch"]), node)
                elif e.get("role") in ("candidate", "prospective"):
                    elections += 1
                    if e.get("role") == "candidate":
                        candidates[int(e["epoch"])].add(node)
            elif e.ev == "vote" and not e.get("pre_vote") and e.get("reason") not in VOTE_NOT_WEIGHED:
                asked[(node, int(e["epoch"]))].add(int(e["candidate"]))
            elif e.ev == "append":
                end = int(e["base"]) + len(e.get("crcs") or ())
            elif e.ev == "truncate":
                end = int(e["to"])
                reason = str(e.get("reason"))
                if reason == "diverging":
                    truncations += 1
                    kinds[_truncation_kind(e)] += 1
                else:
                    kinds[reason.replace("-", "_")] += 1
            elif e.ev == "snapshot":
                snapshots[str(e.get("action"))] += 1
                if e.get("action") in ("load", "fetch"):
                    end = max(end, int(e.get("offset", 0)))
            elif e.ev == "start":
                starts += 1
                log_end = int(e.get("log_end", 0) or 0)
                # a restart that recovered a shorter, non-empty log lost what was never fsynced
                kinds["lost_unflushed_tail"] += 0 < log_end < end
                end = log_end
            elif e.ev == "voter_change" and e.get("action") == "committed":
                voter_changes += 1
        restarts += max(0, starts - 1)
    kinds["snapshot_over_divergent_tail"] = _snapshots_over_divergent_tails(Replay(journals))
    by_epoch = [leaders[ep] for ep in sorted(leaders)]
    failovers = sum(1 for a, b in itertools.pairwise(by_epoch) if a != b)
    contested = sum(1 for nodes in candidates.values() if len(nodes) >= 2)
    double_vote_chances = sum(1 for (voter, epoch), by in asked.items()
                              if len(by | ({voter} & candidates[epoch])) >= 2)
    return {"leader_epochs": len(leaders), "failovers": failovers, "elections_started": elections,
            "contested_elections": contested, "double_vote_chances": double_vote_chances,
            "truncations": truncations, "truncation_kinds": dict(kinds),
            "snapshots_created": snapshots["create"], "snapshots_loaded": snapshots["load"],
            "snapshots_fetched": snapshots["fetch"], "restarts": restarts, "voter_changes": voter_changes}


def _side(broker: Any, node_ids: Collection[int]) -> str:
    return "nodes" if int(broker) in node_ids else "agents"


def _brokers(journals: Journals, node_ids: Collection[int]) -> dict[str, dict[str, Any]]:
    """What the brokers' own journals and the controllers' fence decisions say (reasons as journalled
    by the controller that wrote the fence, including fences a failover lost before they committed)."""
    out: dict[str, dict[str, Any]] = {side: {"fence_reasons": Counter(), "self_fences": 0, "controlled_shutdowns": 0}
                                      for side in ("nodes", "agents")}
    for e in journals.all():
        if e.ev == "fence" and e.get("broker") is not None and e.get("action") == "fence":
            out[_side(e["broker"], node_ids)]["fence_reasons"][str(e.get("reason") or "other")] += 1
        elif e.ev == "broker_state":
            s = out[_side(e.get("broker", e.node), node_ids)]
            state = str(e.get("state"))
            if state == "FENCED_SELF":
                s["self_fences"] += 1
            elif state == "PENDING_CONTROLLED_SHUTDOWN":
                s["controlled_shutdowns"] += 1
    for s in out.values():
        s["fence_reasons"] = dict(s["fence_reasons"])
    return out


def _committed(journals: Journals, node_ids: Collection[int],
               brokers: dict[str, dict[str, Any]]) -> dict[str, int]:
    """From the committed log, decoded here (the node's own summary is not trusted): fences,
    unfences and registrations per side (added to `brokers`); ISR and partition leader changes."""
    log, _ = committed_log(journals, [])
    isr: dict[tuple[str, int], set[int]] = {}
    parts = Counter({"isr_shrinks": 0, "isr_expands": 0, "leader_changes": 0, "leaderless": 0})
    for s in brokers.values():
        s.update(registrations=0, fences=0, unfences=0)
    for off in sorted(log):
        try:
            rec = decode(log[off][0])
        except DecodeError:
            continue
        f = rec.fields
        if rec.type == "PartitionRecord":
            isr[(f["topic_id"], f["partition_id"])] = set(f["isr"])
        elif rec.type == "PartitionChangeRecord":
            key = (f["topic_id"], f["partition_id"])
            if f["isr"] is not None and key in isr:
                before, after = isr[key], set(f["isr"])
                parts["isr_shrinks"] += bool(before - after)
                parts["isr_expands"] += bool(after - before)
                isr[key] = after
            if f["leader"] != NO_LEADER_CHANGE:
                parts["leader_changes"] += 1
                parts["leaderless"] += f["leader"] == NO_LEADER
        elif rec.type == "RemoveTopicRecord":
            for key in [k for k in isr if k[0] == f["topic_id"]]:
                del isr[key]
        elif rec.type == "RegisterBrokerRecord":
            brokers[_side(f["broker_id"], node_ids)]["registrations"] += 1
        elif rec.type in ("FenceBrokerRecord", "UnfenceBrokerRecord"):
            brokers[_side(f["broker_id"], node_ids)]["fences" if rec.type[0] == "F" else "unfences"] += 1
        elif rec.type == "BrokerRegistrationChangeRecord" and f["fenced"] in (1, -1):
            brokers[_side(f["broker_id"], node_ids)]["fences" if f["fenced"] == 1 else "unfences"] += 1
    return dict(parts)


def _faults(history: History, openers: Mapping[str, str]) -> dict[str, dict[str, Any]]:
    windows = fault_windows(history.events, dict(openers))
    out: dict[str, dict[str, Any]] = defaultdict(lambda: {"windows": 0, "seconds": 0.0, "ok": 0, "fail": 0, "info": 0})
    for w in windows:
        out[w.kind]["windows"] += 1
        out[w.kind]["seconds"] += round((w.end - w.start) / 1e9, 3)
    for op in pair_ops(history):
        t = op.call_time
        if t is None:
            continue
        kinds = {w.kind for w in windows if w.start <= t < w.end} or {"none"}
        for k in kinds:
            out[k][op.status if op.status in ("ok", "fail", "info") else "info"] += 1
    for v in out.values():
        v["seconds"] = round(v["seconds"], 1)
    return dict(sorted(out.items()))


def _disk(history: History) -> dict[str, Any]:
    out: dict[str, Any] = {"power_losses": 0, "power_losses_dropping": 0, "bytes_dropped": 0, "files_rolled_back": 0,
                           "names_removed": 0, "names_restored": 0, "damages": {}, "restarted": 0, "rebuilt": 0,
                           "refused": 0}
    damages: Counter[str] = Counter()
    outcomes: defaultdict[str, Counter[str]] = defaultdict(Counter)
    for e in history.events:
        if e.process != "nemesis" or e.type != "ok" or not isinstance(e.value, dict):
            continue
        if e.f == "kill":
            for lost in (e.value.get("lost_unfsynced") or {}).values():
                out["power_losses"] += 1
                out["power_losses_dropping"] += bool(lost.get("bytes_dropped") or lost.get("entries_removed")
                                                     or lost.get("entries_restored"))
                out["bytes_dropped"] += int(lost.get("bytes_dropped", 0))
                out["files_rolled_back"] += len(lost.get("files_rolled_back", ()))
                out["names_removed"] += len(lost.get("entries_removed", ()))
                out["names_restored"] += len(lost.get("entries_restored", ()))
        elif e.f == "start-disk":
            where = f"{e.value.get('damage')}" + (f" {e.value['zone']}" if e.value.get("zone") else "")
            damages[where + (" helix" if e.value.get("helix") else "")] += len(e.value.get("nodes", ()))
        elif e.f == "stop-disk":
            for o in (e.value.get("outcomes") or {}).values():
                where = f"{o.get('damage')}" + (f" {o['zone']}" if o.get("zone") else "")
                outcomes[where][str(o.get("outcome"))] += 1
            rebuilt, refused = set(e.value.get("rebuilt", ())), set(e.value.get("refused", ()))
            out["rebuilt"] += len(rebuilt)
            out["refused"] += len(refused)
            out["restarted"] += len(set(e.value.get("restarted", ())) - rebuilt - refused)
    out["damages"] = dict(sorted(damages.items()))
    out["outcomes"] = {where: dict(sorted(c.items())) for where, c in sorted(outcomes.items())}
    return out


def coverage(journals: Journals | None, history: History | None, openers: Mapping[str, str],
             node_ids: Collection[int] = (), session_timeout_ms: float = 9000.0) -> dict[str, Any]:
    """The coverage section (see the module docstring); parts without their input are left out."""
    out: dict[str, Any] = {}
    if journals is not None:
        out["raft"] = _raft(journals)
        ids = set(node_ids)
        out["brokers"] = _brokers(journals, ids)
        out["partitions"] = _committed(journals, ids, out["brokers"])
        out["rules"] = rule_reach(journals, session_timeout_ms)
    if history is not None:
        out["faults"] = _faults(history, openers)
        out["disk"] = _disk(history)
    return out


HEADLINE = (("leader epochs", ("raft", "leader_epochs")), ("failovers", ("raft", "failovers")),
            ("broker fences", ("brokers", "nodes", "fences")),
            ("agent fences", ("brokers", "agents", "fences")),
            ("self-fences", ("brokers", "nodes", "self_fences")),
            ("ISR shrinks", ("partitions", "isr_shrinks")), ("ISR expands", ("partitions", "isr_expands")),
            ("contested elections", ("raft", "contested_elections")),
            ("double-vote chances", ("raft", "double_vote_chances")),
            ("truncations", ("raft", "truncations")),
            ("truncations, epoch absent", ("raft", "truncation_kinds", "diverging_epoch_absent")),
            ("lost un-fsynced tails", ("raft", "truncation_kinds", "lost_unflushed_tail")),
            ("divergent tails replaced by snapshots", ("raft", "truncation_kinds", "snapshot_over_divergent_tail")),
            ("snapshot loads", ("raft", "snapshots_loaded")),
            ("controlled shutdowns", ("brokers", "nodes", "controlled_shutdowns")),
            ("power losses", ("disk", "power_losses")), ("disk refusals", ("disk", "refused")))
"""The figures a summary shows, in order: (label, path into the coverage section)."""


def headline(cov: Mapping[str, Any]) -> dict[str, int | None]:
    """The HEADLINE figures of one run's coverage (None where the run has no such part)."""
    out: dict[str, int | None] = {}
    for label, path in HEADLINE:
        node: Any = cov
        for key in path:
            node = node.get(key) if isinstance(node, Mapping) else None
        out[label] = node if isinstance(node, int) else None
    return out
