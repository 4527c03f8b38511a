"""Coverage: what a run exercised, counted from journals, the committed log (decoded) and the
history — and shown in the report and summed by test-all."""

from __future__ import annotations

import base64
import json
import uuid
from pathlib import Path
from typing import Any

from rich.console import Console

from kraftlab.checker.coverage import coverage, headline
from kraftlab.checker.history import History, parse_jsonl_line
from kraftlab.checker.journal import journals_from
from kraftlab.matrix import MatrixResult, coverage_table
from kraftlab.node.metadata.records import (
    FenceBrokerRecord,
    MetadataRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    TopicRecord,
    UnfenceBrokerRecord,
    encode,
)
from kraftlab.report_coverage import coverage_section

T = uuid.UUID(int=1)
RECORDS: list[MetadataRecord] = [
    RegisterBrokerRecord(broker_id=4, incarnation_id=uuid.UUID(int=4), broker_epoch=0),
    RegisterBrokerRecord(broker_id=1000, incarnation_id=uuid.UUID(int=5), broker_epoch=1),
    UnfenceBrokerRecord(id=4, epoch=0), UnfenceBrokerRecord(id=1000, epoch=1),
    TopicRecord(name="t", topic_id=T),
    PartitionRecord(partition_id=0, topic_id=T, replicas=(4, 1000), isr=(4, 1000), leader=4),
    PartitionChangeRecord(partition_id=0, topic_id=T, isr=(4,)),
    PartitionChangeRecord(partition_id=0, topic_id=T, isr=(4, 1000), leader=1000),
    PartitionChangeRecord(partition_id=0, topic_id=T, isr=(1000,), leader=-1),
    FenceBrokerRecord(id=4, epoch=0),
]


def _journals() -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []

    def add(node: int, ev: str, **f: Any) -> None:
        out.append({"ts": len(out), "mono": len(out), "node": node, "ev": ev, **f})

    for n in (1, 2, 3):
        add(n, "start", log_start=0, log_end=0)
    add(1, "role", role="candidate", epoch=1)
    add(1, "role", role="leader", epoch=1)
    add(2, "role", role="follower", epoch=1, leader=1)
    add(2, "role", role="leader", epoch=2)
    add(1, "role", role="leader", epoch=1)  # journalled again (e.g. after a restart): still one epoch
    add(3, "role", role="leader", epoch=3)
    add(3, "role", role="leader", epoch=4)
    add(3, "truncate", to=5, reason="diverging")
    add(3, "truncate", to=0, reason="snapshot")
    add(2, "snapshot", action="create", offset=5)
    add(3, "snapshot", action="load", offset=5)
    add(2, "start", log_start=0, log_end=9)
    add(2, "voter_change", action="appended", kind="add", voter=5, offset=9, voters=[1, 2, 3, 5])
    add(2, "voter_change", action="committed", kind="add", voter=5, offset=9)
    add(2, "voter_change", action="refused", error="REQUEST_TIMED_OUT", reason="a change is in progress")
    for o, r in enumerate(RECORDS):
        add(1, "apply", offset=o, type=type(r).__name__, crc=0, value=base64.b64encode(encode(r)).decode())
    add(1, "fence", broker=4, action="fence", reason="session timeout", epoch=0)
    add(1, "fence", broker=1000, action="fence", reason="requested", epoch=1)
    add(4, "broker_state", broker=4, state="FENCED_SELF")
    add(4, "broker_state", broker=4, state="PENDING_CONTROLLED_SHUTDOWN")
    return out


def _history() -> History:
    lines = [
        {"process": 0, "type": "invoke", "f": "create", "value": "a", "time": 1},
        {"process": 0, "type": "ok", "f": "create", "value": "a", "time": 2},
        {"process": "nemesis", "type": "invoke", "f": "start-partition", "value": None, "time": 10},
        {"process": "nemesis", "type": "info", "f": "start-partition", "value": {}, "time": 11},
        {"process": 1, "type": "invoke", "f": "create", "value": "b", "time": 12},
        {"process": 1, "type": "fail", "f": "create", "value": "b", "time": 13},
        {"process": 2, "type": "invoke", "f": "create", "value": "c", "time": 14},
        {"process": 2, "type": "info", "f": "create", "value": "c", "time": 15},
        {"process": "nemesis", "type": "invoke", "f": "stop-partition", "value": None, "time": 2_000_000_010},
        {"process": "nemesis", "type": "info", "f": "stop-partition", "value": None, "time": 2_000_000_020},
    ]
    events = [parse_jsonl_line(json.dumps(x), "<memory>", i + 1, i) for i, x in enumerate(lines)]
    return History(events, "<memory>", "jsonl")


