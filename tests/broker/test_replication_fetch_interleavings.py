"""Follower fetches under arbitrary interleavings (hypothesis, seeded): partitions appear while the
followers' Fetches are parked, each broker learns of them at its own moment, produces come at any
time, and the answers between any two brokers arrive in any order (more freely than a connection,
which keeps request order). A follower's log stays a prefix of its leader's (nothing applied twice,
nothing skipped), and once the image has reached everyone every acks=all produce is acknowledged
and the replicas agree — the superseding Fetch of a newly followed partition loses nothing."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode
from replication_helpers import batch, decoded, image_with, manager, one_partition, produce, with_brokers

from kraftlab.node.broker.replication import ClientReply, FetchFromLeader, ReplicaManager
from kraftlab.node.metadata.image import MetadataImage, PartitionInfo
from kraftlab.node.storage.partition.manager import LogManager

BROKERS = (1, 2, 3)
MAX_PARTITIONS = 4


class Mesh:
    """Brokers' cores whose follower traffic waits in per-pair queues until a step delivers it."""

    def __init__(self, tmp_path: Path, rng: random.Random) -> None:
        self.m = {i: manager(tmp_path, i) for i in BROKERS}
        self.rng = rng
        self.parts: dict[int, PartitionInfo] = {}
        self.queues: dict[tuple[int, int], list[tuple[Any, ...]]] = {}
        self.replies: dict[Any, Any] = {}
        self.now = 0

    def image(self) -> MetadataImage:
        return with_brokers(image_with(partitions=dict(self.parts)))

    def grow(self) -> None:
        p = len(self.parts)
        self.parts[p] = PartitionInfo(BROKERS, BROKERS, leader=BROKERS[p % 3], leader_epoch=0)

    def learn(self, broker: int) -> None:
        self.m[broker].apply_image(self.image(), self.now)
        self._route(broker)

    def produce(self, partition: int, value: str) -> None:
        if partition not in self.parts:
            return
        leader = self.parts[partition].leader
        self.m[leader].handle(value, produce(batch(value), acks=-1, partition=partition), self.now)
        self._route(leader)

    def deliver(self, pick: int) -> None:
        ready = [k for k, q in sorted(self.queues.items()) if q]
        if not ready:
            return
        src, dst = ready[pick % len(ready)]
        queue = self.queues[(src, dst)]
        item = queue.pop(self.rng.randrange(len(queue)))  # any order, not only the connection's
        m = self.m[dst]
        if item[0] == "fetch":
            m.handle(("fetch", src, item[1]), item[2], self.now)
        else:
            m.fetcher.on_response(item[1], item[2], self.now)
            m.fetcher.tick(self.now)  # as the node does after each answer
        self._route(dst)

    def tick(self, ms: int) -> None:
        self.now += ms
        for i, m in self.m.items():
            m.tick(self.now)
            self._route(i)

    def _route(self, i: int) -> None:
        for o in self.m[i].take_outputs():
            if isinstance(o, FetchFromLeader):
                self.queues.setdefault((i, o.leader), []).append(("fetch", o.token, o.request))
            elif isinstance(o, ClientReply) and isinstance(o.token, tuple):
                _, follower, token = o.token
                self.queues.setdefault((i, follower), []).append(("answer", token, o.response))
            elif isinstance(o, ClientReply):
                self.replies[o.token] = o.response


def log_values(m: ReplicaManager, partition: int) -> list[str]:
    p = m.partitions.get(("t", partition))
    if p is None or not p.log.log_end_offset:
        return []
    return [v for _, _, v in decoded(p.log.read(0, 1 << 20))]


def assert_prefixes(mesh: Mesh) -> None:
    for pid, info in mesh.parts.items():
        leader = log_values(mesh.m[info.leader], pid)
        for f in BROKERS:
            mine = log_values(mesh.m[f], pid)
            assert mine == leader[: len(mine)], f"broker {f}, partition {pid}: {mine} not a prefix of {leader}"


ACTIONS = st.one_of(
    st.tuples(st.just("grow"), st.just(0)),
    st.tuples(st.just("learn"), st.sampled_from(BROKERS)),
    st.tuples(st.just("produce"), st.integers(0, MAX_PARTITIONS - 1)),
    st.tuples(st.just("deliver"), st.integers(0, 8)),
    st.tuples(st.just("tick"), st.sampled_from([1, 10, 60, 200])),
)


@settings(max_examples=30, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])  # fmt: skip
@given(steps=st.lists(ACTIONS, min_size=5, max_size=60), seed=st.integers(0, 2**16))
def test_followers_never_apply_twice_and_every_ack_arrives(tmp_path_factory: Any, steps: list[tuple[str, int]],
                                                            seed: int) -> None:  # fmt: skip
    mesh = Mesh(tmp_path_factory.mktemp("mesh"), random.Random(seed))
    try:
        mesh.grow()
        for b in BROKERS:
            mesh.learn(b)
        sent = []
        for n, (action, arg) in enumerate(steps):
            if action == "grow" and len(mesh.parts) < MAX_PARTITIONS:
                mesh.grow()
            elif action == "learn":
                mesh.learn(arg)
            elif action == "produce" and arg in mesh.parts and ("t", arg) in mesh.m[mesh.parts[arg].leader].partitions:
                mesh.produce(arg, f"v{n}")
                sent.append((f"v{n}", arg))
            elif action == "deliver":
                mesh.deliver(arg)
            elif action == "tick":
                mesh.tick(arg)
            assert_prefixes(mesh)
        for b in BROKERS:  # the image reaches everyone; then time and deliveries until all is answered
            mesh.learn(b)
        for _ in range(400):
            while any(mesh.queues.values()):
                mesh.deliver(mesh.rng.randrange(9))
                assert_prefixes(mesh)
            if len(mesh.replies) == len(sent):
                break
            mesh.tick(50)
        assert sorted(mesh.replies) == sorted(v for v, _ in sent)
        assert all(one_partition(r).error_code == ErrorCode.none for r in mesh.replies.values())
        for pid in mesh.parts:
            logs = {b: log_values(mesh.m[b], pid) for b in BROKERS}
            assert logs[1] == logs[2] == logs[3] == [v for v, p in sent if p == pid]
    finally:  # each example opens every broker's partition logs: close them, or a run leaks ~800 fds
        for m in mesh.m.values():
            assert isinstance(m.store, LogManager)
            m.store.close()
