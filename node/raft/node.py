"""RaftNode: a thin sans-IO wrapper that drives a StateMachine from the core's outputs.

It forwards every step to `RaftCore`, hands the step's updates (snapshot loads, commits,
leader changes) to the StateMachine in order, and takes a snapshot through the core once
`snapshot_every_records` records were committed since the last one. The server and the
simulator both drive this class; they send `Output.messages` and journal `Output.events`.
"""

from __future__ import annotations

from collections.abc import Sequence

from kraftlab.node.raft import messages as m
from kraftlab.node.raft.core import Commit, LeaderChange, LoadSnapshot, Output, RaftCore
from kraftlab.node.raft.ports import OffsetAndEpoch, Record, StateMachine


class RaftNode:
    def __init__(self, core: RaftCore, machine: StateMachine, snapshot_every_records: int = 0) -> None:
        self.core = core
        self.machine = machine
        self.snapshot_every_records = snapshot_every_records
        self._since_snapshot = 0
        self.machine_error: Exception | None = None

    def start(self, now: int) -> Output:
        return self._apply(self.core.start(now), now)

    def handle(self, envelope: m.Envelope, now: int) -> Output:
        return self._apply(self.core.handle(envelope, now), now)

    def tick(self, now: int) -> Output:
        return self._apply(self.core.tick(now), now)

    def next_offset(self) -> int:
        return self.core.next_offset()

    def append(self, records: Sequence[Record], now: int) -> tuple[int, Output]:
        base, out = self.core.append(records, now)
        return base, self._apply(out, now)

    def resign(self, now: int) -> Output:
        return self._apply(self.core.resign(now), now)

    def flushed(self, now: int) -> Output:
        return self._apply(self.core.flushed(now), now)

    def _apply(self, out: Output, now: int) -> Output:
        try:
            taken = self._feed(out)
        except Exception as e:
            # The state machine no longer follows the committed log: a driver must stop the node
            # (fail-stop), never let it keep voting or leading. Raised as is (the simulator's zoo
            # tells a machine's refusal by its type); `machine_error` says where it came from.
            self.machine_error = e
            raise
        if taken is not None:
            snapshot_id, records = taken
            if self.core.bugs.on("snapshot-id-off-by-one"):
                # BUG ZOO: snapshot-id-off-by-one (KAFKA-14618) — the id names the last included
                # offset instead of the exclusive end offset.
                snapshot_id = OffsetAndEpoch(snapshot_id.offset - 1, snapshot_id.epoch)
            out.merge(self.core.create_snapshot(snapshot_id, records, now))
        return out

    def _feed(self, out: Output) -> tuple[OffsetAndEpoch, list[Record]] | None:
        """Hand a step's updates to the state machine; the snapshot to take now, if one is due."""
        machine = self.machine
        for update in out.updates:
            if isinstance(update, Commit):
                machine.handle_commit(update.batches)
                self._since_snapshot += sum(len(b.records) for b in update.batches)
            elif isinstance(update, LoadSnapshot):
                machine.handle_load_snapshot(update.snapshot_id, update.records)
                self._since_snapshot = 0
            elif isinstance(update, LeaderChange):
                machine.handle_leader_change(update.leader_id, update.epoch, update.local_is_leader)
        if self.snapshot_every_records and self._since_snapshot >= self.snapshot_every_records:
            self._since_snapshot = 0
            return machine.snapshot_records()
        return None
