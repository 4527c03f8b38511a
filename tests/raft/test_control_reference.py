"""The control records the node writes, and its snapshots' layout, judged by Kafka's control record
numbers and kio's schemas (`node.sim.control_reading`), not by the node's own readers: every
LeaderChangeMessage, KRaftVersionRecord, VotersRecord, SnapshotHeaderRecord and SnapshotFooterRecord
over its whole domain; control records written by kio read the same in the node; snapshots (in
memory and on disk) laid out as KIP-630 says; a leader's LeaderChange batch flagged as a control
batch. Planted writers that stay consistent with the node's own readers (a type number, a field
order, the control bit, a snapshot layout) are caught.
"""

from __future__ import annotations

import contextlib
import io
import uuid
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.schema.control_record_type_schema.v0.data import ControlRecordTypeSchema
from kio.schema.leader_change_message.v0 import data as lc
from kio.serial import entity_writer
from kio.serial.writers import write_int16
from kio.static.primitive import i16, i32

from kraftlab.node.raft import control, election
from kraftlab.node.raft.membership.records import (
    SUPPORTED_KRAFT_VERSIONS,
    kraft_version_record,
    parse_kraft_version,
    parse_voters,
    voters_record,
)
from kraftlab.node.raft.ports import Batch, OffsetAndEpoch, Record
from kraftlab.node.raft.voters import Endpoint, Voter, VoterSet
from kraftlab.node.sim.cluster import SimParams, Simulation
from kraftlab.node.sim.control_reading import (
    ControlViolation,
    judge_batch,
    judge_batches,
    judge_snapshot,
    read_control,
)
from kraftlab.node.sim.raft_reading import read_batches
from kraftlab.node.storage import batches as batch_codec
from kraftlab.node.storage import snapshots
from kraftlab.node.storage.control import snapshot_footer, snapshot_header
from kraftlab.node.storage.snapshots import DiskSnapshotStore, encode_snapshot

FAST = settings(max_examples=60, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])

i32s = st.integers(-(2**31), 2**31 - 1)
ids = st.lists(i32s, max_size=4) | st.lists(i32s, min_size=120, max_size=200)  # a compact array's length is a varint
names = st.text(st.characters(min_codepoint=48, max_codepoint=122), min_size=1, max_size=8)
voter_sets = st.dictionaries(
    st.integers(0, 2**31 - 1),
    st.tuples(st.uuids().filter(lambda u: u.int != 0),
              st.dictionaries(names, st.tuples(names, st.integers(0, 2**16 - 1)), max_size=2)),
    min_size=1, max_size=5,
).map(lambda d: VoterSet(
    Voter(i, directory, tuple(Endpoint(n, h, p) for n, (h, p) in endpoints.items()))
    for i, (directory, endpoints) in d.items()
))


def kio_key(kind: int, version: int = 0) -> bytes:
    buf = io.BytesIO()
    write_int16(buf, i16(version))
    entity_writer(ControlRecordTypeSchema)(buf, ControlRecordTypeSchema(type_=i16(kind)))
    return buf.getvalue()


# ---------------------------------------------------------------------------- the node's writers


@FAST
@given(i32s, ids, ids)
def test_leader_change_reads_as_kafkas_leader_change_message(leader: int, voters: list[int], granting: list[int]
                                                             ) -> None:
    name, message = read_control(control.leader_change_record(leader, voters, granting))
    assert name == "LEADER_CHANGE"
    assert (message.leader_id, [v.voter_id for v in message.voters], [v.voter_id for v in message.granting_voters]) == (
        leader, voters, granting
    )


@FAST
@given(i32s, ids, ids)
def test_a_leader_change_kafka_writes_reads_the_same_in_the_node(leader: int, voters: list[int], granting: list[int]
                                                                ) -> None:
    buf = io.BytesIO()
    entity_writer(lc.LeaderChangeMessage)(buf, lc.LeaderChangeMessage(
        version=i16(0), leader_id=lc.BrokerId(leader),
        voters=tuple(lc.Voter(voter_id=i32(v)) for v in voters),
        granting_voters=tuple(lc.Voter(voter_id=i32(v)) for v in granting),
    ))
    assert control.decode_leader_change(Record(kio_key(2), buf.getvalue())) == (leader, voters, granting)


@FAST
@given(st.integers(0, 2**15 - 1), st.integers(-(2**15), 2**15 - 1))
def test_any_control_key_kafka_writes_reads_as_its_type_in_the_node(version: int, kind: int) -> None:
    """Kafka reads a control key of a later version as version 0 (ControlRecordType.parseTypeId)."""
    assert control.control_type(kio_key(kind, version)) == kind


