"""The queue workload over in-memory partition logs: its ops and history in the checker's shape,
a valid verdict on correct logs (also with timeouts and refusals), and an invalid one naming the
broken rule when the logs lose, duplicate, reorder or skip records (bugs planted here, by
subclassing the fake, never in the product)."""

from __future__ import annotations

import asyncio
import io
import json
import random
from collections.abc import Mapping
from typing import Any

import pytest

from kraftlab.checker.history import History, parse_jsonl_line
from kraftlab.checker.queue import check_queue
from kraftlab.checker.queue.partitioned import check_partitioned
from kraftlab.workloads.catalog import build
from kraftlab.workloads.client import Invocation
from kraftlab.workloads.fake_kafka import SERVED, FakeKafka
from kraftlab.workloads.fake_queue import FakeLogs, FakeQueueClient
from kraftlab.workloads.history import HistoryWriter
from kraftlab.workloads.interpreter import ProcessIds, run_phase
from kraftlab.workloads.kafka import IndefiniteError
from kraftlab.workloads.queue_client import TopicPartition, definite_send_error, key_of, partition_of


def run_queue(logs: FakeLogs, *, seconds: float = 1.0, seed: int = 1, concurrency: int = 4,
              rate: float = 300.0) -> list[dict[str, Any]]:
    """Main phase then final reads over `logs`; the history's lines."""
    spec = FakeKafka().spec()
    w = build("queue", spec, rate=rate, concurrency=concurrency, time_limit=seconds, queue_connector=logs.connector,
              data_plane=True)
    out = io.StringIO()
    history = HistoryWriter(stream=out)
    pids = ProcessIds()
    nodes = sorted(spec)

    # each phase in its own event loop, as the runner runs them
    asyncio.run(run_phase(w.main, w.factory, history, pids, nodes=nodes, concurrency=concurrency,
                          rng=random.Random(seed), op_timeout=2.0))
    asyncio.run(run_phase(w.final, w.factory, history, pids, nodes=nodes, concurrency=len(nodes),
                          rng=random.Random(seed + 1), op_timeout=6.0))
    return [json.loads(line) for line in out.getvalue().splitlines()]


def verdict(lines: list[dict[str, Any]]) -> dict[str, Any]:
    """The queue checker's verdict, which the partition-by-partition checker (Spark's way) shares."""
    events = [parse_jsonl_line(json.dumps(x), "<test>", i + 1, i) for i, x in enumerate(lines)]
    whole = check_queue(History(events))
    parts = check_partitioned(History(events))
    assert parts["valid"] == whole["valid"] and parts["stats"]["sends"] == whole["stats"]["sends"]
    return whole


def broken(res: dict[str, Any]) -> set[str]:
    return {a["type"] for a in res["anomalies"]}


def test_keys_name_partitions() -> None:
    assert key_of(("queue", 3)) == "queue-3" and partition_of("my-topic-12") == ("my-topic", 12)
    with pytest.raises(ValueError, match="topic-partition"):
        partition_of("nopartition")
    assert definite_send_error("NOT_ENOUGH_REPLICAS") and definite_send_error("INVALID_RECORD")
    assert not definite_send_error("NOT_LEADER_OR_FOLLOWER") and not definite_send_error("REQUEST_TIMED_OUT")
    assert not definite_send_error("NOT_ENOUGH_REPLICAS_AFTER_APPEND")


