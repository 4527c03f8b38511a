"""The queue workload's confluent-kafka client without a broker: Kafka's error names and their
Jepsen meaning, and a client whose broker is unreachable answering in time (an unsent record is
in doubt: librdkafka may have written it before the timeout; reads just fail) and closing at once."""

from __future__ import annotations

import asyncio
import socket
import time

import pytest
from confluent_kafka import KafkaError

from kraftlab.workloads.client import DefiniteFailure, Invocation
from kraftlab.workloads.kafka import IndefiniteError
from kraftlab.workloads.queue import QueueProcess, QueueWorkload
from kraftlab.workloads.queue_client import TopicPartition
from kraftlab.workloads.queue_confluent import ConfluentQueueClient, connector, kafka_name, raise_send_error


def test_kafka_names_and_their_meaning() -> None:
    assert kafka_name(KafkaError(KafkaError.NOT_LEADER_FOR_PARTITION)) == "NOT_LEADER_OR_FOLLOWER"
    assert kafka_name(KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART)) == "UNKNOWN_TOPIC_OR_PARTITION"
    assert kafka_name(KafkaError(KafkaError._MSG_TIMED_OUT)) == "_MSG_TIMED_OUT"
    for code in (KafkaError.MSG_SIZE_TOO_LARGE, KafkaError._UNKNOWN_PARTITION):
        with pytest.raises(DefiniteFailure):
            raise_send_error(KafkaError(code))
    # a new leader's NOT_ENOUGH_REPLICAS may answer a retry of a record the old leader appended
    for code in (KafkaError.NOT_ENOUGH_REPLICAS, KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError.NOT_LEADER_FOR_PARTITION,
                 KafkaError.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
                 KafkaError.REQUEST_TIMED_OUT, KafkaError._MSG_TIMED_OUT, KafkaError._TRANSPORT):
        with pytest.raises(IndefiniteError):
            raise_send_error(KafkaError(code))


def closed_port() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"


def test_unreachable_broker_answers_in_time() -> None:
    tp: TopicPartition = ("queue", 0)
    qc = ConfluentQueueClient(closed_port(), 1, request_timeout=0.5)
    proc = QueueProcess("n1", 1, qc, QueueWorkload(["n1"], lambda node, p: qc))

    async def go() -> None:
        t = time.monotonic()
        done = await proc.invoke(Invocation("send", {"key": "queue-0", "value": 1}))
        assert (done.type, done.error) == ("info", "_MSG_TIMED_OUT")
        with pytest.raises(DefiniteFailure, match="read-unanswered"):
            await proc.invoke(Invocation("assign", {"keys": ["queue-0"]}))
        await qc.assign({tp: 0})
        assert await qc.poll(0.1) == {}
        assert time.monotonic() - t < 5
        t = time.monotonic()
        await proc.close()
        assert time.monotonic() - t < 2

    asyncio.run(go())


def test_a_process_bootstraps_at_its_node_first_then_the_others() -> None:
    connect = connector({"n1": "10.0.0.1:9092", "n2": "10.0.0.2:9092", "n3": "10.0.0.3:9092"})
    qc = connect("n2", 3)
    assert isinstance(qc, ConfluentQueueClient)
    assert qc.common["bootstrap.servers"] == "10.0.0.2:9092,10.0.0.1:9092,10.0.0.3:9092"
    assert qc.producer_conf["acks"] == "all" and qc.producer_conf["enable.idempotence"] is True
    with pytest.raises(DefiniteFailure, match="no broker listener"):
        connect("n9", 4)
