"""Record batch v2 codec: round trips, interoperability with kio, torn and bit-flipped input."""

from __future__ import annotations

import datetime
import io

import crc32c
import pytest
from hypothesis import given
from hypothesis import strategies as st
from kio.records.readers import read_batch
from kio.records.schema import NewRecordBatch
from kio.records.schema import Record as KioRecord
from kio.records.writers import write_batch
from kio.static.primitive import TZAwareMicros, i8, i16, i32, i64
from storage_helpers import make_batch

from kraftlab.node.raft.ports import Batch, Record
from kraftlab.node.storage.batches import (
    HEADER_SIZE,
    decode_batch,
    decode_batches,
    encode_batch,
    encode_batches,
    read_header,
    scan,
    valid_length,
)
from kraftlab.node.storage.control import ControlRecordType, snapshot_header
from kraftlab.node.storage.errors import CorruptBatch

maybe_bytes = st.none() | st.binary(max_size=300)
records = st.builds(Record, maybe_bytes, maybe_bytes)
any_batch = st.builds(
    Batch,
    base_offset=st.integers(0, 2**62),
    epoch=st.integers(0, 2**31 - 1),
    records=st.lists(records, min_size=1, max_size=40).map(tuple),
    control=st.booleans(),
    append_time_ms=st.integers(0, 2**45),
)


@given(any_batch)
def test_round_trip(batch: Batch) -> None:
    data = encode_batch(batch)
    decoded, size = decode_batch(data)
    assert decoded == batch
    assert size == len(data)
    header = read_header(data)
    assert (header.base_offset, header.last_offset, header.epoch, header.control, header.count) == (
        batch.base_offset, batch.last_offset, batch.epoch, batch.control, len(batch.records),
    )  # fmt: skip


@given(st.lists(any_batch, max_size=6))
def test_concatenated_round_trip(bs: list[Batch]) -> None:
    data = encode_batches(bs)
    assert decode_batches(data) == bs
    assert valid_length(data) == len(data)


@given(any_batch)
def test_kio_reads_what_we_write(batch: Batch) -> None:
    data = encode_batch(batch)
    kb, size = read_batch(data, 0)  # kio checks the CRC and every length itself
    assert size == len(data)
    assert kb.base_offset == batch.base_offset
    assert kb.partition_leader_epoch == batch.epoch
    assert bool(kb.attributes & 0x20) == batch.control
    assert kb.attributes & ~0x20 == 0
    assert kb.base_timestamp == kb.max_timestamp == batch.append_time_ms
    assert (kb.producer_id, kb.producer_epoch, kb.base_sequence) == (-1, -1, -1)
    assert kb.crc == crc32c.crc32c(data[21:])
    assert [(r.offset, r.key, r.value) for r in kb.records] == [
        (batch.base_offset + i, r.key, r.value) for i, r in enumerate(batch.records)
    ]


def test_we_read_what_kio_writes() -> None:
    ts = TZAwareMicros.parse(datetime.datetime(2024, 5, 1, 12, 0, 0, tzinfo=datetime.UTC))
    kio_records = tuple(
        KioRecord(attributes=i8(0), timestamp=ts, offset=i64(100 + i), key=k, value=v, headers=())
        for i, (k, v) in enumerate([(b"a", b"1"), (None, b"22"), (b"ccc", None)])
    )
    new = NewRecordBatch(
        producer_id=i64(-1), producer_epoch=i16(-1), partition_leader_epoch=i32(7), base_sequence=i32(-1),
        records=kio_records, attributes=i16(0x20),
    )  # fmt: skip
    buf = io.BytesIO()
    write_batch(buf, new)
    batch, size = decode_batch(buf.getvalue())
    assert size == len(buf.getvalue())
    assert batch == Batch(
        100, 7, (Record(b"a", b"1"), Record(None, b"22"), Record(b"ccc", None)), True, int(ts.timestamp() * 1000)
    )


def test_empty_batch_is_refused() -> None:
    with pytest.raises(ValueError, match="at least one record"):
        encode_batch(Batch(0, 1, ()))


def test_every_truncation_is_detected_and_scan_stops_at_the_previous_boundary() -> None:
    first, second = make_batch(0, 1), make_batch(2, 1, n=3)
    data = encode_batches([first, second])
    boundary = len(encode_batch(first))
    for cut in range(boundary, len(data)):
        torn = data[:cut]
        result = scan(torn)
        assert result.valid_end == boundary
        assert [h.base_offset for h in result.headers] == [0]
        if cut > boundary:
            assert result.error is not None and result.error.position == boundary
            assert "truncated" in result.error.reason
            with pytest.raises(CorruptBatch):
                decode_batches(torn)
        else:
            assert result.error is None