@pytest.mark.parametrize("version", SUPPORTED_KRAFT_VERSIONS)
def test_kraft_version_reads_as_kafkas_record(version: int) -> None:
    record = kraft_version_record(version)
    name, message = read_control(record)
    assert (name, message.k_raft_version) == ("KRAFT_VERSION", version)
    assert parse_kraft_version(Record(kio_key(5), record.value)) == version


@FAST
@given(voter_sets)
def test_voters_read_as_kafkas_voters_record(voters: VoterSet) -> None:
    record = voters_record(voters)
    name, message = read_control(record)
    assert name == "KRAFT_VOTERS"
    read = [(int(v.voter_id), v.voter_directory_id, [(e.name, e.host, int(e.port)) for e in v.endpoints])
            for v in message.voters]
    expected = [(i, v.directory_id, [(e.name, e.host, e.port) for e in v.endpoints])
                for i in voters.ids if (v := voters.voter(i)) is not None]
    assert read == expected
    assert parse_voters(Record(kio_key(6), record.value)).ids == voters.ids


@FAST
@given(st.integers(-(2**63), 2**63 - 1))
def test_snapshot_header_and_footer_read_as_kafkas_records(timestamp: int) -> None:
    name, header = read_control(snapshot_header(timestamp))
    assert (name, header.last_contained_log_timestamp) == ("SNAPSHOT_HEADER", timestamp)
    assert read_control(snapshot_footer())[0] == "SNAPSHOT_FOOTER"


records = st.lists(st.builds(Record, st.none(), st.binary(min_size=1, max_size=40)), max_size=30)  # KRaft's data
membership = st.sampled_from([(), (kraft_version_record(0),), (kraft_version_record(1),)]) | voter_sets.map(
    lambda v: (kraft_version_record(1), voters_record(v))
)


@FAST
@given(records, st.integers(0, 2**40), st.integers(0, 2**31 - 1), st.integers(0, 2**41),
       st.sampled_from([1, 64, 1 << 20]), membership)
def test_snapshots_are_laid_out_as_kip_630_says(data: list[Record], offset: int, epoch: int, ms: int,
                                                max_batch_bytes: int, control_records: tuple[Record, ...]) -> None:
    encoded = encode_snapshot(OffsetAndEpoch(offset, epoch), data, ms, max_batch_bytes, control_records)
    batches = judge_snapshot(encoded)
    assert [r for b in batches[1:-1] for r in b.records] == data
    assert all(b.epoch == epoch and b.append_time_ms == ms for b in batches)
    assert batches[0].records[1:] == control_records


def test_a_snapshot_on_disk_is_laid_out_as_kip_630_says(tmp_path: Path) -> None:
    store = DiskSnapshotStore(tmp_path, max_batch_bytes=64)
    voters = VoterSet([Voter(1, uuid.UUID(int=5), (Endpoint("CONTROLLER", "h", 9093),))])
    sid = OffsetAndEpoch(40, 3)
    store.write(sid, [Record(None, bytes([i]) * 30) for i in range(9)], 1234,
                (kraft_version_record(1), voters_record(voters)))
    batches = judge_snapshot(store.path(sid).read_bytes())
    assert len(batches) > 3


def test_every_batch_of_a_raft_simulation_reads_as_kafkas_control_records() -> None:
    sim = Simulation(SimParams(seed=0, voters=3, faults=("partition", "crash"), snapshot_every=0))
    sim.run()
    seen: dict[str, int] = {}
    for node in sim.nodes.values():
        for batch in node.log.batches():
            for name, _ in judge_batch(batch):
                seen[name] = seen.get(name, 0) + 1
            assert judge_batch(read_batches(batch_codec.encode_batch(batch))[0]) == judge_batch(batch)
    assert seen.get("LEADER_CHANGE", 0) >= 6, seen  # each node holds each epoch's


# ---------------------------------------------------------------------------- planted writers


def test_a_wrong_type_number_the_node_reads_back_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """LeaderChange written as type 3 (Kafka's SNAPSHOT_HEADER) and 3 read back as a leader change."""
    swap = {2: 3, 3: 2}
    key, kind = control.control_key, control.control_type
    monkeypatch.setattr(control, "control_key", lambda k: key(control.ControlRecordType(swap.get(int(k), int(k)))))
    monkeypatch.setattr(control, "control_type", lambda k: swap.get(kind(k), kind(k)))
    record = control.leader_change_record(1, [1, 2, 3], [1, 2])
    assert control.decode_leader_change(record) == (1, [1, 2, 3], [1, 2])  # invisible to the node
    with pytest.raises(ControlViolation):
        read_control(record)


