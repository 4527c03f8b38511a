"""The cluster simulator judges every partition leader choice as Kafka's PartitionChangeBuilder makes
it (node/sim/leader_choice.py): the rules on hand-built partitions, and a controller that chooses
wrong — a deliberately wrong `change` put in for the test — caught in a simulated run."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest

import kraftlab.node.controller.partitions as partitions
from kraftlab.node.metadata.image import BrokerInfo, MetadataImage, PartitionInfo
from kraftlab.node.metadata.records import NO_LEADER, NO_LEADER_CHANGE, PartitionChangeRecord
from kraftlab.node.sim.kraft import KraftSim, SimViolation
from kraftlab.node.sim.leader_choice import leader_verdict


def _image(fenced: tuple[int, ...] = (), shutting_down: tuple[int, ...] = ()) -> MetadataImage:
    image = MetadataImage()
    for b in (1, 2, 3, 4):
        image.brokers[b] = BrokerInfo(b, 10 + b, uuid.UUID(int=b), (), (), None, b in fenced, b in shutting_down)
    return image


def _p(replicas: tuple[int, ...], isr: tuple[int, ...], leader: int, elr: tuple[int, ...] = ()) -> PartitionInfo:
    return PartitionInfo(replicas=replicas, isr=isr, leader=leader, last_known_elr=elr)


CORRECT = [
    ("new partition: first eligible ISR member", _image(fenced=(1,)), None, _p((1, 2, 3), (2, 3), 2)),
    ("the leader stays while eligible", _image(), _p((1, 2, 3), (1, 2, 3), 2), _p((1, 2, 3), (2, 3), 2)),
    ("preferred election", _image(), _p((1, 2, 3), (1, 2, 3), 2), _p((1, 2, 3), (1, 2, 3), 1)),
    ("fenced leader: first eligible in replica order", _image(shutting_down=(2,)),
     _p((3, 1, 2), (1, 2, 3), 1), _p((3, 1, 2), (1, 3), 3)),
    ("the broker a change removes is being fenced", _image(), _p((1, 2, 3), (1, 2), 1), _p((1, 2, 3), (2,), 2)),
    ("nobody eligible: no leader, last ISR member remembered", _image(),
     _p((1, 2), (1,), 1), _p((1, 2), (), NO_LEADER, elr=(1,))),
    ("the last known ELR member leads again", _image(), _p((2, 1), (), NO_LEADER, elr=(1,)), _p((2, 1), (1,), 1)),
    ("unclean: the first eligible replica", _image(fenced=(1,)), _p((1, 3, 2), (), NO_LEADER, elr=(1,)),
     _p((1, 3, 2), (3,), 3)),
]
WRONG = [
    ("new partition led by the second eligible", _image(), None, _p((1, 2, 3), (1, 2, 3), 2)),
    ("an eligible leader moved to a non-preferred replica", _image(),
     _p((1, 2, 3), (1, 2, 3), 2), _p((1, 2, 3), (1, 2, 3), 3)),
    ("a new leader not first in replica order", _image(fenced=(1,)),
     _p((1, 2, 3), (1, 2, 3), 1), _p((1, 2, 3), (2, 3), 3)),
    ("leaderless though an ISR member is eligible", _image(fenced=(1,)),
     _p((1, 2, 3), (1, 2), 1), _p((1, 2, 3), (2,), NO_LEADER)),
    ("leaderless though the last known ELR member is back", _image(),
     _p((1, 2), (), NO_LEADER, elr=(1,)), _p((1, 2), (), NO_LEADER, elr=(1,))),
    ("the wrong ELR member", _image(), _p((1, 2, 3), (), NO_LEADER, elr=(2, 3)), _p((1, 2, 3), (3,), 3)),
    ("unclean, not the first eligible replica", _image(fenced=(1,)),
     _p((1, 2, 3), (), NO_LEADER, elr=(1,)), _p((1, 2, 3), (3,), 3)),
    ("an ELR leader with company in the ISR", _image(), _p((2, 1), (), NO_LEADER, elr=(1,)), _p((2, 1), (1, 2), 1)),
    ("an ELR kept beside a non-empty ISR", _image(), _p((1, 2), (1,), 1), _p((1, 2), (1, 2), 1, elr=(1,))),
]


@pytest.mark.parametrize(("case", "image", "before", "after"), CORRECT, ids=[c[0] for c in CORRECT])
def test_kafkas_choices_pass(case: str, image: MetadataImage, before: PartitionInfo | None,
                             after: PartitionInfo) -> None:
    assert leader_verdict(image, before, after) is None


@pytest.mark.parametrize(("case", "image", "before", "after"), WRONG, ids=[c[0] for c in WRONG])
def test_wrong_choices_are_named(case: str, image: MetadataImage, before: PartitionInfo | None,
                                 after: PartitionInfo) -> None:
    verdict = leader_verdict(image, before, after)
    assert verdict is not None
    assert verdict.startswith(("ISR", "no leader" if after.leader == NO_LEADER else f"leader {after.leader}"))


def _last_eligible(original: Callable[..., PartitionChangeRecord | None]) -> Callable[..., Any]:
    """`change` electing the last eligible ISR member instead of the first."""
    def wrong(image: MetadataImage, topic_id: uuid.UUID, partition_id: int, **kw: Any) -> PartitionChangeRecord | None:
        rec = original(image, topic_id, partition_id, **kw)
        if rec is None or rec.leader in (NO_LEADER, NO_LEADER_CHANGE):
            return rec
        p = image.topics[topic_id].partitions[partition_id]
        isr = rec.isr if rec.isr is not None else p.isr
        others = [b for b in isr if b != rec.leader and b != kw.get("ineligible") and image.is_usable(b)]
        return replace(rec, leader=others[-1]) if others else rec
    return wrong


def _moves_eligible_leader(original: Callable[..., PartitionChangeRecord | None]) -> Callable[..., Any]:
    """`change` moving leadership away from a leader that stays an eligible ISR member."""
    def wrong(image: MetadataImage, topic_id: uuid.UUID, partition_id: int, **kw: Any) -> PartitionChangeRecord | None:
        rec = original(image, topic_id, partition_id, **kw)
        p = image.topics[topic_id].partitions[partition_id]
        if rec is None or rec.leader != NO_LEADER_CHANGE or p.leader == NO_LEADER:
            return rec
        isr = rec.isr if rec.isr is not None else p.isr
        others = [b for b in isr if b != p.leader and image.is_usable(b)]
        return replace(rec, leader=others[0]) if others else rec
    return wrong


@pytest.mark.parametrize("wrong", [_last_eligible, _moves_eligible_leader])
def test_a_controller_choosing_the_wrong_leader_is_caught(wrong: Callable[..., Any],
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(partitions, "change", wrong(partitions.change))
    sim = KraftSim(seed=1, brokers=4)
    with pytest.raises(SimViolation, match=r"PartitionChangeRecord of \w+-\d+: .*leader"):
        sim.run(fault_ms=15_000, settle_ms=15_000)
