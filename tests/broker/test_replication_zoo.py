"""The data-path bugs of the zoo (node.bugs, layer broker) in the replication core wired in memory:
each scenario is a short deterministic script (a leader change with records in flight, an ISR below
min.insync.replicas), run once with the bug planted and once without; the brokers' journals are
judged by the data-plane journal rules (checker.dataplane), which catch the bug and nothing else,
and hold on the correct core. End to end, `kraftlab zoo <bug>` hunts the same bugs with the queue
workload under random faults."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kio.schema.errors import ErrorCode
from replication_helpers import Net, batch, one_partition, produce

from kraftlab.checker.dataplane import check_dataplane
from kraftlab.checker.journal import journals_from
from kraftlab.node.bugs import BugSet, bugs_in
from kraftlab.node.metadata.image import PartitionInfo


def _judged(net: Net) -> dict[str, Any]:
    clock = itertools.count(1)
    entries = []
    for node, ev, fields in net.events:
        n = next(clock)
        entries.append({"ts": n, "mono": n, "node": node, "ev": ev, **fields})
    return check_dataplane(journals_from(entries))


def _leader_change_after_acks(net: Net) -> None:
    """Leader 1 acknowledges a batch (acks=all) and its followers learn the HW; a second batch is
    acknowledged but the followers have not fetched since (their HW lags); leadership moves to 2."""
    net.image({0: PartitionInfo((1, 2, 3), (1, 2, 3), leader=1, leader_epoch=3)})
    net.m[1].handle("p", produce(batch("a", "b"), acks=-1), 0)
    net.step(10)
    net.step(600)  # the parked follower fetches return: the followers hold HW 2
    net.m[1].handle("q", produce(batch("c"), acks=-1), 700)
    net.step(710, rounds=1)  # fetched by both followers, acknowledged; the followers' HW is still 2
    assert one_partition(net.replies["q"]).error_code == ErrorCode.none
    net.image({0: PartitionInfo((1, 2, 3), (2, 3), leader=2, leader_epoch=4)})
    net.step(720)


def _ack_with_a_lone_leader(net: Net) -> None:
    net.image({0: PartitionInfo((1, 2, 3), (1,), leader=1, leader_epoch=5)})
    net.m[1].handle("p", produce(batch("a"), acks=-1), 0)
    net.step(10)


SCENARIOS: dict[str, tuple[Callable[[Net], None], str]] = {
    "hw-back-on-leader-change": (_leader_change_after_acks, "HighWatermarkMonotonic"),
    "truncate-to-hw-on-leader": (_leader_change_after_acks, "AckedBelowLaterLeaderEnd"),
    "acks-all-below-min-insync": (_ack_with_a_lone_leader, "AckedWithMinIsr"),
}


@pytest.mark.parametrize("bug", sorted(SCENARIOS))
def test_data_path_bug_is_caught_by_the_journal_rules(bug: str, tmp_path: Path) -> None:
    script, rule = SCENARIOS[bug]
    net = Net(tmp_path, min_isr=2, bugs=BugSet.of(bug))
    script(net)
    res = _judged(net)
    assert res["valid"] is False and {a["type"] for a in res["anomalies"]} == {rule}, res["explanation"]


@pytest.mark.parametrize("bug", sorted(SCENARIOS))
def test_the_same_script_on_the_correct_core_holds(bug: str, tmp_path: Path) -> None:
    script, _ = SCENARIOS[bug]
    net = Net(tmp_path, min_isr=2)
    script(net)
    res = _judged(net)
    assert res["valid"] is True, res["explanation"]
    assert set(res["checked"]) >= {"HighWatermarkMonotonic"}


def test_every_data_path_bug_has_a_scenario() -> None:
    data_path = {b.name for b in bugs_in("broker") if not b.simulated}
    assert data_path == set(SCENARIOS)