def test_every_bit_flip_under_the_crc_or_in_length_or_magic_is_detected() -> None:
    data = encode_batch(make_batch(5, 3, n=3))
    protected = list(range(8, 12)) + list(range(16, len(data)))  # length, magic, crc, and all it covers
    for byte in protected:
        for bit in range(8):
            flipped = bytearray(data)
            flipped[byte] ^= 1 << bit
            with pytest.raises(CorruptBatch) as err:
                decode_batch(bytes(flipped))
            assert err.value.position == 0


def test_flips_outside_the_crc_are_caught_by_offset_and_epoch_order() -> None:
    """The CRC does not cover base offset or leader epoch (as in Kafka); ordering checks do."""
    data = encode_batches([make_batch(0, 4), make_batch(2, 4)])
    second = len(encode_batch(make_batch(0, 4)))
    flipped = bytearray(data)
    flipped[second + 7] ^= 1  # base offset 2 -> 3
    result = scan(bytes(flipped), 0, next_offset=0, min_epoch=0)
    assert result.valid_end == second and "base offset 3" in str(result.error)
    flipped = bytearray(data)
    flipped[second + 15] = 3  # epoch 4 -> 3 (a flip upwards is indistinguishable from a new epoch)
    result = scan(bytes(flipped), 0, next_offset=0, min_epoch=0)
    assert result.valid_end == second and "epoch 3" in str(result.error)


def test_corrupt_batch_reports_offset_position_and_reason() -> None:
    data = bytearray(encode_batches([make_batch(0, 1), make_batch(2, 1)]))
    second = len(encode_batch(make_batch(0, 1)))
    data[-1] ^= 0xFF
    with pytest.raises(CorruptBatch) as err:
        decode_batches(bytes(data))
    assert (err.value.offset, err.value.position) == (2, second)
    assert "CRC mismatch" in err.value.reason
    assert f"at {second}" in str(err.value)


def test_absurd_lengths_and_compression_are_refused() -> None:
    data = bytearray(encode_batch(make_batch(0, 1)))
    short = bytearray(data)
    short[8:12] = (5).to_bytes(4, "big")
    with pytest.raises(CorruptBatch, match="invalid batch length"):
        read_header(bytes(short))
    with pytest.raises(CorruptBatch, match="truncated batch header"):
        read_header(bytes(data[: HEADER_SIZE - 55]))
    compressed = bytearray(data)
    compressed[22] |= 1  # attributes low byte: gzip
    compressed[17:21] = crc32c.crc32c(bytes(compressed[21:])).to_bytes(4, "big")
    with pytest.raises(CorruptBatch, match="compressed"):
        read_header(bytes(compressed))


def test_bad_record_framing_under_a_valid_crc_is_reported() -> None:
    data = bytearray(encode_batch(make_batch(0, 1, n=1)))
    data[HEADER_SIZE + 3] = 9  # the offset delta varint of record 0: zigzag 9 = -5
    data[17:21] = crc32c.crc32c(bytes(data[21:])).to_bytes(4, "big")
    read_header(bytes(data))  # the header and CRC are fine
    with pytest.raises(CorruptBatch, match="bad record framing"):
        decode_batch(bytes(data))


# ---- a second, independent implementation: kafka-python's record batch v2 ------------------


def test_kafka_python_validates_and_reads_what_we_write() -> None:
    from kafka.record.default_records import DefaultRecordBatch

    batch = Batch(42, 9, (Record(b"a", b"x" * 300), Record(None, b"y"), Record(b"z", None)), False, 1_700_000_000_555)
    kb = DefaultRecordBatch(bytearray(encode_batch(batch)))
    assert kb.validate_crc()
    assert (kb.base_offset, kb.leader_epoch, kb.is_control_batch, kb.last_offset_delta) == (42, 9, False, 2)
    assert (kb.first_timestamp, kb.max_timestamp, kb.producer_id) == (1_700_000_000_555, 1_700_000_000_555, -1)
    got = [(r.offset, r.key, r.value, r.timestamp) for r in kb]
    assert got == [(42 + i, r.key, r.value, 1_700_000_000_555) for i, r in enumerate(batch.records)]
    control = DefaultRecordBatch(bytearray(encode_batch(Batch(7, 2, (snapshot_header(5),), True, 5))))
    assert control.validate_crc() and control.is_control_batch
    assert [(r.version, r.type) for r in control] == [(0, ControlRecordType.SNAPSHOT_HEADER)]


def test_we_read_what_kafka_python_writes() -> None:
    from kafka.record.default_records import DefaultRecordBatchBuilder

    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=0, is_transactional=False, producer_id=-1, producer_epoch=-1, base_sequence=-1,
        batch_size=1 << 20,
    )  # fmt: skip
    for i, (key, value) in enumerate([(b"k0", b"v0"), (None, b"v1"), (b"k2", None)]):
        builder.append(i, timestamp=1_700_000_000_000, key=key, value=value, headers=[])
    data = bytes(builder.build())
    batch, size = decode_batch(data)
    assert size == len(data)
    assert batch == Batch(
        0, 0, (Record(b"k0", b"v0"), Record(None, b"v1"), Record(b"k2", None)), False, 1_700_000_000_000
    )
