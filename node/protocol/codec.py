"""Encode and decode single kio entities safely: bounds-checked before the native decoder runs.

Every decode of bytes that came off a socket goes through ``decode_entity``, which rejects anything
the native reader could choke on and turns every decoder exception into ``MalformedFrame``.
"""

from __future__ import annotations

import io
from typing import TypeVar

from kio.serial import entity_reader, entity_writer
from kio.static.protocol import Entity

from kraftlab.node.protocol.bounds import Edits, check_bounds, strip
from kraftlab.node.protocol.errors import EncodingError, MalformedFrame

E = TypeVar("E", bound=Entity)


def decode_entity(entity_type: type[E], buf: bytes, pos: int = 0) -> tuple[E, int]:
    """Decode one ``entity_type`` from ``buf[pos:]``; return it and the offset just after it.

    Unknown tagged fields are skipped (KIP-482), by cutting them out before the native reader runs.
    """
    edits: Edits = []
    try:
        end = check_bounds(entity_type, buf, pos, len(buf), edits)
    except MalformedFrame as exc:
        raise MalformedFrame(f"{entity_type.__name__} v{entity_type.__version__}: {exc}") from None
    data, start = (strip(buf, pos, end, edits), 0) if edits else (buf, pos)
    expected = len(data) if edits else end - pos
    try:
        entity, size = entity_reader(entity_type)(data, start)
    except Exception as exc:  # the native reader raises several unrelated types
        raise MalformedFrame(f"{entity_type.__name__} v{entity_type.__version__}: {type(exc).__name__}: {exc}") from exc
    if size != expected:
        raise MalformedFrame(f"{entity_type.__name__}: decoder consumed {size} bytes, schema walk {expected}")
    return entity, end


def decode_exact(entity_type: type[E], buf: bytes, pos: int = 0) -> E:
    """Decode one ``entity_type`` that must fill ``buf`` from ``pos`` to its end exactly."""
    entity, end = decode_entity(entity_type, buf, pos)
    if end != len(buf):
        raise MalformedFrame(f"{len(buf) - end} trailing bytes after {entity_type.__name__}")
    return entity


def encode_entity(entity: Entity) -> bytes:
    """Serialise ``entity``; any writer failure becomes ``EncodingError``."""
    buffer = io.BytesIO()
    try:
        entity_writer(type(entity))(buffer, entity)
    except Exception as exc:  # struct.error, TypeError, OutOfBoundValue, AttributeError, ...
        raise EncodingError(f"cannot encode {type(entity).__name__}: {type(exc).__name__}: {exc}") from exc
    return buffer.getvalue()
