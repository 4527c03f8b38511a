"""node.journal (JSON Lines, whole lines, tail-safe) and node.metrics (registry, HTTP endpoint)."""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path

import pytest

from kraftlab.node.clock import ManualTime, SkewedClock
from kraftlab.node.journal import JournalWriter, MemoryJournal, read_journal
from kraftlab.node.metrics import (
    RAFT_ELECTIONS,
    RAFT_EPOCH,
    RAFT_ROLE,
    MetricsServer,
    Registry,
    WindowedRate,
)


def test_journal_lines(tmp_path: Path) -> None:
    real = ManualTime()
    clock = SkewedClock(None, real)
    path = tmp_path / "sub" / "journal.jsonl"
    with JournalWriter(path, clock, 3) as j:
        j.write("role", role="leader", epoch=4, leader=3, voted_for=None)
        real.advance(1_000_000)
        j.write("append", base=10, epoch=4, crcs=[1, 2], control=False, leader=True)
    lines = path.read_text().splitlines()
    assert len(lines) == 2
    first = json.loads(lines[0])
    assert first == {
        "ts": real.wall // 1_000_000 - 1,
        "mono": real.mono - 1_000_000,
        "rmono": real.mono - 1_000_000,
        "node": 3,
        "ev": "role",
        "role": "leader",
        "epoch": 4,
        "leader": 3,
        "voted_for": None,
    }
    assert read_journal(path)[1]["crcs"] == [1, 2]
    # appending to an existing journal (a restart) keeps earlier lines
    with JournalWriter(path, clock, 3) as j:
        j.write("start", roles=["controller"], voters=[1, 2, 3], log_start=0, log_end=12, hw=12)
    assert [e["ev"] for e in read_journal(path)] == ["role", "append", "start"]
    with pytest.raises(ValueError, match="closed"):
        j.write("x")


def test_a_file_journal_names_its_clock_domain_on_start(tmp_path: Path) -> None:
    from kraftlab.node.journal import boot_id

    clock = SkewedClock(None, ManualTime())
    with JournalWriter(tmp_path / "j.jsonl", clock, 1) as j:
        j.write("start", roles=["controller"], voters=[1], log_start=0, log_end=0, hw=0)
        j.write("role", role="unattached", epoch=0, leader=None, voted_for=None)
    start, role = (json.loads(x) for x in (tmp_path / "j.jsonl").read_text().splitlines())
    assert start["boot_id"] == boot_id() and start["boot_id"]
    assert "boot_id" not in role and role["rmono"] == clock.real_mono_ns()


def test_journal_partial_tail_skipped(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    path.write_text('{"ev":"a"}\n{"ev":"b"')
    assert read_journal(path) == [{"ev": "a"}]


def test_journal_tail_while_written_sees_whole_lines(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    clock = SkewedClock(None)
    writer = JournalWriter(path, clock, 1)
    big = "x" * 20000
    done = threading.Event()

    def produce() -> None:
        for i in range(300):
            writer.write("append", i=i, pad=big)
        done.set()

    t = threading.Thread(target=produce)
    t.start()
    seen = 0
    with open(path, encoding="utf-8") as f:
        buf = ""
        while not (done.is_set() and seen == 300):
            chunk = f.read()
            buf += chunk
            *complete, buf = buf.split("\n")
            for line in complete:
                assert json.loads(line)["i"] == seen
                seen += 1
    t.join()
    writer.close()
    assert seen == 300


def test_memory_journal() -> None:
    j = MemoryJournal(SkewedClock(None, ManualTime()), 2)
    j.write("hw", hw=5, epoch=1)
    assert j.entries[0]["ev"] == "hw" and j.entries[0]["node"] == 2 and j.entries[0]["hw"] == 5


def test_registry_render() -> None:
    r = Registry()
    r.set(RAFT_EPOCH, 7)
    r.inc(RAFT_ELECTIONS)
    r.inc(RAFT_ELECTIONS, 2)
    r.set_role("leader")
    r.set("custom_thing", 0.5, dir='a"b')
    text = r.render()
    assert "# TYPE kraft_raft_current_epoch gauge\nkraft_raft_current_epoch 7\n" in text
    assert "# TYPE kraft_raft_election_count_total counter\nkraft_raft_election_count_total 3\n" in text
    assert 'kraft_raft_role{role="leader"} 1' in text and 'kraft_raft_role{role="follower"} 0' in text
    assert 'custom_thing{dir="a\\"b"} 0.5' in text
    assert r.value(RAFT_ROLE, role="leader") == 1.0
    with pytest.raises(ValueError, match="is a gauge"):
        r.inc(RAFT_EPOCH)
    with pytest.raises(ValueError, match="cannot decrease"):
        r.inc(RAFT_ELECTIONS, -1)


def test_windowed_rate() -> None:
    w = WindowedRate(window_ms=1000)
    for t in range(0, 1000, 100):
        w.record(float(t))
    assert w.rate(999.0) == 10.0
    assert w.rate(1550.0) == 4.0  # events at 600..900 remain
    assert w.rate(5000.0) == 0.0


async def _http(port: int, request: bytes) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(request)
    await writer.drain()
    data = await reader.read()
    writer.close()
    return data


def test_metrics_http() -> None:
    async def run() -> None:
        r = Registry()
        r.set(RAFT_EPOCH, 3)
        server = MetricsServer(r, "127.0.0.1", 0)
        await server.start()
        try:
            ok = await _http(server.port, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
            assert ok.startswith(b"HTTP/1.1 200 OK")
            assert b"text/plain; version=0.0.4" in ok
            assert b"\nkraft_raft_current_epoch 3\n" in ok
            assert b"\nprocess_resident_memory_bytes " in ok  # sampled at each scrape
            r.set(RAFT_EPOCH, 4)
            assert b"epoch 4\n" in await _http(server.port, b"GET /metrics HTTP/1.0\r\n\r\n")
            assert (await _http(server.port, b"GET / HTTP/1.1\r\n\r\n")).startswith(b"HTTP/1.1 404")
            assert (await _http(server.port, b"POST /metrics HTTP/1.1\r\n\r\n")).startswith(b"HTTP/1.1 405")
            assert (await _http(server.port, b"garbage\r\n\r\n")).startswith(b"HTTP/1.1 400")
        finally:
            await server.stop()

    asyncio.run(run())


def test_a_scrape_carries_the_process_memory_and_cpu_under_prometheus_names() -> None:
    from kraftlab.node.metrics import Registry, sample_process

    r = Registry()
    sample_process(r)
    rss, cpu = r.value("process_resident_memory_bytes"), r.value("process_cpu_seconds_total")
    assert rss is not None and 1_000_000 < rss < 10_000_000_000
    assert cpu is not None and cpu >= 0
    assert "# TYPE process_resident_memory_bytes gauge" in r.render()
