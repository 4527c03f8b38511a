"""Structural pre-check of a message against its kio schema, run before kio's native decoder.

kio's native reader trusts length and count prefixes: a compact array count such as 2**35 makes it
try to allocate that many slots and the whole process aborts (a Rust allocation failure, not a Python
exception). Like Kafka's generated readers, this walk rejects any array count or byte length larger
than the bytes left in the message, so the decoder never allocates more than a small multiple of the
frame it was given. It allocates nothing itself: it only moves an offset and raises ``MalformedFrame``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import Field, fields
from functools import cache
from typing import Any

from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    get_schema_field_type,
    is_optional,
)
from kio.static.protocol import Entity

from kraftlab.node.protocol.errors import MalformedFrame

# A walker checks the value starting at ``pos`` fits before ``end`` and returns the offset after it.
# An edit replaces buf[start:end] with new bytes: how unknown tagged fields are cut out (see ``strip``).
Edit = tuple[int, int, bytes]
Edits = list[Edit]
Walker = Callable[[bytes, int, int, Edits], int]

_FIXED_SIZES: dict[str, int] = {
    "bool": 1,
    "int8": 1,
    "uint8": 1,
    "int16": 2,
    "uint16": 2,
    "error_code": 2,
    "int32": 4,
    "uint32": 4,
    "timedelta_i32": 4,
    "int64": 8,
    "uint64": 8,
    "float64": 8,
    "timedelta_i64": 8,
    "datetime_i64": 8,
    "uuid": 16,
}
_MAX_VARINT_BYTES = 5  # Kafka's limit for an unsigned varint (32 bits of payload)


def read_uvarint(buf: bytes, pos: int, end: int) -> tuple[int, int]:
    """Read an unsigned varint of at most 5 bytes; return (value, new offset)."""
    value = 0
    for i in range(_MAX_VARINT_BYTES):
        if pos >= end:
            raise MalformedFrame("varint runs past the end of the message")
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << (7 * i)
        if not byte & 0x80:
            return value, pos
    raise MalformedFrame("varint longer than 5 bytes")


def _read_signed(buf: bytes, pos: int, end: int, size: int) -> tuple[int, int]:
    if pos + size > end:
        raise MalformedFrame("length prefix runs past the end of the message")
    return int.from_bytes(buf[pos : pos + size], "big", signed=True), pos + size


def _skip(pos: int, length: int, end: int, what: str) -> int:
    if length > end - pos:
        raise MalformedFrame(f"{what} of {length} bytes but only {end - pos} remain")
    return pos + length


def _fixed(size: int) -> Walker:
    def walk(buf: bytes, pos: int, end: int, edits: Edits) -> int:
        return _skip(pos, size, end, "fixed field")

    return walk


def _null(nullable: bool, what: str) -> None:
    if not nullable:
        raise MalformedFrame(f"non-nullable {what} serialized as null")


def _legacy_bytes(prefix_size: int, nullable: bool) -> Walker:
    def walk(buf: bytes, pos: int, end: int, edits: Edits) -> int:
        length, pos = _read_signed(buf, pos, end, prefix_size)
        if length < -1:
            raise MalformedFrame(f"negative length {length}")
        if length == -1:
            _null(nullable, "string/bytes")
            return pos
        return _skip(pos, length, end, "string/bytes")

    return walk


def _compact_bytes(nullable: bool) -> Walker:
    def walk(buf: bytes, pos: int, end: int, edits: Edits) -> int:
        length_plus_one, pos = read_uvarint(buf, pos, end)
        if length_plus_one == 0:
            _null(nullable, "compact string/bytes")
            return pos
        return _skip(pos, length_plus_one - 1, end, "compact string/bytes")

    return walk


def _array(item: Walker, flexible: bool, nullable: bool) -> Walker:
    def walk(buf: bytes, pos: int, end: int, edits: Edits) -> int:
        if flexible:
            count_plus_one, pos = read_uvarint(buf, pos, end)
            count = count_plus_one - 1
        else:
            count, pos = _read_signed(buf, pos, end, 4)
        if count < -1:
            raise MalformedFrame(f"negative array count {count}")
        if count == -1:
            _null(nullable, "array")
        if count > end - pos:
            raise MalformedFrame(f"array of {count} items but only {end - pos} bytes remain")
        for _ in range(count):
            pos = item(buf, pos, end, edits)
        return pos

    return walk


def _nullable_entity(inner: Walker) -> Walker:
    def walk(buf: bytes, pos: int, end: int, edits: Edits) -> int:
        marker, pos = _read_signed(buf, pos, end, 1)
        if marker == -1:
            return pos
        if marker != 1:
            raise MalformedFrame(f"bad nullable-struct marker {marker}")
        return inner(buf, pos, end, edits)

    return walk


def _primitive(kafka_type: str, flexible: bool, nullable: bool, legacy_string: bool = False) -> Walker:
    if kafka_type in _FIXED_SIZES:
        return _fixed(_FIXED_SIZES[kafka_type])
    if kafka_type not in ("string", "bytes", "records"):
        raise MalformedFrame(f"schema has unknown kafka_type {kafka_type!r}")
    if legacy_string:
        return _legacy_bytes(2, nullable)
    if flexible:
        return _compact_bytes(nullable)
    return _legacy_bytes(2 if kafka_type == "string" else 4, nullable)


def _field_walker(entity_type: type[Entity], field: Field[Any]) -> Walker:
    flexible = bool(entity_type.__flexible__)
    # kio (like Kafka) always writes RequestHeader.client_id as a legacy nullable string.
    legacy_string = entity_type.__name__ == "RequestHeader" and getattr(field, "name", "") == "client_id"
    klass = classify_field(field)
    # Like Kafka's readers, a null where the schema does not allow one is malformed.
    nullable = is_optional(field)
    match klass:
        case PrimitiveField():
            return _primitive(get_schema_field_type(field), flexible, nullable, legacy_string)
        case PrimitiveTupleField():
            item = _primitive(get_schema_field_type(field), flexible, False)
            return _array(item, flexible, nullable)
        case EntityField(nested):
            inner = entity_walker(nested)
            # Tagged fields are optional by their presence, so only a plain nullable struct has a marker.
            return _nullable_entity(inner) if nullable and get_field_tag(field) is None else inner
        case EntityTupleField(nested):
            return _array(entity_walker(nested), flexible, nullable)
    raise MalformedFrame(f"unclassifiable field {field!r}")


def skip_tagged_fields(
    buf: bytes, pos: int, end: int, edits: Edits | None = None, known: dict[int, Walker] | None = None
) -> int:
    """Walk a tagged-field section (count, then tag/size/bytes each); ``known`` tags are walked inside.

    Unknown tags are skipped, as KIP-482 requires; when ``edits`` is given they are also recorded as
    edits that cut them out (kio's native reader refuses unknown tags), with the count rewritten.
    """
    count_start = pos
    count, pos = read_uvarint(buf, pos, end)
    count_end = pos
    if count > end - pos:
        raise MalformedFrame(f"{count} tagged fields but only {end - pos} bytes remain")
    unknown: list[tuple[int, int]] = []
    for _ in range(count):
        field_start = pos
        tag, pos = read_uvarint(buf, pos, end)
        size_start = pos
        size, pos = read_uvarint(buf, pos, end)
        size_end = pos
        field_end = _skip(pos, size, end, "tagged field")
        walker = known.get(tag) if known else None
        if walker is None:
            unknown.append((field_start, field_end))
        else:
            inner: Edits = []
            if walker(buf, pos, field_end, inner) != field_end:
                raise MalformedFrame(f"tagged field {tag} does not fill its declared {size} bytes")
            if inner and edits is not None:
                shrink = sum(e - s - len(b) for s, e, b in inner)
                edits.append((size_start, size_end, encode_uvarint(size - shrink)))
                edits.extend(inner)
        pos = field_end
    if unknown and edits is not None:
        edits.append((count_start, count_end, encode_uvarint(count - len(unknown))))
        edits.extend((s, e, b"") for s, e in unknown)
    return pos


def encode_uvarint(value: int) -> bytes:
    """The unsigned varint encoding of ``value``."""
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def strip(buf: bytes, start: int, end: int, edits: Edits) -> bytes:
    """``buf[start:end]`` with ``edits`` (absolute, non-overlapping) applied."""
    pieces: list[bytes] = []
    cursor = start
    for edit_start, edit_end, replacement in sorted(edits):
        pieces.append(buf[cursor:edit_start])
        pieces.append(replacement)
        cursor = edit_end
    pieces.append(buf[cursor:end])
    return b"".join(pieces)


@cache
def entity_walker(entity_type: type[Entity]) -> Walker:
    """The walker of one kio entity class (cached: schemas are immutable)."""
    plain: list[Walker] = []
    tagged: dict[int, Walker] = {}
    for field in fields(entity_type):
        tag = get_field_tag(field)
        walker = _field_walker(entity_type, field)
        if tag is None:
            plain.append(walker)
        else:
            tagged[int(tag)] = walker
    flexible = bool(entity_type.__flexible__)

    def walk(buf: bytes, pos: int, end: int, edits: Edits) -> int:
        for walker in plain:
            pos = walker(buf, pos, end, edits)
        return skip_tagged_fields(buf, pos, end, edits, tagged) if flexible else pos

    return walk


def check_bounds(entity_type: type[Entity], buf: bytes, pos: int, end: int, edits: Edits | None = None) -> int:
    """Check that an ``entity_type`` starting at ``pos`` is bounded within ``end``; return where it ends.

    Edits that cut unknown tagged fields out are appended to ``edits`` when it is given.
    """
    return entity_walker(entity_type)(buf, pos, end, edits if edits is not None else [])
