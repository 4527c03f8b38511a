"""DescribeClientQuotas on a broker, answered from its metadata image as Kafka's brokers do.

The filter's components are checked first (INVALID_REQUEST with Kafka's reason for a duplicate
or unknown entity type, an unknown match type, an exact match without a name, `ip` combined with
another type); then every entity of the image that passes the filter is listed with its quota
values (entities sorted, keys sorted, so answers are comparable)."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kraftlab.node.controller.messages import respond
from kraftlab.node.metadata.client_quotas import QuotaError, check_filter, matches
from kraftlab.node.metadata.image import MetadataImage


def describe_client_quotas_response(request: Any, image: MetadataImage) -> Any:
    components = [(c.entity_type, int(c.match_type), c.match) for c in request.components]
    try:
        check_filter(components)
    except QuotaError as exc:
        return respond(request, {"error_code": ErrorCode.invalid_request, "error_message": str(exc), "entries": None})
    entries = []
    for entity, values in sorted(image.client_quotas.items(), key=lambda kv: [(t, n or "") for t, n in kv[0]]):
        if values and matches(entity, components, bool(request.strict)):
            entries.append({
                "entity": [{"entity_type": t, "entity_name": n} for t, n in entity],
                "values": [{"key": k, "value": v} for k, v in sorted(values.items())],
            })
    return respond(request, {"error_code": ErrorCode.none, "error_message": None, "entries": entries})
