"""End to end on loopback: dynamic quorums (KIP-853) of real `kraft-node` processes (the shared
kraftlab.testing.kraftnode.ProcessCluster) grown with `kraft-node add-controller` and shrunk with
`remove-controller` of the active controller, `describe-quorum` checked at each step, while a client
writes through whichever controller leads (records) or through a broker (topics): every
acknowledged write survives."""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from kraftlab.node.cli import main as cli_main
from kraftlab.testing.kraftnode import ProcessCluster, read_log_values
from kraftlab.testing.waiting import eventually

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]


def leader(c: ProcessCluster) -> int | None:
    """The controller that says it leads, if one does."""
    for i in c.alive():
        q = c.quorum(i, 2.0)
        if q is not None and q["leader"] == i:
            return i
    return None


def voters(c: ProcessCluster) -> list[int]:
    active = leader(c)
    assert active is not None
    q = c.quorum(active, 2.0)
    assert q is not None
    return sorted(v["id"] for v in q["voters"])  # type: ignore[attr-defined]


class Appender(threading.Thread):
    """Appends one tagged record at a time through the current leader; records what was acknowledged."""

    def __init__(self, cluster: ProcessCluster) -> None:
        super().__init__(daemon=True)
        self.cluster = cluster
        self.acked: list[bytes] = []
        self.stop = threading.Event()

    def run(self) -> None:
        seq = 0
        while not self.stop.is_set():
            active = leader(self.cluster)
            if active is None:
                time.sleep(0.05)
                continue
            value = f"r{seq}".encode()
            with contextlib.suppress(Exception):
                if asyncio.run(self.cluster.append(active, [value]))[0] == "NONE":
                    self.acked.append(value)
                    seq += 1
            time.sleep(0.02)