def test_coverage_counts_what_the_run_exercised() -> None:
    cov = coverage(journals_from(_journals()), _history(), {"start-partition": "stop-partition"}, [1, 2, 3, 4, 5])
    assert cov["raft"] == {"leader_epochs": 4, "failovers": 2, "elections_started": 1, "contested_elections": 0,
                           "double_vote_chances": 0, "truncations": 1,
                           "truncation_kinds": {"diverging_epoch_present": 0, "diverging_epoch_absent": 0,
                                                "lost_unflushed_tail": 0, "snapshot": 1, "corrupt_tail": 0,
                                                "diverging": 1, "snapshot_over_divergent_tail": 0},
                           "snapshots_created": 1, "snapshots_loaded": 1, "snapshots_fetched": 0, "restarts": 1,
                           "voter_changes": 1}
    nodes, agents = cov["brokers"]["nodes"], cov["brokers"]["agents"]
    assert (nodes["registrations"], nodes["fences"], nodes["unfences"]) == (1, 1, 1)
    assert (agents["registrations"], agents["fences"], agents["unfences"]) == (1, 0, 1)
    assert nodes["fence_reasons"] == {"session timeout": 1} and agents["fence_reasons"] == {"requested": 1}
    assert (nodes["self_fences"], nodes["controlled_shutdowns"]) == (1, 1)
    assert cov["partitions"] == {"isr_shrinks": 2, "isr_expands": 1, "leader_changes": 2, "leaderless": 1}
    assert cov["faults"]["partition"] == {"windows": 1, "seconds": 2.0, "ok": 0, "fail": 1, "info": 1}
    assert cov["faults"]["none"]["ok"] == 1
    assert headline(cov)["leader epochs"] == 4 and headline(cov)["broker fences"] == 1


def test_truncations_are_split_by_kind_and_contested_elections_counted() -> None:
    """A follower whose last epoch the leader's log holds (ending earlier), one whose last epoch the
    leader's log lacks, a restart that recovered a shorter log than it had appended, an epoch in
    which two nodes stood as candidate, and the voters asked by a second candidate in one epoch."""
    lines: list[dict[str, Any]] = []

    def add(node: int, ev: str, **f: Any) -> None:
        lines.append({"ts": len(lines), "mono": len(lines), "node": node, "ev": ev, **f})

    for n in (1, 2, 3):
        add(n, "start", log_start=0, log_end=0)
    add(1, "role", role="candidate", epoch=5)
    add(2, "role", role="candidate", epoch=5)
    add(3, "role", role="candidate", epoch=6)
    # double-vote chances: node 3 asked by both candidates of epoch 5; node 1 (a candidate of epoch 5
    # itself) asked by node 2. Not: node 2 asked twice by the same candidate, pre-votes, a request
    # refused for its stale epoch
    add(3, "vote", epoch=5, candidate=1, granted=True, pre_vote=False, reason="ok")
    add(3, "vote", epoch=5, candidate=2, granted=False, pre_vote=False, reason="voted for 1")
    add(1, "vote", epoch=5, candidate=2, granted=False, pre_vote=False, reason="voted for 1")
    add(2, "vote", epoch=6, candidate=3, granted=True, pre_vote=False, reason="ok")
    add(2, "vote", epoch=6, candidate=3, granted=True, pre_vote=False, reason="ok")
    add(1, "vote", epoch=7, candidate=2, granted=True, pre_vote=True, reason="ok")
    add(1, "vote", epoch=7, candidate=3, granted=True, pre_vote=True, reason="ok")
    add(2, "vote", epoch=4, candidate=1, granted=False, pre_vote=False, reason="stale epoch")
    add(2, "vote", epoch=4, candidate=3, granted=True, pre_vote=False, reason="ok")
    add(2, "append", base=0, epoch=5, crcs=[1, 2, 3])
    add(2, "truncate", to=1, reason="diverging", diverging_epoch=5, diverging_end_offset=1, last_fetched_epoch=5)
    add(3, "append", base=0, epoch=4, crcs=[1, 2])
    add(3, "truncate", to=1, reason="diverging", diverging_epoch=3, diverging_end_offset=1, last_fetched_epoch=4)
    add(1, "append", base=0, epoch=5, crcs=[7, 8, 3, 4])
    add(1, "start", log_start=0, log_end=2)
    add(1, "append", base=2, epoch=7, crcs=[9])
    add(1, "start", log_start=0, log_end=3)  # an ordinary restart: nothing lost
    add(2, "start", log_start=0, log_end=0)  # wiped storage is not an un-fsynced tail
    # node 3 kept offset 0 in epoch 4 while node 1 committed another entry there (epoch 5): its Fetch
    # is answered with a snapshot, whose load replaces the divergent entry
    add(1, "hw", hw=2, epoch=7)
    add(3, "truncate", to=2, reason="snapshot")
    add(3, "snapshot", action="fetch", offset=2, epoch=5)
    # node 2 (wiped) lags and loads a snapshot over nothing it held: not a divergence
    add(2, "truncate", to=2, reason="snapshot")
    add(2, "snapshot", action="fetch", offset=2, epoch=5)
    # node 2 then writes offset 2 in an epoch of its own; node 1 commits another entry there, and a
    # snapshot node 2 loads (say on restart) replaces it
    add(2, "append", base=2, epoch=6, crcs=[55])
    add(1, "hw", hw=3, epoch=7)
    add(2, "snapshot", action="load", offset=3, epoch=7)
    raft = coverage(journals_from(lines), None, {})["raft"]
    assert raft["truncations"] == 2 and raft["contested_elections"] == 1 and raft["double_vote_chances"] == 2
    assert raft["truncation_kinds"] == {"diverging_epoch_present": 1, "diverging_epoch_absent": 1,
                                        "lost_unflushed_tail": 1, "snapshot": 2, "corrupt_tail": 0,
                                        "snapshot_over_divergent_tail": 2}


