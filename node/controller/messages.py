"""Version-independent construction of kio request/response entities.

A response must be of the same version as its request, and kio has one class per version, so
the cores build responses by field name: `build(cls, values)` fills the fields `cls` has from a
dict (nested entity lists as lists of dicts), ignores the ones it lacks, and gives the rest their
schema default or a zero value. `response_class(request)` finds the response class of the same
API and version as a kio request instance.
"""

from __future__ import annotations

import datetime
import importlib
import types
import typing
import uuid
from dataclasses import MISSING, Field, fields, is_dataclass
from functools import cache
from typing import Any

from kio.schema.errors import ErrorCode


def _unwrap_optional(tp: Any) -> tuple[Any, bool]:
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        return (args[0] if len(args) == 1 else tp), True
    return tp, False


@cache
def _field_shape(cls: type, name: str) -> tuple[str, type | None, bool, bool]:
    """(kafka_type, nested entity class or None, is_array, optional) of one field."""
    f = next(f for f in fields(cls) if f.name == name)
    tp, optional = _unwrap_optional(f.type)
    is_array = typing.get_origin(tp) is tuple
    inner = typing.get_args(tp)[0] if is_array else tp
    inner, _ = _unwrap_optional(inner)
    entity = inner if isinstance(inner, type) and is_dataclass(inner) else None
    return f.metadata.get("kafka_type", ""), entity, is_array, optional


_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


def _zero(kafka_type: str, optional: bool) -> Any:
    if optional:
        return None
    match kafka_type:
        case "string":
            return ""
        case "bytes" | "records":
            return b""
        case "bool":
            return False
        case "uuid":
            return uuid.UUID(int=0)
        case "float64":
            return 0.0
        case "error_code":
            return ErrorCode.none
        case "timedelta_i32" | "timedelta_i64":
            return datetime.timedelta(0)
        case "datetime_i64":
            return _EPOCH
        case _:
            return 0


def _convert(kafka_type: str, entity: type | None, value: Any) -> Any:
    if entity is not None and isinstance(value, dict):
        return build(entity, value)
    if kafka_type == "error_code" and isinstance(value, int) and not isinstance(value, ErrorCode):
        return ErrorCode(value)
    if kafka_type.startswith("timedelta") and isinstance(value, int):
        return datetime.timedelta(milliseconds=value)
    if kafka_type == "datetime_i64" and isinstance(value, int):  # ms since the epoch (never negative here)
        return _EPOCH + datetime.timedelta(milliseconds=max(value, 0))
    return value


def _has_default(f: Field[Any]) -> bool:
    return f.default is not MISSING or f.default_factory is not MISSING


@cache
def _plan(cls: type) -> tuple[tuple[str, str, type | None, bool, bool, bool], ...]:
    """(name, kafka_type, nested entity class, is_array, optional, has a default) of each field of
    `cls`, worked out once per class: `build` runs for every request and response of the node."""
    return tuple((f.name, *_field_shape(cls, f.name), _has_default(f)) for f in fields(cls))


def build(cls: type, values: dict[str, Any]) -> Any:
    """An instance of the kio entity `cls` from the `values` it has fields for."""
    kwargs: dict[str, Any] = {}
    for name, kafka_type, entity, is_array, optional, has_default in _plan(cls):
        if name in values:
            v = values[name]
            if is_array and v is not None:
                kwargs[name] = tuple(_convert(kafka_type, entity, x) for x in v)
            else:
                kwargs[name] = _convert(kafka_type, entity, v)
        elif not has_default:
            if is_array:
                kwargs[name] = None if optional else ()
            elif entity is not None and not optional:
                kwargs[name] = build(entity, {})
            else:
                kwargs[name] = _zero(kafka_type, optional)
    return cls(**kwargs)


@cache
def _response_class_of(request_cls: type) -> type:
    module = importlib.import_module(request_cls.__module__.rsplit(".", 1)[0] + ".response")
    return getattr(module, request_cls.__name__.removesuffix("Request") + "Response")


def response_class(request: Any) -> type:
    """The kio response class of the same API and version as `request`."""
    request_cls: type = type(request)
    return _response_class_of(request_cls)


def respond(request: Any, values: dict[str, Any]) -> Any:
    """`build(response_class(request), values)`."""
    return build(response_class(request), values)


def api_name(message: Any) -> str:
    """`BrokerHeartbeat` for a BrokerHeartbeatRequest (or Response) of any version."""
    return type(message).__name__.removesuffix("Request").removesuffix("Response")


def error_name(code: ErrorCode) -> str:
    """Kafka's error name as journals report it (`NOT_CONTROLLER`, `NONE`)."""
    return ErrorCode(code).name.upper()


def as_values(entity: Any) -> Any:
    """The inverse of `build`: an entity as nested dicts/lists (to rebuild it at another version)."""
    if is_dataclass(entity) and not isinstance(entity, type):
        return {f.name: as_values(getattr(entity, f.name)) for f in fields(entity)}
    if isinstance(entity, tuple):
        return [as_values(x) for x in entity]
    return entity