def test_quorum_grows_from_standalone_and_survives_removing_its_active_controller(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    c = ProcessCluster(tmp_path, 3, dynamic=True)
    c.format(1, "--standalone")
    c.format(2, "--no-initial-controllers")
    c.format(3, "--no-initial-controllers")
    appender = Appender(c)
    try:
        c.start_all()
        eventually(lambda: leader(c) == 1, what="the standalone controller leads")
        appender.start()

        def observers() -> set[int]:
            q = c.quorum(1, 2.0)
            assert q is not None
            return {o["id"] for o in q["observers"]}  # type: ignore[attr-defined]

        # The two others find the quorum through the bootstrap servers and fetch as observers.
        eventually(lambda: observers() == {2, 3}, what="observers 2 and 3")
        for i in (2, 3):
            capsys.readouterr()
            rc = cli_main(["add-controller", "--bootstrap-controller", c.controller_bootstrap, "--command-config",
                           str(c.configs[i]), "--timeout", "20"])
            assert rc == 0, capsys.readouterr().err
            assert f"controller {i}" in capsys.readouterr().out
        assert voters(c) == [1, 2, 3]
        capsys.readouterr()
        assert cli_main(["describe-quorum", "--bootstrap-controller", f"127.0.0.1:{c.ports[1]}"]) == 0
        described = json.loads(capsys.readouterr().out)
        assert sorted(v["id"] for v in described["voters"]) == [1, 2, 3]
        # DescribeQuorum v2: each voter's directory id and listener, kraft.version 1.
        assert described["kraft_version"] == 1
        assert {v["id"]: v["directory_id"] for v in described["voters"]} == {i: c.directory_id(i) for i in c.ids}
        assert described["nodes"] == {str(i): [f"CONTROLLER://127.0.0.1:{c.ports[i]}"] for i in c.ids}
        assert cli_main(["describe-quorum", "--bootstrap-controller", f"127.0.0.1:{c.ports[1]}", "--replication"]) == 0
        table = capsys.readouterr().out.splitlines()
        assert table[0].split()[0] == "NodeId" and len(table) == 4

        # Remove the active controller: it commits its own removal, then resigns.
        active = leader(c)
        assert active is not None
        rc = cli_main(["remove-controller", "--bootstrap-controller", c.controller_bootstrap, "--controller-id",
                       str(active), "--controller-directory-id", c.directory_id(active)])
        assert rc == 0, capsys.readouterr().err
        rest = sorted(set(c.ids) - {active})
        eventually(lambda: leader(c) in rest and voters(c) == rest, what="a new leader among the remaining voters")
        acked_before = len(appender.acked)
        eventually(lambda: len(appender.acked) > acked_before + 5, what="appends after the removal")
    finally:
        appender.stop.set()
        if appender.is_alive():
            appender.join(15)
        c.close()
    assert len(appender.acked) > 20
    for i in rest:
        logged = set(read_log_values(c.meta_dir(i)))
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
def test_three_initial_controllers_grown_to_five_and_shrunk_to_three_while_topics_are_created(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The issue's check: three controllers formatted with `--initial-controllers` plus two with
    `--no-initial-controllers`, grown to five voters with add-controller, shrunk to three with
    remove-controller (the active controller first), `describe-quorum` checked after each step (the
    voters with their directory ids, a leader among them, kraft.version 1, every other controller
    and the broker observing), a client creating topics through a broker throughout: none
    acknowledged is lost."""
    from confluent_kafka.admin import AdminClient

    c = ProcessCluster(tmp_path, 5, brokers=1, dynamic=True)
    initial = c.initial_controllers([1, 2, 3])
    for i in (1, 2, 3):
        c.format(i, "--initial-controllers", initial)
    for i in (4, 5):
        c.format(i, "--no-initial-controllers")
    broker = f"127.0.0.1:{c.broker_ports[6]}"
    creator = TopicCreator(broker)
    steps: list[list[int]] = []

    def describe(expected: list[int]) -> dict[str, Any]:
        """describe-quorum's JSON from the leader, once it shows `expected` as the voters."""
        out: dict[str, Any] = {}

        def shown() -> bool:
            active = leader(c)
            assert active is not None
            capsys.readouterr()
            assert cli_main(["describe-quorum", "--bootstrap-controller", f"127.0.0.1:{c.ports[active]}"]) == 0
            out.update(json.loads(capsys.readouterr().out))
            return sorted(v["id"] for v in out["voters"]) == expected and out["leader"] in expected

        eventually(shown, what=f"describe-quorum showing voters {expected}")
        assert out["kraft_version"] == 1
        assert {v["id"]: v["directory_id"] for v in out["voters"]} == {i: c.directory_id(i) for i in expected}
        steps.append(sorted(v["id"] for v in out["voters"]))
        return out

    def observing(ids: set[int]) -> bool:
        active = leader(c)
        q = c.quorum(active, 2.0) if active is not None else None
        return q is not None and ids <= {o["id"] for o in q["observers"]}  # type: ignore[attr-defined]

    try:
        c.start_all()
        eventually(lambda: leader(c) in (1, 2, 3), what="an initial controller leads")
        admin = AdminClient({"bootstrap.servers": broker})
        eventually(lambda: 6 in admin.list_topics(timeout=5).brokers, timeout=90, what="the broker registered")
        creator.start()
        eventually(lambda: len(creator.acked) >= 3, what="topics created")
        describe([1, 2, 3])
        eventually(lambda: observing({4, 5, 6}), what="controllers 4 and 5 and the broker observing")
        for i in (4, 5):
            capsys.readouterr()
            rc = cli_main(["add-controller", "--bootstrap-controller", c.controller_bootstrap, "--command-config",
                           str(c.configs[i]), "--timeout", "20"])
            assert rc == 0, capsys.readouterr().err
            describe(sorted({1, 2, 3, 4, 5} & set(range(1, i + 1))))
        removed: list[int] = []
        for _ in range(2):  # the active controller, then a follower
            active = leader(c)
            assert active is not None
            victim = active if not removed else next(i for i in voters(c) if i != active)
            capsys.readouterr()
            rc = cli_main(["remove-controller", "--bootstrap-controller", c.controller_bootstrap, "--controller-id",
                           str(victim), "--controller-directory-id", c.directory_id(victim)])
            assert rc == 0, capsys.readouterr().err
            removed.append(victim)
            describe(sorted(set(c.ids) - set(removed)))
            # a removed controller goes on fetching, as an observer
            eventually(lambda victim=victim: observing({victim}), what=f"controller {victim} observing")  # type: ignore[misc]
        before = len(creator.acked)
        eventually(lambda: len(creator.acked) >= before + 3, what="topics created after the shrink")
    finally:
        creator.stop.set()
        if creator.is_alive():
            creator.join(20)
        try:
            probe = AdminClient({"bootstrap.servers": broker})
            # Each acknowledged topic asked for by name (tests/node/test_e2e_metadata_clients.py lists many at once).
            listed = set()
            for t in creator.acked:
                found = probe.list_topics(topic=t, timeout=10).topics.get(t)
                if found is not None and found.error is None and found.partitions:
                    listed.add(t)
        finally:
            c.close()
    assert steps == [[1, 2, 3], [1, 2, 3, 4], [1, 2, 3, 4, 5], sorted(set(c.ids) - set(removed[:1])),
                     sorted(set(c.ids) - set(removed))]
    lost = [t for t in creator.acked if t not in listed]
    assert not lost, f"acknowledged topics missing: {lost}"
