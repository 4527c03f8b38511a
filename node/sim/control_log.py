"""kraft.version and the voter set read from each node's snapshot and log as Kafka reads them, and
which control batches a log may hold (KIP-595, KIP-853), judged by the simulators after every step
of every node.

Kafka's reading (`KRaftControlRecordStateMachine`): the latest snapshot's KRaftVersionRecord and
VotersRecord — none: the static quorum's `controller.quorum.voters` at kraft.version 0, or for a
controller formatted with no initial controllers kraft.version 1 and no voters yet — then every
control record of the log from the snapshot's end offset, each KRaftVersionRecord and VotersRecord
in force from its own offset (appended, not committed), a truncation rolling back what it cut. The
records are read here with Kafka's schemas (`control_reading`, kio), not by the node's readers.

- **VotersAsKafkaReadsThem**: after every step, a node's kraft.version and the voter set it acts on
  are that reading of its own snapshot and log: with a VotersRecord read, the same voters with the
  same directory ids, endpoints and kraft.version ranges; without one, the configured ids.
- **ControlBatchLegal**, for each control batch of a log as it is read (Kafka's writers:
  `LeaderState.appendStartOfEpochControlRecords`, the voter change handlers' `appendVotersRecord`):
  - an epoch's first batch in a log is its leader's LeaderChange batch, and a LeaderChange opens
    its epoch only: it names the voters of the set in force (`voterStates` at the election);
  - after the LeaderChange, that batch holds nothing, or (kraft.version 1 only) the KRaftVersionRecord
    in force then a VotersRecord of the set in force, its voters' ids and directory ids unchanged;
  - any other VotersRecord is alone in its control batch and changes exactly one voter of the set in
    force: one added, one removed, or one voter's endpoints or kraft.version range updated (KIP-853);
  - no KRaftVersionRecord nor VotersRecord under kraft.version 0 (the static quorum's set is its
    configuration), and no KRaftVersionRecord below the kraft.version in force (no downgrade).
- **SnapshotVotersInForce**: a snapshot a node takes from its own log carries the kraft.version and
  the voters that reading has in force at the snapshot's last offset (none at kraft.version 0).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from kraftlab.node.raft.ports import Batch, OffsetAndEpoch
from kraftlab.node.raft.voters import Endpoint, Voter, VoterSet
from kraftlab.node.sim.control_reading import ControlViolation, read_control
from kraftlab.node.sim.invariants import CheckedNode

_ALL = 1 << 40
"""A read budget that reads a whole log."""
Key = tuple[int, Any]


@dataclass(frozen=True, slots=True)
class InForce:
    """kraft.version and the voters (None: the configured ones, no VotersRecord read) in force."""

    kraft_version: int
    voters: tuple[Voter, ...] | None


@dataclass(slots=True)
class _Reading:
    """One node's reading, kept in step with its log as it grows."""

    snapshot: OffsetAndEpoch | None
    state: InForce
    last: Batch | None = None
    """The last batch read (None: none yet)."""
    epoch: int = 0
    """The epoch of the last entry read (the snapshot's, before any batch)."""
    base: InForce | None = None
    """What the snapshot read (`state` before any batch)."""
    bounds: tuple[Any, ...] = ()
    """The node's core, log bounds, last epoch and latest snapshot when last read."""
    expected: VoterSet | None = None
    """`state.voters` as a voter set (made when first compared)."""


def _voters(message: Any) -> tuple[Voter, ...]:
    """A VotersRecord's voters as kio reads them, by id."""
    voters = []
    for v in message.voters:
        feature = v.k_raft_version_feature
        endpoints = tuple(Endpoint(str(e.name), str(e.host), int(e.port)) for e in v.endpoints)
        versions = (int(feature.min_supported_version), int(feature.max_supported_version))
        voters.append(Voter(int(v.voter_id), v.voter_directory_id, endpoints, versions))
    return tuple(sorted(voters, key=lambda v: v.node_id))


def _one_change(before: tuple[Voter, ...], after: tuple[Voter, ...]) -> bool:
    """Whether `after` is `before` with exactly one voter added, removed, or updated in place."""
    old = {v.node_id: v for v in before}
    new = {v.node_id: v for v in after}
    if len(old) != len(before) or len(new) != len(after):
        return False
    if set(old) == set(new):
        changed = [i for i in old if old[i] != new[i]]
        return len(changed) == 1 and old[changed[0]].directory_id == new[changed[0]].directory_id
    added, removed = set(new) - set(old), set(old) - set(new)
    return len(added) + len(removed) == 1 and all(old[i] == new[i] for i in set(old) & set(new))


