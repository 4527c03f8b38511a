"""An in-process fake Raft for tests of controllers and brokers: one shared log, no network.

`FakeQuorum` holds a single log. `writer(node)` is a MetadataWriter that appends only while
`node` is the leader (else NotLeader). `commit()` makes everything appended committed and
delivers it, in order and once, to every attached StateMachine (controllers and broker
replays alike). `elect(node)` starts a new epoch: by default it drops the uncommitted tail
(the old leader's writes a new leader never saw), appends the new leader's control batch, and
tells every attached machine; `depose()` leaves the quorum leaderless.
"""

from __future__ import annotations

from collections.abc import Sequence

from kraftlab.node.controller.ports import NotLeader
from kraftlab.node.raft.ports import Batch, Record, StateMachine

LEADER_CHANGE_KEY = b"\x00\x00\x00\x02"  # control record key: version 0, type 2 (LeaderChange)


class _Writer:
    def __init__(self, quorum: FakeQuorum, node_id: int) -> None:
        self.quorum = quorum
        self.node_id = node_id

    def append(self, records: Sequence[Record], now_ms: int) -> int:
        q = self.quorum
        if q.leader != self.node_id or q.frozen:
            raise NotLeader()
        return q.append_batch(tuple(records), control=False, now_ms=now_ms)

    def next_offset(self) -> int:
        return self.quorum.end_offset


class FakeQuorum:
    def __init__(self) -> None:
        self.batches: list[Batch] = []
        self.epoch = 0
        self.leader: int | None = None
        self.committed_end = 0
        self.frozen = False
        """While True the leader refuses appends (as a leader that lost its quorum would)."""
        self._machines: dict[str, StateMachine] = {}
        self._node_of: dict[str, int] = {}
        self._delivered: dict[str, int] = {}

    @property
    def end_offset(self) -> int:
        return self.batches[-1].next_offset if self.batches else 0

    def writer(self, node_id: int) -> _Writer:
        return _Writer(self, node_id)

    def attach(self, name: str, node_id: int, machine: StateMachine) -> None:
        self._machines[name] = machine
        self._node_of[name] = node_id
        self._delivered[name] = 0

    def append_batch(self, records: tuple[Record, ...], *, control: bool, now_ms: int = 0) -> int:
        base = self.end_offset
        self.batches.append(Batch(base, self.epoch, records, control=control, append_time_ms=now_ms))
        return base

    def commit(self, upto: int | None = None) -> None:
        """Commit everything (or up to the exclusive offset `upto`) and deliver it."""
        end = self.end_offset if upto is None else upto
        self.committed_end = max(self.committed_end, end)
        for name in self._machines:
            self.deliver(name)

    def deliver(self, name: str) -> None:
        i = self._delivered[name]
        batches = []
        while i < len(self.batches) and self.batches[i].next_offset <= self.committed_end:
            batches.append(self.batches[i])
            i += 1
        self._delivered[name] = i
        if batches:
            self._machines[name].handle_commit(batches)

    def elect(self, node_id: int, *, keep_uncommitted: bool = False) -> None:
        if not keep_uncommitted:
            self.batches = [b for b in self.batches if b.next_offset <= self.committed_end]
        self.epoch += 1
        self.leader = node_id
        self.frozen = False
        for name, machine in self._machines.items():
            machine.handle_leader_change(node_id, self.epoch, self._node_of[name] == node_id)
        self.append_batch((Record(LEADER_CHANGE_KEY, b""),), control=True)

    def depose(self) -> None:
        self.epoch += 1
        self.leader = None
        for machine in self._machines.values():
            machine.handle_leader_change(None, self.epoch, False)
