"""Hypothesis strategies for whole kio entities, from each field's Kafka type (the schema's domain:
negative and extreme integers, null and empty and long arrays, tagged fields, any UUID, any known
error code), and for record batches written by kio's own batch writer (not the node's)."""

from __future__ import annotations

import dataclasses
import datetime
import io
import typing
import uuid
from functools import cache
from typing import Any

from hypothesis import strategies as st
from kio.records.schema import NewRecordBatch
from kio.records.schema import Record as KioRecord
from kio.records.writers import write_new_batch
from kio.schema.errors import ErrorCode
from kio.static.primitive import Records, TZAwareMicros, i8, i16, i32, i32Timedelta, i64

from kraftlab.node.sim.raft_reading import CONTROL_ATTRIBUTE, METADATA_TOPIC, METADATA_TOPIC_ID

_RANGES = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "uint16": (0, 2**16 - 1),
}


def ints(kafka_type: str) -> st.SearchStrategy[int]:
    low, high = _RANGES[kafka_type]
    return st.one_of(st.sampled_from([v for v in (low, -1, 0, 1, high) if low <= v <= high]), st.integers(low, high))


uuids = st.one_of(st.just(uuid.UUID(int=0)), st.uuids())
texts = st.text(st.characters(min_codepoint=32, max_codepoint=0x2FF), max_size=12)


def _leaf(f: dataclasses.Field[Any], hint: Any) -> st.SearchStrategy[Any]:
    kind = f.metadata.get("kafka_type")
    nullable = type(None) in typing.get_args(hint)
    if kind in _RANGES:
        base = typing.get_args(hint)[0] if typing.get_origin(hint) is tuple else hint
        strategy: st.SearchStrategy[Any] = ints(kind).map(base)
        if typing.get_origin(hint) is tuple:
            return st.lists(strategy, max_size=4).map(tuple)
    elif kind == "bool":
        strategy = st.booleans()
    elif kind == "string":
        strategy = texts
    elif kind == "uuid":
        strategy = uuids
    elif kind == "error_code":
        strategy = st.sampled_from(list(ErrorCode))
    elif kind == "timedelta_i32":
        strategy = st.integers(0, 2**31 - 1).map(lambda ms: i32Timedelta.parse(datetime.timedelta(milliseconds=ms)))
    elif kind == "records":
        strategy = st.binary(max_size=40).map(Records)
    else:
        raise TypeError(f"no strategy for {f.name}: {kind} {hint}")
    return st.one_of(st.none(), strategy) if nullable else strategy


@cache
def entities(cls: type) -> st.SearchStrategy[Any]:
    """Any value of a kio entity class, each field over its Kafka type's whole domain."""
    hints = typing.get_type_hints(cls)
    fields: dict[str, st.SearchStrategy[Any]] = {}
    for f in dataclasses.fields(cls):
        hint = hints[f.name]
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        inner: Any = next((typing.get_args(a)[0] for a in (hint, *args) if typing.get_origin(a) is tuple), None)
        nested: Any = next((a for a in (hint, *args) if dataclasses.is_dataclass(a)), None)
        if inner is None and nested is not None:
            fields[f.name] = entities(nested)
            continue
        if isinstance(inner, type) and dataclasses.is_dataclass(inner):
            items = st.lists(entities(inner), max_size=3).map(tuple)
            fields[f.name] = st.one_of(st.none(), items) if type(None) in typing.get_args(hint) else items
            continue
        fields[f.name] = _leaf(f, hint)
    return st.builds(cls, **fields)


_SECONDS = st.integers(0, 2**33)  # kio's record reader keeps whole seconds: timestamps are drawn so


@st.composite
def batches(draw: st.DrawFn) -> bytes:
    """Record batches as kio writes them: any leader epoch, control or data, keys and values null,
    empty or bytes, contiguous offsets from any base."""
    out = io.BytesIO()
    offset = draw(st.integers(0, 2**62))
    for _ in range(draw(st.integers(1, 3))):
        when = TZAwareMicros.parse(datetime.datetime.fromtimestamp(draw(_SECONDS), datetime.UTC))
        count = draw(st.integers(1, 4))
        records = tuple(
            KioRecord(
                attributes=i8(0), timestamp=when, offset=i64(offset + i),
                key=draw(st.none() | st.binary(max_size=8)), value=draw(st.none() | st.binary(max_size=16)),
                headers=(),
            )
            for i in range(count)
        )
        control = draw(st.booleans())
        write_new_batch(out, NewRecordBatch(
            producer_id=i64(-1), producer_epoch=i16(-1), partition_leader_epoch=i32(draw(ints("int32"))),
            base_sequence=i32(-1), records=records, attributes=i16(CONTROL_ATTRIBUTE if control else 0),
        ))
        offset += count
    return out.getvalue()


def _aimed_topic(topic: Any) -> Any:
    fields = {f.name for f in dataclasses.fields(topic)}
    name_field = next((f for f in ("topic_name", "topic", "name") if f in fields), None)
    index_field = next(f for f in ("partition_index", "partition", "index") if hasattr(topic.partitions[0], f))
    part = dataclasses.replace(topic.partitions[0], **{index_field: i32(0)})
    if hasattr(part, "records") and hasattr(part, "high_watermark"):
        part = dataclasses.replace(part, records=None)  # the caller draws batches for a Fetch answer
    named: dict[str, Any] = {name_field: METADATA_TOPIC} if name_field else {"topic_id": METADATA_TOPIC_ID}
    return dataclasses.replace(topic, partitions=(part,), **named)


@st.composite
def raft_entities(draw: st.DrawFn, cls: type) -> Any:
    """A kio Raft entity of `cls`: mostly for the one partition of `__cluster_metadata`, sometimes
    for another partition of it, sometimes as drawn (no topic, several, another name or id, several
    partitions)."""
    entity = draw(entities(cls))
    field = next((f for f in ("topics", "responses") if hasattr(entity, f)), None)
    if field is None or not draw(st.integers(0, 7)):
        return entity
    topics = getattr(entity, field)
    if not topics or not topics[0].partitions:
        return entity
    topic = _aimed_topic(topics[0])
    part = topic.partitions[0]
    if not draw(st.integers(0, 7)):  # the metadata topic, another partition of it
        index_field = next(f for f in ("partition_index", "partition", "index") if hasattr(part, f))
        part = dataclasses.replace(part, **{index_field: i32(draw(ints("int32")))})
        topic = dataclasses.replace(topic, partitions=(part,))
    if hasattr(part, "records") and hasattr(part, "high_watermark"):
        part = dataclasses.replace(part, records=draw(st.none() | batches().map(Records)))
        if draw(st.booleans()):  # Kafka's pairs: both set, or both -1
            part = dataclasses.replace(
                part,
                diverging_epoch=type(part.diverging_epoch)(),
                snapshot_id=type(part.snapshot_id)(),
            )
        topic = dataclasses.replace(topic, partitions=(part,))
    entity = dataclasses.replace(entity, **{field: (topic,)})
    if hasattr(entity, "error_code") and draw(st.booleans()):  # a top-level error hides the partition
        entity = dataclasses.replace(entity, error_code=ErrorCode.none)
    return entity
