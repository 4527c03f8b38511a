"""Seeded random kio entities of any schema, with ordinary or absurd field values.

Used by the round-trip tests (every field kind of every api and version) and by the fuzzer (valid
frames whose values are extreme: boundary integers, empty/huge/odd strings, nulls, long arrays).
"""

from __future__ import annotations

import datetime
import functools
import random
import uuid
from collections.abc import Callable
from dataclasses import MISSING, Field, fields
from functools import cache
from typing import Any, TypeVar

from kio.schema.errors import ErrorCode
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
from kio.static.primitive import TZAware, i32Timedelta, i64Timedelta
from kio.static.protocol import Entity

E = TypeVar("E", bound=Entity)

_INT_RANGES: dict[str, tuple[int, int]] = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "uint8": (0, 2**8 - 1),
    "uint16": (0, 2**16 - 1),
    "uint32": (0, 2**32 - 1),
    "uint64": (0, 2**64 - 1),
}
_ODD_STRINGS = ("", " ", "\x00", "é", "日本語", "💥" * 3, "a" * 300, "../../etc/passwd", "%s%n", "-1")
_ERROR_CODES = tuple(ErrorCode)
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


class EntityFactory:
    """Random entities; ``absurd`` chooses boundary values and oddities much more often."""

    def __init__(self, rng: random.Random, *, absurd: bool = False, max_items: int = 4, max_depth: int = 6) -> None:
        self.rng = rng
        self.absurd = absurd
        self.max_items = max_items
        self.max_depth = max_depth

    def entity(self, entity_type: type[E], depth: int = 0) -> E:
        values: dict[str, Any] = {}
        for field in fields(entity_type):
            tagged = get_field_tag(field) is not None
            if tagged and self.rng.random() < 0.5 and field.default is not MISSING:
                continue  # leave the tagged field at its default (so it is not written)
            values[field.name] = self._field(entity_type, field, depth, tagged)
        return entity_type(**values)

    def _field(self, entity_type: type[Entity], field: Field[Any], depth: int, tagged: bool) -> Any:
        nullable = not tagged and is_optional(field)
        klass = classify_field(field)
        if nullable and self.rng.random() < (0.3 if self.absurd else 0.1):
            return None
        match klass:
            case PrimitiveField():
                return self.primitive(get_schema_field_type(field), nullable or (tagged and is_optional(field)))
            case PrimitiveTupleField():
                kind = get_schema_field_type(field)
                return tuple(self.primitive(kind, False) for _ in range(self._count(depth)))
            case EntityField(nested):
                return self.entity(nested, depth + 1)
            case EntityTupleField(nested):
                return tuple(self.entity(nested, depth + 1) for _ in range(self._count(depth)))
        raise TypeError(f"unclassifiable field {field.name} of {entity_type.__name__}")

    def _count(self, depth: int) -> int:
        if depth >= self.max_depth:
            return 0
        if self.absurd and self.rng.random() < 0.1:
            return self.rng.randrange(self.max_items * 4 + 1)
        return self.rng.randrange(self.max_items + 1)

    def primitive(self, kind: str, nullable: bool) -> Any:
        rng = self.rng
        if kind in _INT_RANGES:
            lo, hi = _INT_RANGES[kind]
            if self.absurd and rng.random() < 0.6:
                return rng.choice((lo, hi, 0, -1 if lo < 0 else 1, lo + 1, hi - 1))
            return rng.randint(max(lo, -1000), min(hi, 1000))
        if kind == "bool":
            return rng.random() < 0.5
        if kind == "float64":
            if self.absurd and rng.random() < 0.5:
                return rng.choice((0.0, -0.0, 1e308, -1e308, 5e-324))
            return rng.uniform(-1e6, 1e6)
        if kind == "error_code":
            return rng.choice(_ERROR_CODES)
        if kind == "string":
            return self._string()
        if kind in ("bytes", "records"):
            size = rng.randrange(2000) if self.absurd and rng.random() < 0.2 else rng.randrange(16)
            return rng.randbytes(size)
        if kind == "uuid":
            if nullable and rng.random() < 0.2:
                return None
            return uuid.UUID(int=rng.getrandbits(128) or 1)
        if kind == "timedelta_i32":
            return i32Timedelta.parse(datetime.timedelta(milliseconds=self.primitive("int32", False)))
        if kind == "timedelta_i64":  # kio decodes only what fits a timedelta: stay within int32 ms
            return i64Timedelta.parse(datetime.timedelta(milliseconds=self.primitive("int32", False)))
        if kind == "datetime_i64":
            if nullable and rng.random() < 0.2:
                return None
            seconds = rng.randrange(4000 * 365 * 86_400) if self.absurd else rng.randrange(2**31)
            return TZAware.parse(_EPOCH + datetime.timedelta(seconds=seconds))  # kio's TZAware: whole seconds
        raise TypeError(f"unknown kafka type {kind!r}")

    def _string(self) -> str:
        rng = self.rng
        if self.absurd:
            roll = rng.random()
            if roll < 0.3:
                return rng.choice(_ODD_STRINGS)
            if roll < 0.4:
                return "".join(chr(rng.randrange(0x20, 0xD7FF)) for _ in range(rng.randrange(1, 200)))
        return "".join(rng.choice("abcdefghijklmnopqrstuvwxyz0123456789-._") for _ in range(rng.randrange(12)))


def _zero(kind: str) -> Any:
    if kind in _INT_RANGES:
        return 0
    zeros: dict[str, Any] = {
        "bool": False,
        "float64": 0.0,
        "error_code": ErrorCode.none,
        "string": "",
        "bytes": b"",
        "records": b"",
        "uuid": None,
        "timedelta_i32": i32Timedelta.parse(datetime.timedelta(0)),
        "timedelta_i64": i64Timedelta.parse(datetime.timedelta(0)),
        "datetime_i64": TZAware.parse(_EPOCH),
    }
    return zeros[kind]


def zero_entity(entity_type: type[E], **values: Any) -> E:
    """An entity with ``values`` and every other required field at its zero value (empty, 0, null)."""
    for name, make in _zero_fields(entity_type):
        if name not in values:
            values[name] = make()
    return entity_type(**values)


@cache
def _zero_fields(entity_type: type[Entity]) -> tuple[tuple[str, Callable[[], Any]], ...]:
    """(field name, zero-value factory) of the fields of ``entity_type`` that have no default."""
    result: list[tuple[str, Callable[[], Any]]] = []
    for field in fields(entity_type):
        if field.default is not MISSING or field.default_factory is not MISSING:
            continue
        match classify_field(field):
            case PrimitiveField():  # zero values are immutable: make each once
                result.append((field.name, functools.partial(lambda v: v, _zero(get_schema_field_type(field)))))
            case EntityField(nested):
                nullable = is_optional(field)
                result.append((field.name, (lambda: None) if nullable else functools.partial(zero_entity, nested)))
            case PrimitiveTupleField() | EntityTupleField():
                result.append((field.name, tuple))
    return tuple(result)