def test_ops_and_a_valid_verdict_on_correct_logs() -> None:
    logs = FakeLogs()
    lines = run_queue(logs)
    assert {x["workload"] for x in lines} == {"queue"}
    oks = [x for x in lines if x["type"] == "ok"]
    sends = [x["value"] for x in oks if x["f"] == "send"]
    polls = [x["value"] for x in oks if x["f"] == "poll"]
    assert len(sends) > 30 and polls
    assert len({s["value"] for s in sends}) == len(sends)  # unique values
    for s in sends:  # each acknowledged offset holds the value sent
        assert logs.logs[partition_of(s["key"])].records[s["offset"]] == str(s["value"]).encode()
    finals = [x for x in lines if x["f"] == "poll" and x["type"] == "invoke" and x["value"].get("final")]
    assert sorted(k for f in finals for k in f["value"]["positions"]) == sorted([f"queue-{p}" for p in range(4)] * 3)
    final_done = [p for p in polls if "high_water_marks" in p]
    assert len(final_done) == 12
    for p in final_done:
        for k, hw in p["high_water_marks"].items():
            assert [o for o, _ in p["records"].get(k, [])] == list(range(hw))
    # a poll's invocation records where the consumer fetched from: its own last offset + 1
    invokes = [x for x in lines if x["f"] == "poll" and x["type"] == "invoke" and not x["value"].get("final")]
    assert any(any(v > 0 for v in x["value"]["positions"].values()) for x in invokes)
    res = verdict(lines)
    assert res["valid"] is True, res.get("explanation")
    assert res["stats"]["sends"]["acknowledged"] == len(sends)


def test_valid_under_timeouts_and_refusals() -> None:
    logs = FakeLogs(rng=random.Random(5), p_timeout=0.1, p_refuse=0.1)
    lines = run_queue(logs, seed=5)
    types = {(x["f"], x["type"], x.get("error")) for x in lines if x["f"] == "send"}
    assert ("send", "info", "REQUEST_TIMED_OUT") in types and ("send", "fail", "NOT_ENOUGH_REPLICAS") in types
    res = verdict(lines)
    assert res["valid"] is True, res.get("explanation")


class LosingLogs(FakeLogs):
    """Acknowledges a record, then truncates it away: the next append reuses its offset."""

    def append(self, tp: TopicPartition, value: bytes) -> int:
        offset = super().append(tp, value)
        if offset == 3 and not getattr(self, "lost", False):
            self.logs[tp].records.pop()
            self.lost = True
        return offset


class DuplicatingLogs(FakeLogs):
    """Appends one record twice (a re-appended batch)."""

    def append(self, tp: TopicPartition, value: bytes) -> int:
        offset = super().append(tp, value)
        if offset == 2:
            super().append(tp, value)
        return offset


class ReorderingLogs(FakeLogs):
    """Hands a consumer a batch's records out of offset order."""

    def fetch(self, tp: TopicPartition, offset: int, max_records: int) -> list[tuple[int, bytes | None]]:
        got = super().fetch(tp, offset, max_records)
        return list(reversed(got)) if len(got) > 1 else got


class SkippingLogs(FakeLogs):
    """Fetches jump over a record that is in the log."""

    def fetch(self, tp: TopicPartition, offset: int, max_records: int) -> list[tuple[int, bytes | None]]:
        got = super().fetch(tp, offset, max_records)
        return [r for r in got if r[0] != 4]


@pytest.mark.parametrize(("logs", "rule"), [
    (LosingLogs(), {"LostWrite", "InconsistentOffset"}),
    (DuplicatingLogs(), {"Duplicate"}),
    (ReorderingLogs(), {"NonmonotonicPoll"}),
    (SkippingLogs(), {"PollSkip", "LostWrite"}),
], ids=["lose", "duplicate", "reorder", "skip"])
def test_invalid_when_the_logs_break_kafka(logs: FakeLogs, rule: set[str]) -> None:
    res = verdict(run_queue(logs))
    assert res["valid"] is False
    assert rule <= broken(res), res["explanation"]


DATA_PLANE = {**SERVED, 0: 9, 1: 12, 2: 7}  # Produce, Fetch, ListOffsets as a data-plane broker lists them


