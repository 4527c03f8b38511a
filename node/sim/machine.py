"""A trivial StateMachine for the simulator and tests: counts data records and chains their CRCs.

Its state after applying the committed prefix up to offset X is (count, digest); two nodes
that applied different committed data at any offset end with different digests, which is what
the simulator's ConsistentCommittedData check compares (including across snapshot loads).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence

import crc32c

from kraftlab.node.raft.ports import Batch, OffsetAndEpoch, Record

_STATE = struct.Struct(">QIQ")
STATE_KEY = b"counter-state"


class CounterMachine:
    def __init__(self) -> None:
        self.count = 0
        self.digest = 0
        self.applied = 0  # exclusive end offset of what was applied
        self.last_epoch = 0
        self.snapshot_offset = 0
        self.leader: tuple[int | None, int, bool] = (None, 0, False)
        # Hooks for the simulator's invariant checks: (offset, digest) after each batch / snapshot load.
        self.on_applied: Callable[[int, int], None] | None = None
        self.on_snapshot_load: Callable[[OffsetAndEpoch], None] | None = None

    def handle_load_snapshot(self, snapshot_id: OffsetAndEpoch, records: Sequence[Record]) -> None:
        if self.on_snapshot_load is not None:
            self.on_snapshot_load(snapshot_id)
        state = [r for r in records if r.key == STATE_KEY]
        if len(state) != 1 or state[0].value is None:
            raise ValueError("snapshot without exactly one counter-state record")
        self.count, self.digest, _ = _STATE.unpack(state[0].value)
        self.applied = self.snapshot_offset = snapshot_id.offset
        self.last_epoch = snapshot_id.epoch
        if self.on_applied is not None:
            self.on_applied(self.applied, self.digest)

    def handle_commit(self, batches: Sequence[Batch]) -> None:
        for batch in batches:
            if batch.base_offset != self.applied:
                raise ValueError(f"commit at {batch.base_offset} while applied up to {self.applied}")
            if not batch.control:
                for record in batch.records:
                    self.count += 1
                    self.digest = crc32c.crc32c(record.value or b"", self.digest)
            self.applied = batch.next_offset
            self.last_epoch = batch.epoch
            if self.on_applied is not None:
                self.on_applied(self.applied, self.digest)

    def handle_leader_change(self, leader_id: int | None, epoch: int, local_is_leader: bool) -> None:
        self.leader = (leader_id, epoch, local_is_leader)

    def snapshot_records(self) -> tuple[OffsetAndEpoch, list[Record]] | None:
        if self.applied <= self.snapshot_offset:
            return None
        self.snapshot_offset = self.applied
        value = _STATE.pack(self.count, self.digest, self.applied)
        return OffsetAndEpoch(self.applied, self.last_epoch), [Record(STATE_KEY, value)]
