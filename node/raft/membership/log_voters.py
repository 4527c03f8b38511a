"""The voter set and kraft.version as values over the log (Kafka's KRaftControlRecordStateMachine).

`ControlRecordState` reads the KRaftVersion and KRaftVoters control records a node's log holds —
from the bootstrap checkpoint or a snapshot, then from every appended batch — and answers which
voter set and which kraft.version are in force at any offset. As KIP-853 has it, a VotersRecord
takes effect as soon as it is APPENDED, not when it commits; when the log is truncated below it,
the set it brought is rolled back. With a static quorum (kraft.version 0, no VotersRecord) the
set is the configured one at every offset.

A voter is known by (node id, directory id): `holds_vote` is how a leader or a voter decides
whether a replica is the voter the set names — a replaced disk (same id, new directory id) is not.
"""

from __future__ import annotations

import bisect
import uuid
from collections.abc import Iterable

from kraftlab.node.raft.control import ControlRecordType, control_type
from kraftlab.node.raft.membership.records import KRAFT_VERSION_0, parse_kraft_version, parse_voters
from kraftlab.node.raft.ports import Batch, Record
from kraftlab.node.raft.voters import VoterHistory, VoterSet


def holds_vote(voters: VoterSet, node_id: int, directory_id: uuid.UUID | None) -> bool:
    """Whether replica (node_id, directory_id) is a voter of `voters`. A voter the set knows with a
    directory id is that directory only (a replaced disk is a new replica, not the voter); a voter
    known by id alone (the static mode) is any directory of that node."""
    return voters.holds(node_id, directory_id)


class ControlRecordState:
    """kraft.version and the voter set by log offset, kept in step with one replica's log."""

    __slots__ = ("_version_offsets", "_versions", "voters")

    def __init__(self, initial_voters: VoterSet, kraft_version: int = KRAFT_VERSION_0) -> None:
        self.voters = VoterHistory(initial_voters)
        """The voter sets in force by offset (the initial set from before offset 0)."""
        self._version_offsets: list[int] = [-1]
        self._versions: list[int] = [kraft_version]

    @property
    def kraft_version(self) -> int:
        """The kraft.version of the log's last entry."""
        return self._versions[-1]

    def kraft_version_at(self, offset: int) -> int:
        return self._versions[bisect.bisect_right(self._version_offsets, offset) - 1]

    @property
    def latest_voters(self) -> VoterSet:
        return self.voters.latest

    def voters_at(self, offset: int) -> VoterSet:
        return self.voters.at(offset)

    def last_change_offset(self) -> int:
        """The offset of the last VotersRecord read (-1: the initial set is still in force)."""
        return self.voters.last_offset

    def apply_record(self, offset: int, record: Record) -> None:
        """A control record at `offset` was appended (other control types are ignored);
        ValueError if it is a malformed KRaftVersion or KRaftVoters record."""
        kind = control_type(record.key)
        if kind == ControlRecordType.KRAFT_VOTERS:
            self.voters.add_at(offset, parse_voters(record))
        elif kind == ControlRecordType.KRAFT_VERSION:
            version = parse_kraft_version(record)
            if offset <= self._version_offsets[-1]:
                raise ValueError(
                    f"kraft.version at offset {offset} is not after the last one ({self._version_offsets[-1]})"
                )
            self._version_offsets.append(offset)
            self._versions.append(version)

    def apply_batch(self, batch: Batch) -> None:
        """A batch was appended to the log: its membership records take effect at their offsets."""
        if batch.control:
            for i, record in enumerate(batch.records):
                self.apply_record(batch.base_offset + i, record)

    def apply_batches(self, batches: Iterable[Batch]) -> None:
        for batch in batches:
            self.apply_batch(batch)

    def truncate_from(self, offset: int) -> None:
        """The log lost every entry at or after `offset`: what those entries brought is rolled back."""
        self.voters.truncate_from(offset)
        while len(self._version_offsets) > 1 and self._version_offsets[-1] >= offset:
            self._version_offsets.pop()
            self._versions.pop()

    def reset_to_snapshot(self, control_records: Iterable[Record]) -> None:
        """The log was replaced by a snapshot (or, at start, the bootstrap checkpoint 0-0) whose
        control records are given: its kraft.version and voter set are in force for everything the
        log holds from now on (records the snapshot replaced are gone, so earlier sets are moot);
        a snapshot without them keeps the sets in force before it."""
        version, voters = self.kraft_version, self.latest_voters
        for record in control_records:
            kind = control_type(record.key)
            if kind == ControlRecordType.KRAFT_VERSION:
                version = parse_kraft_version(record)
            elif kind == ControlRecordType.KRAFT_VOTERS:
                voters = parse_voters(record)
        self.voters.reset(voters)  # in place: the core's parts share this history
        self._version_offsets, self._versions = [-1], [version]