def test_refused_where_brokers_serve_no_data_plane() -> None:
    fake = FakeKafka()
    with pytest.raises(ValueError, match="Produce, Fetch and ListOffsets"):
        build("queue", fake.spec(), connector=fake.connector, queue_connector=FakeLogs().connector)
    served = FakeKafka(served=DATA_PLANE)
    assert build("queue", served.spec(), connector=served.connector, queue_connector=FakeLogs().connector)
    mixed = build("mixed", fake.spec(), connector=fake.connector, queue_connector=FakeLogs().connector)
    assert mixed.factory.__class__.__name__ == "KafkaClientFactory"


def test_mixed_includes_queue_where_brokers_serve_produce() -> None:
    fake = FakeKafka(session_timeout_s=0.4, rng=random.Random(3), served=DATA_PLANE)
    logs = FakeLogs()
    w = build("mixed", fake.spec(), rate=400.0, concurrency=6, time_limit=1.5, connector=fake.connector,
              queue_connector=logs.connector, session_timeout=fake.session_timeout_s)
    out = io.StringIO()
    history = HistoryWriter(stream=out)
    pids = ProcessIds()
    nodes = sorted(fake.spec())

    async def go() -> None:
        await run_phase(w.main, w.factory, history, pids, nodes=nodes, concurrency=6, rng=random.Random(3),
                        op_timeout=1.0)
        await run_phase(w.final, w.factory, history, pids, nodes=nodes, concurrency=6, rng=random.Random(4),
                        op_timeout=6.0)

    asyncio.run(go())
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert {x["workload"] for x in lines} == {"topics", "registry", "isr", "acl", "scram", "queue"}
    assert any(x["f"] == "send" and x["type"] == "ok" for x in lines)
    assert verdict([x for x in lines if x["workload"] == "queue"])["valid"] is True
    from wl_harness import verdicts

    assert set(verdicts(lines, w.models).values()) == {True}


def test_mixed_runs_the_queue_on_workers_of_its_own() -> None:
    """Jepsen's `reserve`: a fifth of the workers (at least one) run the queue's ops and only those,
    the others the metadata workloads — a consumer parked for a whole op timeout holds one of the
    queue's workers, never one of theirs. With too few workers to set any apart it is mixed in."""
    from kraftlab.workloads.generator import Context

    fake = FakeKafka(session_timeout_s=0.4, rng=random.Random(3), served=DATA_PLANE)

    def workloads_by_worker(concurrency: int) -> dict[int, set[str]]:
        w = build("mixed", fake.spec(), rate=400.0, concurrency=concurrency, connector=fake.connector,
                  queue_connector=FakeLogs().connector, session_timeout=fake.session_timeout_s)
        seen: dict[int, set[str]] = {k: set() for k in range(concurrency)}
        rng = random.Random(5)
        for i in range(200 * concurrency):
            worker = i % concurrency
            ctx = Context(time=float(i), process=i, worker=worker, node="n1", nodes=["n1"], rng=rng)
            ans = w.main.next_op(ctx)
            if isinstance(ans, Invocation):
                seen[worker].add(str((ans.extra or {}).get("workload")))
        return seen

    ten = workloads_by_worker(10)
    assert ten[0] == ten[1] == {"queue"}
    assert all("queue" not in ten[k] and {"topics", "registry", "isr"} <= ten[k] for k in range(2, 10)), ten
    two = workloads_by_worker(2)
    assert all("queue" in two[k] and "isr" in two[k] for k in range(2)), two


class LeaderlessForAWhile(FakeLogs):
    """ListOffsets finds no leader for the first few asks (a partition still electing after the heal)."""

    asks: int = 0

    def watermarks(self, tp: TopicPartition) -> tuple[int, int]:
        self.asks += 1
        if self.asks <= 6:
            raise IndefiniteError("NOT_LEADER_OR_FOLLOWER")
        return super().watermarks(tp)


