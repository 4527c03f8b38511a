"""The trivial application: a state machine that counts committed records and keeps a running CRC of
them (`CommitLog`), and `CommitLogApplication`, a node process with no controller or broker logic —
what tests of Raft alone run."""

import logging
from collections.abc import Sequence

from kraftlab.node.process.seam import NodeContext
from kraftlab.node.raft.ports import Batch, OffsetAndEpoch, Record, StateMachine, record_crc

log = logging.getLogger("kraft-node")


class CommitLog:
    """The trivial state machine: counts committed records and keeps a running CRC of them.

    Used by tests and by `CommitLogApplication` (a process with no controller or broker logic)."""

    def __init__(self) -> None:
        self.applied_end = 0
        self.records = 0
        self.digest = 0
        self.leader: tuple[int | None, int, bool] = (None, 0, False)

    def handle_load_snapshot(self, snapshot_id: OffsetAndEpoch, records: Sequence[Record]) -> None:
        self.applied_end = snapshot_id.offset
        self.records = len(records)
        self.digest = 0

    def handle_commit(self, batches: Sequence[Batch]) -> None:
        for batch in batches:
            if not batch.control:
                for record in batch.records:
                    self.records += 1
                    self.digest = record_crc(
                        self.digest.to_bytes(4, "big"), record_crc(record.key, record.value).to_bytes(4, "big")
                    )
            self.applied_end = batch.next_offset

    def handle_leader_change(self, leader_id: int | None, epoch: int, local_is_leader: bool) -> None:
        self.leader = (leader_id, epoch, local_is_leader)

    def snapshot_records(self) -> tuple[OffsetAndEpoch, list[Record]] | None:
        return None


class CommitLogApplication:
    """An application with no controller or broker logic: `CommitLog` and nothing else."""

    def __init__(self, context: NodeContext) -> None:
        self._machine = CommitLog()

    @property
    def state_machine(self) -> StateMachine:
        return self._machine

    def after_step(self, now_ms: int) -> None:
        return None

    def tick(self, now_ms: int) -> int | None:
        return None

    async def stop(self) -> None:
        return None
