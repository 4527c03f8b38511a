"""AlterClientQuotas on the active controller (Kafka's ClientQuotaControlManager).

Each entry (an entity and its ops) is decided on its own: an invalid entity or op refuses the
whole entry with INVALID_REQUEST and Kafka's reason (node.metadata.client_quotas); a key named
twice in one entry is INVALID_REQUEST too. A valid entry emits one ClientQuotaRecord per key
that changes (a set to a new value, or the removal of a key that is set); setting the value a
key already has, or removing one that is not set, writes nothing. `validate_only` writes nothing.
The request is atomic (one batch).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kraftlab.node.controller.messages import error_name
from kraftlab.node.controller.write import Outcome, Write
from kraftlab.node.metadata.client_quotas import QuotaError, entity_of, validate_op
from kraftlab.node.metadata.records import ClientQuotaRecord, QuotaEntityData


def _entry(w: Write, entry: Any, validate_only: bool) -> None:
    entity = entity_of([(c.entity_type, c.entity_name) for c in entry.entity])
    keys = [op.key for op in entry.ops]
    if len(set(keys)) != len(keys):
        raise QuotaError("Duplicate quota key in one entity's ops")
    for op in entry.ops:
        validate_op(entity, op.key, float(op.value), bool(op.remove))
    current = w.image.client_quotas.get(entity, {})
    records = []
    for op in entry.ops:
        if op.remove and op.key not in current:
            continue
        if not op.remove and current.get(op.key) == float(op.value):
            continue
        records.append(ClientQuotaRecord(
            entity=tuple(QuotaEntityData(entity_type=t, entity_name=n) for t, n in entity),
            key=op.key, value=0.0 if op.remove else float(op.value), remove=bool(op.remove)))
    if not validate_only:
        for r in records:
            w.emit(r)


def alter_client_quotas(w: Write, req: Any) -> Outcome:
    results, decisions = [], []
    for entry in req.entries:
        components = [{"entity_type": c.entity_type, "entity_name": c.entity_name} for c in entry.entity]
        try:
            _entry(w, entry, bool(req.validate_only))
            result: dict[str, Any] = {"error_code": ErrorCode.none, "error_message": None, "entity": components}
        except QuotaError as exc:
            result = {"error_code": ErrorCode.invalid_request, "error_message": str(exc), "entity": components}
        results.append(result)
        decisions.append({"api": "AlterClientQuotas",
                          "entity": {c["entity_type"]: c["entity_name"] for c in components},
                          "ops": {op.key: None if op.remove else float(op.value) for op in entry.ops},
                          "error": error_name(result["error_code"])})
    return Outcome({"entries": results}, decisions)
