"""Random operation sequences against 3 controllers: after every step the standbys' images equal
the active one's, the image survives a snapshot round trip and a full replay of the log, and the
partition invariants hold (leader in ISR, ISR within replicas, no fenced broker in an ISR,
epochs never going back)."""

from __future__ import annotations

import uuid

from controller_harness import Harness
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.alter_partition_reassignments.v0.request import (
    AlterPartitionReassignmentsRequest,
    ReassignablePartition,
    ReassignableTopic,
)
from kio.schema.elect_leaders.v2.request import ElectLeadersRequest
from kio.schema.unregister_broker.v0.request import UnregisterBrokerRequest

from kraftlab.node.controller.ports import ControllerConfig
from kraftlab.node.controller.quorum_controller import QuorumController
from kraftlab.node.metadata.image import MetadataImage

BROKERS = (1, 2, 3, 4)
ops = st.lists(
    st.tuples(
        st.sampled_from(
            [
                "register",
                "heartbeat",
                "shutdown",
                "fence",
                "create",
                "delete",
                "shrink",
                "expand",
                "reassign",
                "elect",
                "silence",
                "unregister",
                "failover",
            ]
        ),
        st.sampled_from(BROKERS),
        st.integers(min_value=0, max_value=5),
    ),
    min_size=5,
    max_size=40,
)


def _check(h: Harness, seen_epochs: dict[tuple[str, int], tuple[int, int]]) -> None:
    active = h.active()
    img = active.committed_image
    for c in h.ctrls.values():
        assert c.committed_offset == active.committed_offset
        assert c.committed_image == img
    rebuilt = MetadataImage.from_records(img.to_records())
    assert rebuilt == img and rebuilt.digest() == img.digest()
    fresh = QuorumController(ControllerConfig(node_id=99, cluster_id="x"), h.q.writer(99))
    fresh.handle_commit([b for b in h.q.batches if b.next_offset <= h.q.committed_end])
    assert fresh.committed_image == img
    for topic, pid, p in img.partitions():
        assert set(p.isr) <= set(p.replicas)
        if p.leader != -1:
            assert p.leader in p.isr
        for b in (*p.isr, *([p.leader] if p.leader != -1 else [])):
            assert b in img.brokers and not img.brokers[b].fenced
        key = (topic.name + str(topic.topic_id), pid)
        le, pe = seen_epochs.get(key, (0, 0))
        assert p.leader_epoch >= le and p.partition_epoch >= pe
        seen_epochs[key] = (p.leader_epoch, p.partition_epoch)


@settings(max_examples=40)
@given(ops)
def test_random_operations_keep_invariants(program: list[tuple[str, int, int]]) -> None:
    h = Harness(controllers=3)
    epochs: dict[int, int] = {}
    seen: dict[tuple[str, int], tuple[int, int]] = {}
    leader = 1
    preamble = [("register", b, 0) for b in (1, 2, 3)] + [("heartbeat", b, 0) for b in (1, 2, 3)]
    preamble += [("create", 1, n) for n in (0, 1, 3)]
    for op, b, n in preamble + program:
        img = h.image()
        if op == "register":
            r = h.run(h.registration(b, incarnation=uuid.UUID(int=b * 100 + n)))
            if r.error_code == 0:
                epochs[b] = r.broker_epoch
        elif op in ("heartbeat", "shutdown", "fence") and b in epochs:
            r = h.heartbeat(b, epochs[b], want_shut_down=op == "shutdown", want_fence=op == "fence")
        elif op == "create":
            h.create(f"t{n}", partitions=1 + n % 3, rf=1 + n % 2)
        elif op == "delete":
            h.delete(f"t{n}")
        elif op in ("shrink", "expand"):
            t = img.topic(f"t{n}")
            if t is not None:
                p = t.partitions[0]
                if p.leader in epochs:
                    isr = [p.leader] if op == "shrink" else [r for r in p.replicas if img.is_usable(r)]
                    if p.leader in isr:
                        h.alter_isr(p.leader, epochs[p.leader], f"t{n}", 0, isr)
        elif op == "reassign" and img.topic(f"t{n}") is not None:
            target = tuple(sorted({b, BROKERS[(b + n) % 4]}))
            if all(x in img.brokers for x in target):
                h.run(
                    AlterPartitionReassignmentsRequest(
                        timeout=0,
                        topics=(
                            ReassignableTopic(
                                name=f"t{n}", partitions=(ReassignablePartition(partition_index=0, replicas=target),)
                            ),
                        ),
                    )
                )
        elif op == "elect":
            h.run(ElectLeadersRequest(election_type=0, topic_partitions=None, timeout=0))
        elif op == "silence":
            h.tick(3_000 * (n + 1))
        elif op == "unregister":
            h.run(UnregisterBrokerRequest(broker_id=b))
            epochs.pop(b, None)
        elif op == "failover":
            leader = leader % 3 + 1
            h.elect(leader, keep_uncommitted=n % 2 == 0)
            h.tick(0)
        _check(h, seen)
