"""Dynamic configuration on the active controller: IncrementalAlterConfigs and AlterConfigs.

Resources: a topic (it must exist: UNKNOWN_TOPIC_OR_PARTITION) or a broker (`""` for the
cluster-wide default, or a broker id); anything else is INVALID_REQUEST. IncrementalAlterConfigs
applies SET / DELETE / APPEND / SUBTRACT (the last two on comma-separated lists) per key; the
legacy AlterConfigs replaces the resource's whole set. A key named twice for one resource is
INVALID_REQUEST. Every change is a ConfigRecord (a null value deletes the key), all of a
request's resources in its one batch; `validate_only` writes nothing.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kraftlab.node.controller.messages import error_name
from kraftlab.node.controller.write import Outcome, Write
from kraftlab.node.metadata.records import RESOURCE_BROKER, RESOURCE_TOPIC, ConfigRecord

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def _check_resource(w: Write, rtype: int, name: str) -> tuple[ErrorCode, str | None]:
    if rtype == RESOURCE_TOPIC:
        if w.image.topic(name) is None:
            return ErrorCode.unknown_topic_or_partition, f"unknown topic {name!r}"
        return ErrorCode.none, None
    if rtype == RESOURCE_BROKER:
        if name == "" or name.isdigit():
            return ErrorCode.none, None
        return ErrorCode.invalid_request, f"bad broker resource name {name!r}"
    return ErrorCode.invalid_request, f"unsupported resource type {rtype}"


def _new_value(op: int, current: str | None, value: str | None) -> str | None:
    if op == SET:
        return value
    if op == DELETE:
        return None
    items = [x for x in (current or "").split(",") if x]
    given = [x for x in (value or "").split(",") if x]
    if op == APPEND:
        items += [x for x in given if x not in items]
    elif op == SUBTRACT:
        items = [x for x in items if x not in given]
    else:
        raise ValueError(f"unknown config operation {op}")
    return ",".join(items) if items else None


def _alter(w: Write, req: Any, incremental: bool) -> Outcome:
    api = "IncrementalAlterConfigs" if incremental else "AlterConfigs"
    validate_only = bool(getattr(req, "validate_only", False))
    results, decisions = [], []
    for res in req.resources:
        rtype, name = res.resource_type, res.resource_name
        code, message = _check_resource(w, rtype, name)
        keys = [c.name for c in res.configs]
        if code == ErrorCode.none and len(set(keys)) != len(keys):
            code, message = ErrorCode.invalid_request, "a key is named more than once"
        if code == ErrorCode.none:
            current = dict(w.image.configs.get((rtype, name), {}))
            wanted: dict[str, str | None] = {} if incremental else dict.fromkeys(current)
            try:
                for c in res.configs:
                    op = c.config_operation if incremental else SET
                    if op == SET and c.value is None and incremental:
                        raise ValueError(f"SET of {c.name} needs a value")
                    wanted[c.name] = _new_value(op, current.get(c.name), c.value)
            except ValueError as exc:
                code, message = ErrorCode.invalid_request, str(exc)
            else:
                if not validate_only:
                    for key in sorted(wanted):
                        if wanted[key] != current.get(key):
                            w.emit(ConfigRecord(resource_type=rtype, resource_name=name, name=key, value=wanted[key]))
        results.append({"error_code": code, "error_message": message, "resource_type": rtype, "resource_name": name})
        decisions.append({"api": api, "resource_type": rtype, "resource": name, "error": error_name(code)})
    return Outcome({"responses": results}, decisions)


def incremental_alter_configs(w: Write, req: Any) -> Outcome:
    return _alter(w, req, incremental=True)


def alter_configs(w: Write, req: Any) -> Outcome:
    return _alter(w, req, incremental=False)
