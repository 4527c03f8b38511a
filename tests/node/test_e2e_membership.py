"""End to end on loopback: a dynamic quorum (KIP-853) of real `kraft-node` processes grown from one
`--standalone` controller to three with `kraft-node add-controller`, then shrunk with
`remove-controller` of the active controller, `describe-quorum` showing each step, while a client
appends records through whichever controller leads: every acknowledged record is in the log."""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from kraftlab.node.admin import AdminError, describe_quorum
from kraftlab.node.cli import append_test_records
from kraftlab.node.cli import main as cli_main
from kraftlab.node.config import render_properties
from kraftlab.node.kafka_uuid import uuid_to_kafka
from kraftlab.node.protocol.client import ProtocolClient
from kraftlab.node.storage.meta_properties import random_cluster_id, read_meta_properties
from kraftlab.testing.kraftnode import KRAFT_NODE, free_ports, read_log_values

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]


def eventually(check: Callable[[], bool], timeout: float = 30.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            if check():
                return
        except Exception as e:
            last = e
        time.sleep(0.1)
    raise AssertionError(f"{what} not reached within {timeout}s (last error: {last})")


class DynamicQuorum:
    """Controllers of a dynamic quorum (controller.quorum.bootstrap.servers, no voters) as processes."""

    def __init__(self, base: Path, n: int, brokers: int = 0) -> None:
        self.base = base
        self.ids = list(range(1, n + 1))
        ports = free_ports(n + brokers)
        self.ports = dict(zip(self.ids, ports[:n], strict=True))
        self.broker_ports = {n + 1 + b: ports[n + b] for b in range(brokers)}
        self.cluster_id = random_cluster_id()
        self.procs: dict[int, subprocess.Popen[bytes]] = {}
        bootstrap = ",".join(f"127.0.0.1:{p}" for p in self.ports.values())
        self.bootstrap = bootstrap
        self.configs: dict[int, Path] = {}
        for i in self.ids:
            props = {
                "process.roles": "controller",
                "node.id": str(i),
                "controller.quorum.bootstrap.servers": bootstrap,
                "listeners": f"CONTROLLER://127.0.0.1:{self.ports[i]}",
                "controller.listener.names": "CONTROLLER",
                "metadata.log.dir": str(base / f"n{i}" / "meta"),
                "log.dirs": str(base / f"n{i}" / "data"),
                "kraftlab.unsafe.test.mode": "true",
            }
            path = base / f"n{i}.properties"
            path.write_text(render_properties(props))
            self.configs[i] = path
        for b, port in self.broker_ports.items():
            props = {
                "process.roles": "broker",
                "node.id": str(b),
                "controller.quorum.bootstrap.servers": bootstrap,
                "listeners": f"PLAINTEXT://127.0.0.1:{port}",
                "controller.listener.names": "CONTROLLER",
                "metadata.log.dir": str(base / f"n{b}" / "meta"),
                "log.dirs": str(base / f"n{b}" / "data"),
            }
            path = base / f"n{b}.properties"
            path.write_text(render_properties(props))
            self.configs[b] = path
            assert cli_main(["format", "--config", str(path), "--cluster-id", self.cluster_id]) == 0

    def format(self, i: int, flag: str) -> None:
        assert cli_main(["format", "--config", str(self.configs[i]), "--cluster-id", self.cluster_id, flag]) == 0

    def start(self, i: int) -> None:
        with open(self.base / f"n{i}.log", "ab") as log:
            self.procs[i] = subprocess.Popen(
                [KRAFT_NODE, "start", "--config", str(self.configs[i])],
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def close(self) -> None:
        for proc in self.procs.values():
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGKILL)
            proc.wait(10)
        self.procs.clear()

    def quorum(self, i: int) -> dict:
        return asyncio.run(describe_quorum(("127.0.0.1", self.ports[i]), 2.0))

    def leader(self) -> int | None:
        for i in self.ids:
            with contextlib.suppress(AdminError):
                q = self.quorum(i)
                if q["leader"] == i:
                    return i
        return None

    def directory_id(self, i: int) -> str:
        directory = read_meta_properties(self.base / f"n{i}" / "meta").directory_id
        assert directory is not None
        return uuid_to_kafka(directory)


class Appender(threading.Thread):
    """Appends one tagged record at a time through the current leader; records what was acknowledged."""

    def __init__(self, quorum: DynamicQuorum) -> None:
        super().__init__(daemon=True)
        self.quorum = quorum
        self.acked: list[bytes] = []
        self.stop = threading.Event()

    def run(self) -> None:
        seq = 0
        while not self.stop.is_set():
            leader = self.quorum.leader()
            if leader is None:
                time.sleep(0.05)
                continue
            value = f"r{seq}".encode()
            with contextlib.suppress(Exception):
                if asyncio.run(self._append(leader, value)) == "NONE":
                    self.acked.append(value)
                    seq += 1
            time.sleep(0.02)

    async def _append(self, i: int, value: bytes) -> str:
        async with ProtocolClient("127.0.0.1", self.quorum.ports[i], request_timeout=5, connect_timeout=2) as client:
            error, _ = await append_test_records(client, [value], 5000)
            return error


def test_quorum_grows_from_standalone_and_survives_removing_its_active_controller(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    q = DynamicQuorum(tmp_path, 3)
    q.format(1, "--standalone")
    q.format(2, "--no-initial-controllers")
    q.format(3, "--no-initial-controllers")
    appender = Appender(q)
    try:
        for i in q.ids:
            q.start(i)
        eventually(lambda: q.leader() == 1, what="the standalone controller leads")
        appender.start()

        def voters() -> list[int]:
            leader = q.leader()
            assert leader is not None
            return sorted(v["id"] for v in q.quorum(leader)["voters"])

        # The two others find the quorum through the bootstrap servers and fetch as observers.
        eventually(lambda: {o["id"] for o in q.quorum(1)["observers"]} == {2, 3}, what="observers 2 and 3")
        for i in (2, 3):
            capsys.readouterr()
            rc = cli_main(["add-controller", "--bootstrap-controller", q.bootstrap, "--command-config",
                           str(q.configs[i]), "--timeout", "20"])
            assert rc == 0, capsys.readouterr().err
            assert f"controller {i}" in capsys.readouterr().out
        assert voters() == [1, 2, 3]
        capsys.readouterr()
        assert cli_main(["describe-quorum", "--bootstrap-controller", f"127.0.0.1:{q.ports[1]}"]) == 0
        described = json.loads(capsys.readouterr().out)
        assert sorted(v["id"] for v in described["voters"]) == [1, 2, 3]
        # DescribeQuorum v2: each voter's directory id and listener, kraft.version 1.
        assert described["kraft_version"] == 1
        assert {v["id"]: v["directory_id"] for v in described["voters"]} == {i: q.directory_id(i) for i in q.ids}
        assert described["nodes"] == {str(i): [f"CONTROLLER://127.0.0.1:{q.ports[i]}"] for i in q.ids}
        assert cli_main(["describe-quorum", "--bootstrap-controller", f"127.0.0.1:{q.ports[1]}", "--replication"]) == 0
        table = capsys.readouterr().out.splitlines()
        assert table[0].split()[0] == "NodeId" and len(table) == 4

        # Remove the active controller: it commits its own removal, then resigns.
        active = q.leader()
        assert active is not None
        rc = cli_main(["remove-controller", "--bootstrap-controller", q.bootstrap, "--controller-id", str(active),
                       "--controller-directory-id", q.directory_id(active)])
        assert rc == 0, capsys.readouterr().err
        rest = sorted(set(q.ids) - {active})
        eventually(lambda: q.leader() in rest and voters() == rest, what="a new leader among the remaining voters")
        acked_before = len(appender.acked)
        eventually(lambda: len(appender.acked) > acked_before + 5, what="appends after the removal")
    finally:
        appender.stop.set()
        if appender.is_alive():
            appender.join(15)
        q.close()
    assert len(appender.acked) > 20
    for i in rest:
        logged = set(read_log_values(tmp_path / f"n{i}" / "meta"))
        lost = [v for v in appender.acked if v not in logged]
        assert not lost, f"node {i} lacks acknowledged records {lost[:5]}"


class TopicCreator(threading.Thread):
    """Creates one topic at a time through the broker (librdkafka's admin client); records the acknowledged."""

    def __init__(self, bootstrap: str) -> None:
        super().__init__(daemon=True)
        self.bootstrap = bootstrap
        self.acked: list[str] = []
        self.stop = threading.Event()

    def run(self) -> None:
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        seq = 0
        while not self.stop.is_set():
            name = f"t{seq}"
            try:
                admin.create_topics([NewTopic(name, 1, 1)], request_timeout=10)[name].result()
                self.acked.append(name)
                seq += 1
                time.sleep(0.2)
            except Exception as e:  # an unacknowledged create may or may not exist: retried under a new name
                if "already exists" in str(e):
                    seq += 1
                time.sleep(0.2)


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_five_controllers_grown_and_shrunk_while_topics_are_created(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The issue's check: --standalone plus four --no-initial-controllers grown to five voters with
    add-controller, shrunk to three with remove-controller (the active controller among the
    removed), describe-quorum at each step, a client creating topics through a broker throughout."""
    from confluent_kafka.admin import AdminClient

    q = DynamicQuorum(tmp_path, 5, brokers=1)
    q.format(1, "--standalone")
    for i in (2, 3, 4, 5):
        q.format(i, "--no-initial-controllers")
    broker = f"127.0.0.1:{q.broker_ports[6]}"
    creator = TopicCreator(broker)
    steps: list[list[int]] = []

    def voters() -> list[int]:
        leader = q.leader()
        assert leader is not None
        return sorted(v["id"] for v in q.quorum(leader)["voters"])

    def describe() -> None:
        leader = q.leader()
        assert leader is not None
        capsys.readouterr()
        assert cli_main(["describe-quorum", "--bootstrap-controller", f"127.0.0.1:{q.ports[leader]}"]) == 0
        steps.append(sorted(v["id"] for v in json.loads(capsys.readouterr().out)["voters"]))

    try:
        for i in (*q.ids, 6):
            q.start(i)
        eventually(lambda: q.leader() == 1, what="the standalone controller leads")
        admin = AdminClient({"bootstrap.servers": broker})
        eventually(lambda: 6 in admin.list_topics(timeout=5).brokers, timeout=90, what="the broker registered")
        creator.start()
        eventually(lambda: len(creator.acked) >= 3, what="topics created")
        describe()
        for i in (2, 3, 4, 5):
            eventually(lambda i=i: i in {o["id"] for o in q.quorum(q.leader() or 1)["observers"]},  # type: ignore[misc]
                       what=f"controller {i} observing")
            rc = cli_main(["add-controller", "--bootstrap-controller", q.bootstrap, "--command-config",
                           str(q.configs[i]), "--timeout", "20"])
            assert rc == 0, capsys.readouterr().err
            describe()
        removed = []
        for victim in (q.leader(), None):
            victim = victim if victim is not None else next(i for i in voters() if i != q.leader())
            assert victim is not None
            rc = cli_main(["remove-controller", "--bootstrap-controller", q.bootstrap, "--controller-id",
                           str(victim), "--controller-directory-id", q.directory_id(victim)])
            assert rc == 0, capsys.readouterr().err
            removed.append(victim)
            rest = sorted(set(q.ids) - set(removed))
            eventually(lambda rest=rest: q.leader() in rest and voters() == rest, what=f"voters {rest}")  # type: ignore[misc]
            describe()
        before = len(creator.acked)
        eventually(lambda: len(creator.acked) >= before + 3, what="topics created after the shrink")
    finally:
        creator.stop.set()
        if creator.is_alive():
            creator.join(20)
        try:
            probe = AdminClient({"bootstrap.servers": broker})
            # One topic per Metadata request (librdkafka mis-parses this broker's answer listing many).
            listed = set()
            for t in creator.acked:
                found = probe.list_topics(topic=t, timeout=10).topics.get(t)
                if found is not None and found.error is None and found.partitions:
                    listed.add(t)
        finally:
            q.close()
    assert steps[:5] == [[1], [1, 2], [1, 2, 3], [1, 2, 3, 4], [1, 2, 3, 4, 5]]
    assert steps[5:] == [sorted(set(q.ids) - set(removed[:1])), sorted(set(q.ids) - set(removed))]
    lost = [t for t in creator.acked if t not in listed]
    assert not lost, f"acknowledged topics missing: {lost}"