def _keys(voters: Iterable[Voter]) -> list[Key]:
    return [(v.node_id, v.directory_id) for v in voters]


class ControlLog:
    """The reading above for every node of a simulation, and its two rules."""

    def __init__(self, fail: Callable[[str, str], None], configured: Sequence[int]) -> None:
        self.fail = fail
        self.configured = tuple(sorted(configured))
        """`controller.quorum.voters` (empty: a dynamic quorum, formatted without a static set)."""
        self.judging = True
        self._readings: dict[int, _Reading] = {}

    def initial(self) -> InForce:
        return InForce(0 if self.configured else 1, None)

    # ------------------------------------------------------------------ the simulator's hook

    def check(self, node: CheckedNode) -> None:
        """After a step of `node`: read what its log gained, then compare the node's own reading."""
        core = node.core
        if core is None or not self.judging:
            return
        log = node.log
        # What a step changes in a log shows in its bounds or last epoch (a truncation's rewrite comes
        # from a later epoch, an install moves the start): unchanged, the reading stands as it is.
        bounds = (id(core), log.start_offset(), log.end_offset(), log.last_epoch(), node.snapshots.latest())
        reading = self._readings.get(node.node_id)
        if reading is None or reading.bounds != bounds:
            reading = self._read(node)
            if reading is None:
                return
            reading.bounds = bounds
        state = reading.state
        kraft_version = core.control.kraft_version
        acts_on = core.voter_set
        if state.voters is None:
            same = acts_on.ids == self.configured
        else:
            if reading.expected is None:
                reading.expected = VoterSet(state.voters)
            same = acts_on == reading.expected
        if kraft_version != state.kraft_version or not same:
            expected = self.configured if state.voters is None else state.voters
            self.fail(
                "VotersAsKafkaReadsThem",
                f"node {node.node_id} acts on kraft.version {kraft_version} and voters {acts_on!r}; its snapshot "
                f"{reading.snapshot} and log to {node.log.end_offset()} read as kraft.version "
                f"{state.kraft_version} and voters {expected}",
            )

    # ------------------------------------------------------------------ reading

    def _read(self, node: CheckedNode) -> _Reading | None:
        log = node.log
        snapshot = node.snapshots.latest()
        if snapshot is not None and snapshot.offset < log.start_offset():
            return None  # the entries between the snapshot and the log start are gone: unreadable
        reading = self._readings.get(node.node_id)
        new: list[Batch] | None = None
        if reading is not None and reading.snapshot == snapshot:
            new = self._since(log, reading.last)
        if reading is None or new is None:
            if reading is not None and snapshot is not None and snapshot != reading.snapshot:
                self._judge_snapshot(node, reading, snapshot)
            epoch = 0 if snapshot is None else snapshot.epoch
            base = self._from_snapshot(node, snapshot)
            reading = _Reading(snapshot, base, None, epoch, base)
            self._readings[node.node_id] = reading
            new = log.batches()
        for batch in new:
            self._apply(node.node_id, reading, batch, 0 if snapshot is None else snapshot.offset)
        return reading

    @staticmethod
    def _since(log: Any, last: Batch | None) -> list[Batch] | None:
        """The batches appended after `last` (None: the log no longer holds `last` as it was read)."""
        if last is None:
            return log.batches()
        try:
            held = log.read(last.base_offset, 0)
        except ValueError:
            return None
        if not held or held[0] is not last:
            return None
        return log.read(last.next_offset, _ALL)

    def _from_snapshot(self, node: CheckedNode, snapshot: OffsetAndEpoch | None) -> InForce:
        state = self.initial()
        if snapshot is None:
            return state
        for record in node.snapshots.read_control_records(snapshot):
            name, message = read_control(record)
            if name == "KRAFT_VERSION":
                state = replace(state, kraft_version=int(message.k_raft_version))
            elif name == "KRAFT_VOTERS":
                state = replace(state, voters=_voters(message))
        return state

    def _judge_snapshot(self, node: CheckedNode, before: _Reading, new: OffsetAndEpoch) -> None:
        """SnapshotVotersInForce: a snapshot the node took from its own log (the log holds every entry
        from the snapshot before it up to its end) carries the kraft.version and voters in force at its
        last offset (Kafka's snapshot writer: KRaftControlRecordStateMachine's sets at end offset - 1)."""
        log = node.log
        old = before.snapshot
        base = 0 if old is None else old.offset
        if new.offset <= base or log.start_offset() > base or log.end_offset() < new.offset:
            return  # fetched from the leader, or the entries before it are gone
        if before.base is None:
            return
        probe = _Reading(old, before.base, None, 0 if old is None else old.epoch)
        for batch in log.batches():
            if batch.base_offset >= new.offset:
                break
            self._apply(node.node_id, probe, batch, base, until=new.offset)
        if probe.state.voters is None and not self.configured:
            return  # (no voter set known yet: no snapshot Kafka's writer could make)
        taken = self._from_snapshot(node, new)
        if taken != probe.state:
            self.fail(
                "SnapshotVotersInForce",
                f"node {node.node_id}'s snapshot {new} carries kraft.version {taken.kraft_version} and voters "
                f"{taken.voters}; its log reads kraft.version {probe.state.kraft_version} and voters "
                f"{probe.state.voters} in force at offset {new.offset - 1}",
            )

    def _apply(self, nid: int, reading: _Reading, batch: Batch, from_offset: int, until: int | None = None) -> None:
        """Read `batch` into `reading` (records below `from_offset`, the snapshot's, are not read,
        nor those from `until` on)."""
        new_epoch = batch.epoch > reading.epoch and batch.next_offset > from_offset
        reading.last = batch
        if batch.next_offset <= from_offset:
            return
        reading.epoch = batch.epoch
        where = f"node {nid}'s log at {batch.base_offset} (epoch {batch.epoch})"
        if not batch.control:
            if new_epoch:
                self.fail("ControlBatchLegal", f"{where}: the epoch's first batch is data, not its LeaderChange")
            return
        try:
            records = [read_control(r) for r in batch.records]
        except ControlViolation as exc:
            self.fail("ControlBatchLegal", f"{where}: {exc}")
            return
        names = [name for name, _ in records]
        state = reading.state
        wrong = self._judge(state, names, records, new_epoch)
        if wrong is not None:
            self.fail("ControlBatchLegal", f"{where}: {names}: {wrong}")
        for i, (name, message) in enumerate(records):
            if batch.base_offset + i < from_offset or (until is not None and batch.base_offset + i >= until):
                continue
            if name == "KRAFT_VERSION":
                state = replace(state, kraft_version=int(message.k_raft_version))
            elif name == "KRAFT_VOTERS":
                state = replace(state, voters=_voters(message))
        reading.state = state
        reading.expected = None

    def _judge(self, state: InForce, names: list[str], records: list[tuple[str, Any]], new_epoch: bool) -> str | None:
        """What makes a control batch read at state `state` illegal (None: nothing)."""
        leads = names[0] == "LEADER_CHANGE"
        if new_epoch != leads or "LEADER_CHANGE" in names[1:]:
            return "a LeaderChange opens its epoch's first batch, and only that"
        membership = [(name, message) for name, message in records if name in ("KRAFT_VERSION", "KRAFT_VOTERS")]
        if membership and state.kraft_version == 0:
            return "kraft.version 0 (a static quorum) holds no KRaftVersion nor Voters record"
        in_force = self.configured if state.voters is None else tuple(v.node_id for v in state.voters)
        known = state.voters is not None or bool(self.configured)  # (a replica formatted without voters learns them)
        if leads:
            named = sorted(int(v.voter_id) for v in records[0][1].voters)
            if known and named != sorted(in_force):
                return f"the LeaderChange names voters {named}, the set in force is {sorted(in_force)}"
            if not membership:
                return None if len(names) == 1 else "a LeaderChange batch holds other records"
            if names[1:] != ["KRAFT_VERSION", "KRAFT_VOTERS"]:
                return "after a LeaderChange: the KRaftVersion record, then the Voters record, or nothing"
            version = int(records[1][1].k_raft_version)
            if version != state.kraft_version:
                return f"the epoch start writes kraft.version {version}, {state.kraft_version} is in force"
            written = _voters(records[2][1])
            if state.voters is not None and _keys(written) != _keys(state.voters):
                return f"the epoch start writes voters {_keys(written)}, {_keys(state.voters)} are in force"
            return None
        if "KRAFT_VERSION" in names:
            version = min(int(m.k_raft_version) for n, m in records if n == "KRAFT_VERSION")
            if version < state.kraft_version:
                return f"kraft.version {version} below the {state.kraft_version} in force (a downgrade)"
        if "KRAFT_VOTERS" in names:
            if names != ["KRAFT_VOTERS"]:
                return "a voter change's VotersRecord is alone in its control batch"
            written = _voters(records[0][1])
            if state.voters is not None and not _one_change(state.voters, written):
                return f"voters {_keys(written)} after {_keys(state.voters)}: KIP-853 changes one voter at a time"
        return None