def test_a_field_order_the_node_reads_back_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """Granting voters written before the voters, and read back in the same wrong order."""
    write, read = control.leader_change_record, control.decode_leader_change
    monkeypatch.setattr(control, "leader_change_record", lambda leader, v, g: write(leader, g, v))

    def swapped(record: Record) -> tuple[int, list[int], list[int]]:
        leader, a, b = read(record)
        return leader, b, a

    monkeypatch.setattr(control, "decode_leader_change", swapped)
    record = control.leader_change_record(1, [1, 2, 3], [1])
    assert control.decode_leader_change(record) == (1, [1, 2, 3], [1])  # invisible to the node
    _, message = read_control(record)
    assert [v.voter_id for v in message.voters] != [1, 2, 3]


def test_a_wrong_control_bit_the_node_reads_back_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(batch_codec, "CONTROL_FLAG", 0x10)  # Kafka's transactional bit
    batch = Batch(5, 2, (control.leader_change_record(1, [1], [1]),), True, 10)
    assert batch_codec.decode_batches(batch_codec.encode_batch(batch)) == [batch]  # invisible to the node
    assert read_batches(batch_codec.encode_batch(batch))[0].control is False
    with pytest.raises(ControlViolation):
        judge_snapshot(encode_snapshot(OffsetAndEpoch(3, 1), [Record(None, b"x")], 0))


@pytest.mark.parametrize("layout", ["voters before version", "footer in a data batch", "no header"])
def test_a_wrong_snapshot_layout_is_caught(layout: str, monkeypatch: pytest.MonkeyPatch) -> None:
    voters = VoterSet([Voter(1, uuid.UUID(int=5), ())])
    membership_records: tuple[Record, ...] = (kraft_version_record(1), voters_record(voters))
    data = [Record(None, b"x"), Record(None, b"y")]
    if layout == "voters before version":
        membership_records = membership_records[::-1]
    elif layout == "footer in a data batch":
        encode = snapshots.encode_batch
        monkeypatch.setattr(snapshots, "encode_batch", lambda b: encode(
            Batch(b.base_offset, b.epoch, b.records, b.control and b.records != (snapshot_footer(),), b.append_time_ms)
        ))
    else:
        header = snapshots.snapshot_header
        monkeypatch.setattr(snapshots, "snapshot_header", lambda ms: Record(None, b"not a header"))
        encoded = encode_snapshot(OffsetAndEpoch(3, 1), data, 0, control_records=())
        monkeypatch.setattr(snapshots, "snapshot_header", header)
        with pytest.raises(ControlViolation):
            judge_snapshot(encoded)
        return
    with pytest.raises(ControlViolation):
        judge_snapshot(encode_snapshot(OffsetAndEpoch(3, 1), data, 0, control_records=membership_records))


def test_a_record_in_the_wrong_kind_of_batch_is_caught() -> None:
    """A control batch holding a data record, a data batch holding a control record, a keyed or empty
    data record: each fails; KRaft's data records pass."""
    leader_change = control.leader_change_record(1, [1], [1])
    for wrong in (Batch(0, 1, (Record(None, b"v"),), True, 0), Batch(0, 1, (leader_change,), False, 0),
                  Batch(0, 1, (Record(b"k", b"v"),), False, 0), Batch(0, 1, (Record(None, b""),), False, 0)):
        with pytest.raises(ControlViolation):
            judge_batches([wrong])
    judge_batches([Batch(0, 1, (Record(None, b"v"), Record(None, b"w")), False, 0)])


def test_a_leader_writing_its_leader_change_in_a_data_batch_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """The start-of-epoch batch written without the control flag."""
    monkeypatch.setattr(election, "Batch", lambda base, epoch, records, _, ms: Batch(base, epoch, records, False, ms))
    sim = Simulation(SimParams(seed=0, voters=3, faults=("partition",), snapshot_every=0))
    with contextlib.suppress(AssertionError):  # the simulator's own judges may see it first
        sim.run()
    with pytest.raises(ControlViolation, match="data batch"):
        judge_batches([b for n in sim.nodes.values() for b in n.log.batches()])
