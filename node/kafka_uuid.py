"""Kafka's Uuid in text: URL-safe base64 of the 16 bytes without padding (22 characters), as
Kafka prints cluster ids, topic ids and directory ids. No kio here, so the storage tool and the
command line can use it without loading the protocol library."""

from __future__ import annotations

import base64
import binascii
import uuid


def uuid_to_kafka(value: uuid.UUID) -> str:
    """Kafka's Uuid.toString: base64url without padding."""
    return base64.urlsafe_b64encode(value.bytes).decode().rstrip("=")


def uuid_from_kafka(text: str) -> uuid.UUID:
    """The UUID a Kafka Uuid string encodes (lenient: any base64url of 16 bytes)."""
    return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))


def parse_kafka_uuid(text: str, what: str) -> uuid.UUID:
    """Kafka's Uuid.fromString, strictly: 22 characters of URL-safe base64; ValueError naming `what`."""
    raw = b""
    if len(text) == 22 and all(c.isalnum() or c in "-_" for c in text):
        try:
            raw = base64.urlsafe_b64decode(text + "==")
        except (binascii.Error, ValueError):
            raw = b""
    if len(raw) != 16:
        raise ValueError(f"invalid {what} {text!r}: expected a base64 UUID such as {random_kafka_uuid()}")
    return uuid.UUID(bytes=raw)


def random_kafka_uuid() -> str:
    """A new random Uuid string that does not look like a command-line option (Kafka avoids a leading '-')."""
    while True:
        text = uuid_to_kafka(uuid.uuid4())
        if not text.startswith("-"):
            return text
