"""A kio entity written to bytes and read back by kio's own serializers (Kafka's schema, not the
node's codec): the reference the wire tests compare the node's encoding against."""

from __future__ import annotations

import io
from typing import Any


def through_bytes(entity: Any) -> Any:
    """`entity` written and read back by kio; every byte written is read."""
    from kio.serial import entity_reader, entity_writer

    buf = io.BytesIO()
    entity_writer(type(entity))(buf, entity)
    data = buf.getvalue()
    decoded, size = entity_reader(type(entity))(data, 0)
    assert size == len(data)
    return decoded
