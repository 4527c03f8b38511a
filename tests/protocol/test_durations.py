"""Kafka's millisecond fields are read to the millisecond, whatever the value."""

from __future__ import annotations

import datetime

from hypothesis import given
from hypothesis import strategies as st

from kraftlab.node.protocol.durations import millis


@given(st.integers(min_value=-(2**63) // 10**6, max_value=2**63 // 10**6))
def test_a_duration_reads_as_the_milliseconds_it_was_built_from(ms: int) -> None:
    assert millis(datetime.timedelta(milliseconds=ms)) == ms


def test_the_value_float_seconds_got_wrong_and_plain_integers() -> None:
    assert int(datetime.timedelta(milliseconds=8_200_487).total_seconds() * 1000) == 8_200_486
    assert millis(datetime.timedelta(milliseconds=8_200_487)) == 8_200_487
    assert millis(30_000) == 30_000
