"""Properties of the Raft core's value types: a record batch's offsets (Kafka's RecordBatch:
baseOffset, lastOffset = base + count - 1, nextOffset) and the merge of step outputs (a driver
that runs several steps before acting gives the same messages, events, updates, deadline and
flush as acting on each in turn)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from kraftlab.node.raft import messages as m
from kraftlab.node.raft.output import Commit, LeaderChange, Output, Update
from kraftlab.node.raft.ports import Batch, Record

records = st.lists(
    st.builds(Record, st.none() | st.binary(max_size=4), st.none() | st.binary(max_size=4)), min_size=1, max_size=8
).map(tuple)


@given(base=st.integers(0, 2**62), epoch=st.integers(0, 2**31 - 1), recs=records, control=st.booleans())
def test_a_batch_spans_its_records_from_base_to_last_offset(
    base: int, epoch: int, recs: tuple[Record, ...], control: bool
) -> None:
    batch = Batch(base, epoch, recs, control)
    offsets = range(batch.base_offset, batch.next_offset)
    assert len(offsets) == len(recs)
    assert batch.last_offset == offsets[-1] == batch.next_offset - 1
    assert batch.last_offset >= batch.base_offset
    # Two batches written back to back: the second's base is the first's last offset + 1.
    follower = Batch(batch.last_offset + 1, epoch, recs)
    assert follower.base_offset - batch.base_offset == len(recs)


envelopes = st.builds(
    m.Envelope,
    st.integers(0, 9),
    st.integers(0, 9),
    st.builds(m.BeginQuorumEpochRequest, st.integers(0, 9), st.integers(0, 9)),
)
updates: st.SearchStrategy[Update] = st.one_of(
    st.builds(LeaderChange, st.none() | st.integers(0, 9), st.integers(0, 9), st.booleans()),
    st.builds(Commit, st.lists(st.builds(Batch, st.integers(0, 99), st.integers(0, 9), records), max_size=2)),
)
outputs = st.builds(
    Output,
    st.lists(envelopes, max_size=3),
    st.lists(
        st.fixed_dictionaries({"ev": st.sampled_from(["role", "hw", "append"]), "n": st.integers(0, 9)}), max_size=3
    ),
    st.lists(updates, max_size=2),
    # small offsets and times: steps that ask for the same flush, or for offset 0, are common
    st.none() | st.integers(0, 3),
    st.none() | st.integers(0, 3),
)


def _copy(out: Output) -> Output:
    return Output(list(out.messages), list(out.events), list(out.updates), out.deadline, out.flush_to)


@given(steps=st.lists(outputs, min_size=1, max_size=5))
def test_merged_outputs_keep_every_step_in_order(steps: list[Output]) -> None:
    merged = _copy(steps[0])
    for later in steps[1:]:
        merged.merge(later)
    assert merged.messages == [e for s in steps for e in s.messages]
    assert merged.events == [e for s in steps for e in s.events]
    assert merged.updates == [u for s in steps for u in s.updates]
    # The last step's deadline is the one to wait for (an earlier one is stale by then).
    assert merged.deadline == steps[-1].deadline
    # Flushing to the furthest offset any step asked for covers every step.
    asked = [s.flush_to for s in steps if s.flush_to is not None]
    assert merged.flush_to == (max(asked) if asked else None)


@given(a=outputs, b=outputs, c=outputs)
def test_merging_is_associative(a: Output, b: Output, c: Output) -> None:
    left = _copy(a)
    left.merge(b)
    left.merge(c)
    inner = _copy(b)
    inner.merge(c)
    right = _copy(a)
    right.merge(inner)
    assert (left.messages, left.events, left.updates, left.deadline, left.flush_to) == (
        right.messages,
        right.events,
        right.updates,
        right.deadline,
        right.flush_to,
    )


def test_a_merged_flush_is_the_furthest_asked_for_every_pair_of_small_offsets() -> None:
    # Exhaustive over small values (None: the step asked for no flush; 0 is an offset like any other).
    values = [None, 0, 1, 2]
    for first in values:
        for later in values:
            merged = Output(flush_to=first)
            merged.merge(Output(flush_to=later))
            asked = [v for v in (first, later) if v is not None]
            assert merged.flush_to == (max(asked) if asked else None), (first, later)
