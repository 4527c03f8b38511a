"""FanOut: one Raft StateMachine feeding several (a node that is both controller and broker).

Every callback goes to every machine in order; snapshots come from the first machine (the
controller's committed image), and `load_snapshot` reaches all of them.
"""

from __future__ import annotations

from collections.abc import Sequence

from kraftlab.node.raft.ports import Batch, OffsetAndEpoch, Record, StateMachine


class FanOut:
    def __init__(self, primary: StateMachine, *others: StateMachine) -> None:
        self.machines = (primary, *others)

    def handle_load_snapshot(self, snapshot_id: OffsetAndEpoch, records: Sequence[Record]) -> None:
        for m in self.machines:
            m.handle_load_snapshot(snapshot_id, records)

    def handle_commit(self, batches: Sequence[Batch]) -> None:
        for m in self.machines:
            m.handle_commit(batches)

    def handle_leader_change(self, leader_id: int | None, epoch: int, local_is_leader: bool) -> None:
        for m in self.machines:
            m.handle_leader_change(leader_id, epoch, local_is_leader)

    def snapshot_records(self) -> tuple[OffsetAndEpoch, list[Record]] | None:
        taken = self.machines[0].snapshot_records()
        for m in self.machines[1:]:
            m.snapshot_records()  # keep their "since the last snapshot" bookkeeping in step
        return taken
