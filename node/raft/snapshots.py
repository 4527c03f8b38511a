"""Snapshots (KIP-630): the FetchSnapshot handlers of both sides, creating a snapshot of the state
machine at a committed offset, and installing one fetched from the leader.

The log behind a new snapshot is kept as the retention policy says (node.raft.retention). A
follower whose Fetch position the leader's log no longer covers is told the leader's snapshot
id; it fetches the snapshot in chunks (FetchSnapshot), validates and freezes it, replaces its log
by it and hands it to the state machine. Fetched bytes that fail validation are dropped and the
fetch starts over.
"""

from __future__ import annotations

from collections.abc import Sequence

from kraftlab.node.raft import messages as m
from kraftlab.node.raft.context import CoreContext
from kraftlab.node.raft.membership.records import KRAFT_VERSION_0, kraft_version_record, voters_record
from kraftlab.node.raft.output import LoadSnapshot, Output, RaftSafetyError
from kraftlab.node.raft.ports import OffsetAndEpoch, Record
from kraftlab.node.raft.retention import retained_log_start
from kraftlab.node.raft.states import Follower, Leader

BOOTSTRAP_CHECKPOINT = OffsetAndEpoch(0, 0)
"""KIP-853's bootstrap checkpoint (`0000…-0000….checkpoint`): the first voter set, never fetched."""


class Snapshots(CoreContext):
    def create_snapshot(self, snapshot_id: OffsetAndEpoch, records: Sequence[Record], now: int) -> Output:
        """Store a snapshot of the state machine at a committed, applied offset; delete the log
        behind it as far as the retention policy asks, and the older snapshots."""
        if snapshot_id.offset > self._applied or snapshot_id.offset > self._hw:
            raise ValueError(f"snapshot {snapshot_id} beyond the applied/committed offset {self._applied}/{self._hw}")
        self._begin()
        latest = self.snapshots.latest()
        if latest is None or snapshot_id.offset > latest.offset:
            self.snapshots.write(snapshot_id, records, now, self._membership_records(snapshot_id.offset))
            self._event("snapshot", action="create", offset=snapshot_id.offset, epoch=snapshot_id.epoch)
            self._apply_retention(snapshot_id, now)
            self._delete_snapshots_before(snapshot_id)
        return self._end(now)

    def _apply_retention(self, snapshot_id: OffsetAndEpoch, now: int) -> None:
        """Delete the segments the retention policy lets go behind the snapshot (node.raft.retention)."""
        log = self.log
        size = self.snapshots.size(snapshot_id)
        deletion = retained_log_start(log.segments(), snapshot_id.offset, size, self.config.retention, now)
        old_start = log.start_offset()
        if deletion is None or deletion.log_start <= old_start:
            return
        log.delete_before(deletion.log_start)
        self._event("retention", log_start=log.start_offset(), **{"from": old_start}, reason=deletion.reason)

    def _membership_records(self, end_offset: int) -> list[Record]:
        """What a snapshot ending at `end_offset` carries after its header (KIP-853): the
        kraft.version and the voter set in force at its last offset; nothing for a static quorum."""
        control = self.control
        version = control.kraft_version_at(end_offset - 1)
        if version == KRAFT_VERSION_0:
            return []
        return [kraft_version_record(version), voters_record(control.voters_at(end_offset - 1))]

    def _on_fetch_snapshot_request(self, env: m.Envelope, req: m.FetchSnapshotRequest, now: int) -> None:
        error = self._not_leader_error(req.epoch)
        sid = req.snapshot_id
        if error is None and (sid not in self.snapshots.ids() or sid == BOOTSTRAP_CHECKPOINT):
            error = m.Errors.SNAPSHOT_NOT_FOUND  # the bootstrap checkpoint is never replicated (KIP-853)
        size = self.snapshots.size(sid) if error is None else 0
        if error is None and not 0 <= req.position < size:
            error = m.Errors.POSITION_OUT_OF_RANGE  # Kafka's: a position with no byte of the snapshot at it
        if error is None and req.max_bytes <= 0:
            error = m.Errors.INVALID_REQUEST
        if error is not None:
            # Kafka's refusal names no snapshot (`snapshot_id` -1/-1), size and position 0, no bytes.
            self._reply(env, m.FetchSnapshotResponse(error, self.epoch, self.leader_id))
            return
        state = self.state
        assert isinstance(state, Leader)
        progress = state.progress_of(req.replica_id, req.replica_directory_id)
        if progress is not None:
            progress.last_fetch_ms = now
        chunk = self.snapshots.read_bytes(sid, req.position, min(req.max_bytes, self.config.fetch_snapshot_max_bytes))
        self._reply(
            env, m.FetchSnapshotResponse(m.Errors.NONE, state.epoch, self.node_id, sid, size, req.position, chunk)
        )

    def _on_fetch_snapshot_response(self, env: m.Envelope, resp: m.FetchSnapshotResponse, now: int) -> None:
        if not self._take_inflight(env) or self._observe(resp.epoch, resp.leader_id, now, env.src):
            return
        state = self._following(env, resp.epoch)
        if state is None or state.snapshot is None:
            return
        fetch = state.snapshot
        if resp.error != m.Errors.NONE or resp.snapshot_id != fetch.snapshot_id or resp.position != fetch.position:
            state.snapshot = None  # start over from a Fetch, which names the leader's current snapshot
            state.retry_at = now + self.config.retry_backoff_ms
            return
        state.fetched(now, self.config.fetch_timeout_ms)
        if resp.data:
            self.snapshots.write_bytes(fetch.snapshot_id, fetch.position, resp.data)
            fetch.position += len(resp.data)
        if fetch.position >= resp.size:
            state.snapshot = None
            self._install_snapshot(fetch.snapshot_id, state, now)

    def _install_snapshot(self, sid: OffsetAndEpoch, state: Follower, now: int) -> None:
        """A follower replaces its log and state by a snapshot fetched from the leader. Fetched bytes
        that fail validation are dropped (the store does so) and the fetch starts over: the next
        Fetch names the leader's snapshot again (damage in transit or in the leader's copy is not a
        reason to stop)."""
        if isinstance(self.state, Leader):
            raise RaftSafetyError("a leader never loads a snapshot")
        try:
            self.snapshots.freeze(sid)
        except ValueError as e:
            self._event(
                "corruption",
                path=f"fetched snapshot {sid.offset}-{sid.epoch}",
                offset=sid.offset,
                reason=str(e),
                below_hw=False,
            )
            state.retry_at = now + self.config.retry_backoff_ms
            return
        self._event("snapshot", action="fetch", offset=sid.offset, epoch=sid.epoch)
        old_end = self.log.end_offset()
        self.log.reset_to_snapshot(sid)
        self.control.reset_to_snapshot(self.snapshots.read_control_records(sid))
        self._journal_voters("snapshot")
        self._durable = sid.offset  # the snapshot is durable and the log now starts (and ends) there
        self._event("truncate", to=sid.offset, **{"from": old_end}, reason="snapshot")
        self._out.updates.append(LoadSnapshot(sid, self.snapshots.read_records(sid)))
        self._event("snapshot", action="load", offset=sid.offset, epoch=sid.epoch)
        self._applied = sid.offset
        self._delete_snapshots_before(sid)
        if sid.offset > self._hw:
            self._set_hw(sid.offset)

    def _delete_snapshots_before(self, sid: OffsetAndEpoch) -> None:
        if self.journal:
            for old in self.snapshots.ids():
                if old < sid:
                    self._event("snapshot", action="delete", offset=old.offset, epoch=old.epoch)
        self.snapshots.delete_before(sid)
