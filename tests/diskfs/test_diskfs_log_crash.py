"""Crash consistency of DiskLog on the disk-fault filesystem: random appends, flushes, truncations,
rolls, hw checkpoints and power losses (the log closed as by SIGKILL, then everything not fsynced
dropped by the filesystem). After every crash the log reopens without complaint to a batch-aligned
prefix holding at least everything flushed, and a checkpointed high-water mark never makes
recovery refuse the log."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from kraftlab.node.raft.ports import Batch, Record
from kraftlab.node.storage.log import DiskLog, FlushTicket
from kraftlab.testing.diskfs_mounts import Mounted, mounted

from . import needs_fuse

pytestmark = needs_fuse
_dirs = itertools.count()


def make_batch(base: int, epoch: int, n: int) -> Batch:
    records = tuple(Record(f"k{base + i}".encode(), bytes([(base + i) % 251]) * 20) for i in range(n))
    return Batch(base, epoch, records, False, 1_700_000_000_000 + base)


@pytest.fixture(scope="module")
def disk(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Mounted]:
    with mounted(tmp_path_factory.mktemp("diskfs")) as m:
        yield m

programs = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(1, 3), st.integers(1, 4)),
        st.tuples(st.just("flush")),
        st.tuples(st.just("begin_flush")),
        st.tuples(st.just("complete_flush")),
        st.tuples(st.just("truncate"), st.integers(0, 6)),
        st.tuples(st.just("checkpoint")),
        st.tuples(st.just("crash")),
    ),
    max_size=40,
)


@settings(max_examples=40)
@given(program=programs, segment_bytes=st.sampled_from([60, 150, 400, 1 << 20]))
@example(program=[("append", 1, 1), ("flush",), ("checkpoint",), ("truncate", 1), ("crash",)], segment_bytes=60)
@example(program=[("append", 2, 1), ("flush",), ("append", 3, 2), ("checkpoint",), ("crash",)], segment_bytes=150)
@example(program=[("append", 3, 2), ("flush",), ("append", 1, 1), ("truncate", 3), ("crash",)], segment_bytes=60)
@example(
    program=[("append", 3, 2), ("begin_flush",), ("append", 2, 1), ("complete_flush",), ("crash",)], segment_bytes=60
)
@example(
    program=[("append", 3, 2), ("begin_flush",), ("truncate", 3), ("append", 2, 1), ("complete_flush",), ("crash",)],
    segment_bytes=60,
)
def test_crash_keeps_a_prefix_with_everything_flushed(disk: Mounted, program: list[tuple[object, ...]],
                                                     segment_bytes: int) -> None:
    directory = Path(disk.mountpoint) / f"metadata-{next(_dirs)}"
    if True:
        log = DiskLog.open(directory, segment_bytes=segment_bytes)
        try:
            written: list[Batch] = []  # what the log held before the last crash, batch by batch
            truncated = False  # since the last crash (a cut's fsync may also make earlier bytes durable)
            tickets: list[FlushTicket] = []
            checkpointed = 0
            for op in program:
                if op[0] == "append":
                    _, count, n = op
                    for _ in range(int(count)):  # type: ignore[call-overload]
                        batch = make_batch(log.end_offset(), 1, int(n))  # type: ignore[call-overload]
                        log.append([batch])
                        written.append(batch)
                elif op[0] == "flush":
                    log.flush()
                elif op[0] == "begin_flush":
                    tickets.append(log.begin_flush())
                    truncated = True
                elif op[0] == "complete_flush":
                    if tickets:
                        ticket = tickets.pop(0)
                        before = log.flushed_end_offset()
                        ticket.sync()
                        log.complete_flush(ticket)
                        assert before <= log.flushed_end_offset() <= log.end_offset()
                elif op[0] == "truncate":
                    # Raft never truncates below the high-water mark (the core refuses to)
                    to = max(log.end_offset() - int(op[1]), checkpointed)  # type: ignore[call-overload]
                    log.truncate_to(to)
                    written = log.read(0, 1 << 30) if log.end_offset() else []
                    truncated = True
                elif op[0] == "checkpoint":
                    log.checkpoint_hw(log.end_offset())
                    checkpointed = min(log.end_offset(), log.flushed_end_offset())
                else:
                    flushed, end = log.flushed_end_offset(), log.end_offset()
                    for ticket in tickets:
                        ticket.discard()
                    tickets.clear()
                    log.close()
                    disk.ctl(cmd="crash")
                    log = DiskLog.open(directory, segment_bytes=segment_bytes)
                    recovered = log.end_offset()
                    assert flushed <= recovered <= end
                    if not truncated:
                        assert recovered == flushed
                    assert log.read(0, 1 << 30) == [b for b in written if b.next_offset <= recovered]
                    written = [b for b in written if b.next_offset <= recovered]
                    truncated = False
        finally:
            for ticket in tickets:
                ticket.discard()
            log.close()