def test_final_read_waits_for_a_leader() -> None:
    logs = FakeLogs()
    lines = run_queue(logs, seconds=0.3)
    acked = sum(1 for x in lines if x["f"] == "send" and x["type"] == "ok")
    late = LeaderlessForAWhile()
    late.logs, late.topics = logs.logs, logs.topics
    w = build("queue", FakeKafka().spec(), queue_connector=late.connector, data_plane=True)
    out = io.StringIO()
    history = HistoryWriter(stream=out)

    async def final() -> None:
        await w.factory.open("n1", 99)  # the topic exists: nothing is created
        await run_phase(w.final, w.factory, history, ProcessIds(), nodes=["n1"], concurrency=1,
                        rng=random.Random(1), op_timeout=6.0)

    asyncio.run(final())
    done = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [x["type"] for x in done] == ["invoke", "ok"] * 12 and late.asks > 6
    assert sum(len(rs) for x in done if x["type"] == "ok" for rs in x["value"]["records"].values()) == 3 * acked


class OneLeaderless(FakeLogs):
    """queue-0 never gets a leader back: ListOffsets for it always fails."""

    def watermarks(self, tp: TopicPartition) -> tuple[int, int]:
        if tp == ("queue", 0):
            raise IndefiniteError("LEADER_NOT_AVAILABLE")
        return super().watermarks(tp)


def test_a_leaderless_partition_fails_only_its_own_final_reads() -> None:
    logs = FakeLogs()
    lines = run_queue(logs, seconds=0.3)
    dead = OneLeaderless()
    dead.logs, dead.topics = logs.logs, logs.topics
    w = build("queue", FakeKafka().spec(), queue_connector=dead.connector, data_plane=True, request_timeout=1.5)
    out = io.StringIO()
    asyncio.run(run_phase(w.final, w.factory, HistoryWriter(stream=out), ProcessIds(), nodes=["n1", "n2", "n3"],
                          concurrency=3, rng=random.Random(1), op_timeout=3.0))
    final = [{**x, "process": 1000 + x["process"]} for x in map(json.loads, out.getvalue().splitlines())]
    reading: dict[int, str] = {}
    outcomes: set[tuple[str, str]] = set()
    for x in final:  # each process reads one partition at a time
        if x["type"] == "invoke":
            reading[x["process"]] = next(iter(x["value"]["positions"]))
        else:
            outcomes.add((reading[x["process"]], x["type"]))
    assert outcomes == {("queue-0", "fail"), ("queue-1", "ok"), ("queue-2", "ok"), ("queue-3", "ok")}
    assert verdict(lines + final)["valid"] is not False


class RecordingLogs(FakeLogs):
    created: list[tuple[str, int, int, dict[str, str]]]

    def connector(self, node: str, process: int) -> FakeQueueClient:
        logs = self

        class Recording(FakeQueueClient):
            async def create_topic(self, topic: str, partitions: int, replication_factor: int,
                                   configs: Mapping[str, str]) -> None:
                logs.created.append((topic, partitions, replication_factor, dict(configs)))
                await super().create_topic(topic, partitions, replication_factor, configs)

        return Recording(self)


@pytest.mark.parametrize(("config", "want"), [
    ({}, (3, "2")),  # three brokers: replication factor 3, min.insync.replicas 2
    ({"default.replication.factor": "1", "min.insync.replicas": "1"}, (1, "1")),
    ({"default.replication.factor": "2"}, (2, "1"))])
def test_the_topic_takes_the_runs_defaults(config: dict[str, str], want: tuple[int, str]) -> None:
    logs = RecordingLogs()
    logs.created = []
    w = build("queue", FakeKafka().spec(), queue_connector=logs.connector, data_plane=True, config=config)

    async def open_two() -> None:
        await w.factory.open("n1", 1)
        await w.factory.open("n2", 2)

    asyncio.run(open_two())
    assert logs.created == [("queue", 4, want[0], {"min.insync.replicas": want[1]})]  # created once


def test_bad_topic_defaults_are_refused() -> None:
    with pytest.raises(ValueError, match="'two': not an integer"):
        build("queue", FakeKafka().spec(), queue_connector=FakeLogs().connector, data_plane=True,
              config={"min.insync.replicas": "two"})
