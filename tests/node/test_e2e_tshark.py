"""A capture of a cluster's traffic (Raft between controllers, brokers' registration and heartbeats,
a librdkafka admin client creating and deleting topics, a kafka-python admin client configured for
Kafka 2.4 listing them) decodes with tshark's Kafka dissector with no malformed packet among the API
versions the dissector knows. Wireshark 4.0's dissector stops at Metadata v9: librdkafka asks the
brokers' v12 (marked "Unsupported API version"), the Kafka 2.4 client asks v9, which it decodes."""

from __future__ import annotations

import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from kraftlab.testing.kraftnode import ProcessCluster

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240), pytest.mark.filterwarnings("ignore::DeprecationWarning")]


def start_capture(pcap: Path, ports: list[int]) -> subprocess.Popen[str]:
    if shutil.which("tshark") is None:
        pytest.skip("tshark is not installed (apt-get install tshark)")
    bpf = " or ".join(f"tcp port {p}" for p in ports)
    proc = subprocess.Popen(
        ["tshark", "-i", "lo", "-w", str(pcap), "-f", bpf], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    assert proc.stderr is not None
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if "Capturing on" in line:
            return proc
        if proc.poll() is not None:
            pytest.skip(f"tshark cannot capture on lo here: {line.strip()}")
    proc.kill()
    pytest.skip("tshark did not start capturing within 30 s")


def test_capture_decodes_as_kafka(tmp_path: Path) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic
    from kafka.admin import KafkaAdminClient

    c = ProcessCluster(tmp_path, brokers=3)
    ports = [*c.ports.values(), *c.broker_ports.values()]
    pcap = tmp_path / "traffic.pcap"
    capture = start_capture(pcap, ports)
    try:
        c.start_all()
        c.wait_leader()
        admin = AdminClient({"bootstrap.servers": c.bootstrap})
        names = [f"cap{i}" for i in range(5)]
        deadline = time.monotonic() + 60
        while True:  # until the brokers are unfenced and the topics are created
            futures = admin.create_topics([NewTopic(n, 1, 3) for n in names], request_timeout=10)
            errors = []
            for future in futures.values():
                try:
                    future.result()
                except Exception as e:
                    errors.append(str(e))
            if not errors or all("already exists" in e for e in errors):
                break
            assert time.monotonic() < deadline, errors
            time.sleep(0.5)
        old_client = KafkaAdminClient(bootstrap_servers=c.bootstrap, api_version=(2, 4), request_timeout_ms=10_000)
        try:  # Metadata v9, the newest version the dissector knows
            assert set(names) <= set(old_client.list_topics())
        finally:
            old_client.close()
        for future in admin.delete_topics(names, request_timeout=10).values():
            future.result()
        time.sleep(1.0)
    finally:
        c.close()
        time.sleep(0.5)
        capture.send_signal(signal.SIGINT)
        try:
            capture.wait(20)
        except subprocess.TimeoutExpired:
            capture.kill()
            capture.wait(10)

    decode = ["tshark", "-r", str(pcap), "-Y", "kafka"]
    for port in ports:
        decode += ["-d", f"tcp.port=={port},kafka"]
    lines = subprocess.run(decode, capture_output=True, text=True, timeout=120, check=True).stdout.splitlines()
    known = [
        ln
        for ln in lines
        if "Unsupported API version" not in ln and "Unknown API key" not in ln and "Request Missing" not in ln
    ]
    malformed = [ln for ln in known if "Malformed" in ln]
    assert not malformed, "\n".join(malformed[:10])
    # the dissector fully decoded real traffic: client metadata and the admin requests
    assert any("Metadata v9 Request" in ln for ln in known), {ln.split("Kafka ")[-1] for ln in lines}
    assert any("Metadata v9 Response" in ln for ln in known), {ln.split("Kafka ")[-1] for ln in lines}
    assert any("CreateTopics" in ln for ln in lines) and any("DeleteTopics" in ln for ln in lines)
    assert len(known) >= 20
