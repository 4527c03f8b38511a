"""The topics workload's ops against the fake cluster, and its histories checked by the
checker's `topics` model: valid on a correct cluster with faults, invalid when a create is lost."""

from __future__ import annotations

import random
from collections import Counter

from wl_harness import invoke, open_client, run, select, verdicts

from kraftlab.workloads.fake_kafka import FakeKafka
from kraftlab.workloads.ops import broker_read, op
from kraftlab.workloads.topics import TopicsWorkload


def test_op_semantics() -> None:
    fake = FakeKafka()
    w = TopicsWorkload(["n1", "n2", "n3"], [1, 2, 3], prefix="t")
    c = open_client(fake, w.handlers(), node="n2")
    assert invoke(c, op("topics", "create", {"topic": "t0", "partitions": 2, "replication_factor": 2})).type == "ok"
    assert len(fake.topics["t0"].parts) == 2
    assert invoke(c, op("topics", "create", {"topic": "t0"})).error == "TOPIC_ALREADY_EXISTS"
    done = invoke(c, op("topics", "create", {"topic": "t1", "assignment": [[3, 1], [2]]}))
    assert done.type == "ok" and fake.topics["t1"].parts[0].replicas == (3, 1)
    bad = invoke(c, op("topics", "create", {"topic": "t2", "assignment": [[9]]}))  # no broker 9
    assert (bad.type, bad.error) == ("fail", "INVALID_REPLICA_ASSIGNMENT")
    big = invoke(c, op("topics", "create", {"topic": "t2", "partitions": 1, "replication_factor": 5}))
    assert (big.type, big.error) == ("fail", "INVALID_REPLICATION_FACTOR")
    invoke(c, op("topics", "create", {"topic": "other"}))  # another workload's prefix: not listed
    listed = invoke(c, broker_read("topics", "list", "n3"))
    assert listed.value == {"topics": ["t0", "t1"]}
    assert invoke(c, broker_read("topics", "describe", "n1", topic="t1")).value == {"exists": True, "partitions": 2}
    assert invoke(c, broker_read("topics", "describe", "n1", topic="t4")).value == {"exists": False}
    assert invoke(c, op("topics", "delete", {"topic": "t0"})).type == "ok"
    assert invoke(c, op("topics", "delete", {"topic": "t0"})).error == "UNKNOWN_TOPIC_OR_PARTITION"


def test_a_write_read_back_on_its_broker() -> None:
    fake = FakeKafka()
    w = TopicsWorkload(["n1", "n2", "n3"], [1, 2, 3], prefix="t")
    c = open_client(fake, w.handlers(), node="n2")
    done = invoke(c, op("topics", "create", {"topic": "t0", "partitions": 2, "replication_factor": 1,
                                            "read_back": True}))
    assert done.type == "ok" and done.value["acked_ms"] >= 0
    assert done.value["read_back"] == {"exists": True, "topic_id": done.value["topic_id"], "partitions": 2}
    gone = invoke(c, op("topics", "delete", {"topic": "t0", "read_back": True}))
    assert gone.type == "ok" and gone.value["read_back"] == {"exists": False}
    plain = invoke(c, op("topics", "create", {"topic": "t1"}))
    assert "read_back" not in plain.value
    direct = invoke(c, op("topics", "create", {"topic": "t2", "via": "controller", "read_back": True}))
    assert direct.type == "ok" and "read_back" not in direct.value  # no broker promised anything


def test_writes_go_through_the_process_broker() -> None:
    fake = FakeKafka()
    sent: list[str] = []
    connector = fake.connector

    def spy(addr: str):  # type: ignore[no-untyped-def]
        sent.append(addr)
        return connector(addr)

    from kraftlab.workloads.kafka import Cluster
    from kraftlab.workloads.session import KafkaClientFactory

    w = TopicsWorkload(["n1", "n2", "n3"], [1, 2, 3])
    import asyncio

    c = asyncio.run(KafkaClientFactory(Cluster.parse(fake.spec()), spy, w.handlers()).open("n3", 0))
    invoke(c, op("topics", "create", {"topic": "t0"}))
    invoke(c, broker_read("topics", "list", "n1"))
    assert sent == ["n3:9092", "n1:9092"]


def test_history_marks_and_selection() -> None:
    fake = FakeKafka(rng=random.Random(1))
    lines, _w = run("topics", fake, seconds=1.0, seed=1)
    reads = [x for x in lines if x["type"] == "invoke" and x["f"] in ("list", "describe")]
    assert reads and all(x["value"]["broker_read"] and x["value"]["node"] in ("n1", "n2", "n3") for x in reads)
    finals = [x for x in reads if x["value"].get("final")]
    assert sorted(x["value"]["node"] for x in finals) == ["n1", "n2", "n3"]
    assert all(x["workload"] == "topics" for x in lines)
    chosen = select(lines)
    assert {x["f"] for x in chosen} == {"create", "delete", "list"}
    # one broker's final list is judged (invoke + ok); the others' say so, and broker_reads judges them
    assert [x["value"]["node"] for x in chosen if x["f"] == "list" and x["type"] == "invoke"] == ["n1"]
    assert sorted(x["value"]["node"] for x in finals if x["value"].get("judged") is False) == ["n2", "n3"]


def test_valid_on_a_correct_cluster_with_faults() -> None:
    fake = FakeKafka(rng=random.Random(2), p_timeout=0.05, p_lost=0.05, p_not_controller=0.05)
    lines, w = run("topics", fake, seconds=1.5, seed=2)
    types = Counter(x["type"] for x in lines if x["f"] in ("create", "delete"))
    assert types["info"] > 0 and types["ok"] > 0 and types["fail"] > 0
    assert verdicts(lines, w.models) == {"topics": True}


def test_a_lost_acknowledged_create_is_caught() -> None:
    fake = FakeKafka(rng=random.Random(3), bugs=frozenset({"lose-acked-create"}))
    lines, w = run("topics", fake, seconds=1.0, seed=3)
    assert verdicts(lines, w.models) == {"topics": False}