def test_the_report_shows_coverage_and_test_all_sums_it(tmp_path: Path) -> None:
    cov = coverage(journals_from(_journals()), _history(), {"start-partition": "stop-partition"}, [1, 2, 3, 4, 5])
    page = "".join(coverage_section(cov))
    assert "<h2>Coverage</h2>" in page and "Client outcomes per fault kind" in page and "session timeout: 1" in page
    assert "Truncations by kind" in page and "truncation_kinds" not in page
    assert coverage_section(None) == []
    runs = []
    for i, epochs in enumerate((4, 9, 6)):
        d = tmp_path / f"r{i}"
        d.mkdir()
        c = json.loads(json.dumps(cov))
        c["raft"]["leader_epochs"] = epochs
        (d / "results.json").write_text(json.dumps({"valid": True, "coverage": c}))
        runs.append(MatrixResult("mixed", "all", i, 0, 60.0, str(d)))
    runs.append(MatrixResult("mixed", "all", 3, 255, 1.0, None, "crashed"))
    table = coverage_table(runs)
    assert table is not None
    console = Console(record=True, width=120)
    console.print(table)
    text = console.export_text()
    assert "coverage over 3 run(s)" in text
    row = next(line for line in text.splitlines() if "leader epochs" in line)
    assert [c.strip() for c in row.split("│")[2:5]] == ["19", "6", "4"]


def test_disk_faults_count_power_losses_damages_and_outcomes() -> None:
    lines = [
        {"process": "nemesis", "type": "ok", "f": "kill", "time": 1, "value": {
            "nodes": ["n1", "n2"], "signal": "SIGKILL", "lost_unfsynced": {
                "n1": {"bytes_dropped": 120, "files_rolled_back": ["p/0.log"], "entries_removed": ["p/9.log"],
                       "entries_restored": []},
                "n2": {"bytes_dropped": 0, "files_rolled_back": [], "entries_removed": [],
                       "entries_restored": ["p/q"]}}}},
        {"process": "nemesis", "type": "ok", "f": "start-disk", "time": 2, "value": {
            "nodes": ["n4", "n5"], "damage": "zero", "zone": "snapshot", "helix": True}},
        {"process": "nemesis", "type": "ok", "f": "start-disk", "time": 3,
         "value": {"nodes": ["n4"], "damage": "wipe"}},
        {"process": "nemesis", "type": "ok", "f": "stop-disk", "time": 4, "value": {
            "restarted": ["n4", "n5"], "formatted": ["n4"], "rebuilt": ["n4"], "refused": [], "outcomes": {
                "n4": {"damage": "zero", "zone": "snapshot", "outcome": "rebuilt"},
                "n5": {"damage": "zero", "zone": "snapshot", "outcome": "served"}}}},
        {"process": "nemesis", "type": "ok", "f": "stop-disk", "time": 4, "value": {
            "restarted": ["n2"], "formatted": [], "rebuilt": [], "refused": ["n2"], "outcomes": {
                "n2": {"damage": "wipe", "zone": None, "outcome": "refused"}}}},
        {"process": "nemesis", "type": "fail", "f": "kill", "time": 5, "value": {"nodes": ["n3"]}},
        {"process": "nemesis", "type": "ok", "f": "kill", "time": 6, "value": {
            "nodes": ["n3"], "signal": "SIGKILL", "lost_unfsynced": {"n3": {
                "bytes_dropped": 0, "files_rolled_back": [], "entries_removed": [], "entries_restored": []}}}},
    ]
    events = [parse_jsonl_line(json.dumps(x), "<memory>", i + 1, i) for i, x in enumerate(lines)]
    cov = coverage(None, History(events, "<memory>", "jsonl"), {})
    assert cov["disk"] == {"power_losses": 3, "power_losses_dropping": 2, "bytes_dropped": 120, "files_rolled_back": 1,
                           "names_removed": 1, "names_restored": 1, "damages": {"wipe": 1, "zero snapshot helix": 2},
                           "restarted": 1, "rebuilt": 1, "refused": 1,
                           "outcomes": {"wipe": {"refused": 1}, "zero snapshot": {"rebuilt": 1, "served": 1}}}
    assert headline(cov)["power losses"] == 3 and headline(cov)["disk refusals"] == 1
    page = "".join(coverage_section(cov))
    assert "<h3>Disk</h3>" in page and "zero snapshot helix: 2" in page
    assert "What became of each damage" in page
    assert "<tr><td>zero snapshot</td><td>1</td><td>0</td><td>1</td><td>0</td></tr>" in page
