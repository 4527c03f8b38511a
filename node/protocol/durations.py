"""Kafka's millisecond fields (MaxWaitMs, TimeoutMs, MaxLifetimeMs, …) read to the millisecond.

kio holds an int32/int64 milliseconds field as a `datetime.timedelta`; `total_seconds() * 1000` goes
through a float and truncating it loses a millisecond on about one value in a hundred (8200487 ms
reads as 8200486), so every reader of such a field goes through `millis`.
"""

from __future__ import annotations

import datetime

_ONE_MS = datetime.timedelta(milliseconds=1)


def millis(value: datetime.timedelta | int) -> int:
    """A milliseconds field as sent: a kio duration (exact integer division) or a plain integer."""
    if isinstance(value, datetime.timedelta):
        return value // _ONE_MS
    return int(value)
