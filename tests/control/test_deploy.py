"""kraftlab.deploy on fake hosts: topologies, rendered server.properties (checked with the node's
own parser), the commands it runs, health, failures a user can act on, and log collection."""

from __future__ import annotations

import json
import re
import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from kraftlab.control.fake import FakeHost
from kraftlab.control.host import CommandResult
from kraftlab.control.lab import Lab
from kraftlab.deploy import (
    DAEMON,
    SASL_PORT,
    DeployError,
    Deployment,
    DeploymentState,
    NodePaths,
    load_deployment,
    plan,
    quorum_leader,
    random_cluster_id,
    render_properties,
    unfenced_brokers,
)
from kraftlab.node.config import config_from_properties, parse_properties


def fake_lab(n: int = 5, backend: str = "netns") -> Lab:
    return Lab("dlab", backend, [FakeHost(f"n{i}", f"10.9.0.{10 + i}", f"/w/n{i}") for i in range(1, n + 1)])


def fakes(lab: Lab) -> list[FakeHost]:
    return [h for h in lab.hosts if isinstance(h, FakeHost)]


ADDRS = {f"n{i}": f"10.9.0.{10 + i}" for i in range(1, 6)}


@pytest.mark.parametrize(("topology", "roles"), [
    ("combined+brokers", ["broker,controller"] * 3 + ["broker"] * 2),
    ("dedicated", ["controller"] * 3 + ["broker"] * 2),
    ("combined", ["broker,controller"] * 5),
])
def test_topologies(topology: str, roles: list[str]) -> None:
    specs = plan(topology, ADDRS)
    assert [",".join(s.roles) for s in specs] == roles
    assert [s.node_id for s in specs] == [1, 2, 3, 4, 5]


def test_topology_errors() -> None:
    with pytest.raises(ValueError, match="unknown topology"):
        plan("ring", ADDRS)
    with pytest.raises(ValueError, match="needs more than 3 hosts"):
        plan("dedicated", {k: ADDRS[k] for k in ("n1", "n2", "n3")})


@pytest.mark.parametrize("topology", ["combined+brokers", "dedicated", "combined"])
def test_rendered_properties_parse_with_the_node(topology: str) -> None:
    specs = plan(topology, ADDRS)
    for spec in specs:
        text = render_properties(spec, specs, NodePaths(f"/w/{spec.name}"), {"metadata.log.segment.bytes": "65536"})
        cfg = config_from_properties(parse_properties(text))
        assert cfg.node_id == spec.node_id and cfg.roles == frozenset(spec.roles)
        assert [(v.node_id, v.host, v.port) for v in cfg.voters] == [
            (s.node_id, s.address, 9093) for s in specs if s.controller]
        assert cfg.is_broker == spec.broker and cfg.is_controller == spec.controller
        if spec.broker:
            assert cfg.advertised("PLAINTEXT").host == spec.address  # type: ignore[union-attr]
        assert str(cfg.metadata_log_dir) == f"/w/{spec.name}/metadata"
        assert str(cfg.journal_file) == f"/w/{spec.name}/data/journal.jsonl"
        assert str(cfg.clock_file) == f"/w/{spec.name}/clock.json"
        assert cfg.metadata_log_segment_bytes == 65536 and cfg.election_timeout_ms == 1000


def test_on_the_disk_fault_filesystem_partitions_share_the_metadata_mount() -> None:
    specs = plan("combined+brokers", ADDRS)
    for diskfs, log_dir in ((False, "data"), (True, "metadata")):
        cfg = config_from_properties(parse_properties(
            render_properties(specs[0], specs, NodePaths("/w/n1"), diskfs=diskfs)))
        assert [str(d) for d in cfg.log_dirs] == [f"/w/n1/{log_dir}"]
        assert str(cfg.metadata_log_dir) == "/w/n1/metadata" and str(cfg.journal_file) == "/w/n1/data/journal.jsonl"
        assert len(cfg.all_log_dirs) == (1 if diskfs else 2)
        # on the filesystem that loses un-fsynced writes, brokers fsync what they acknowledge
        assert cfg.raw.get("log.flush.interval.messages") == ("1" if diskfs else None)


def test_cluster_id_is_a_kafka_uuid() -> None:
    ids = {random_cluster_id() for _ in range(200)}
    assert len(ids) == 200
    assert all(re.fullmatch(r"[A-Za-z0-9_-]{22}", i) and not i.startswith("-") for i in ids)


def test_configure_format_start_commands(state_dir: Path) -> None:
    lab = fake_lab()
    d = Deployment.create(lab)
    d.configure()
    d.format()
    d.start_all()
    kraft = d.kraft_node("n1")
    assert kraft.endswith("/bin/kraft-node")
    for h in fakes(lab):
        written = next(c for c in h.commands if "server.properties <<" in c)
        body = written.split("<<'KRAFTLAB_EOF'\n", 1)[1].rsplit("KRAFTLAB_EOF", 1)[0]
        assert f"node.id={h.name[1:]}" in body and "/w/" + h.name in body
        fmt = [c for c in h.commands if " format " in c]
        assert fmt == [f"{kraft} format --config /w/{h.name}/server.properties --cluster-id {d.state.cluster_id}"]
        daemon = h.daemons[DAEMON]
        assert daemon.command == f"{kraft} start --config /w/{h.name}/server.properties"
        assert daemon.log_path == f"/w/{h.name}/kraft-node.log"
    # reopened from its saved state
    again = load_deployment(lab)
    assert again.state == d.state and again.controllers() == ["n1", "n2", "n3"] and again.brokers() == d.nodes()


def test_process_operations(state_dir: Path) -> None:
    lab = fake_lab()
    d = Deployment.create(lab, "dedicated")
    d.start_all()
    n2 = fakes(lab)[1]
    d.pause("n2")
    assert n2.daemons[DAEMON].state == "stopped" and d.running("n2")
    d.resume("n2")
    d.stop("n2")
    assert n2.daemons[DAEMON].signals == [signal.SIGSTOP, signal.SIGCONT, signal.SIGCONT, signal.SIGTERM]
    assert not d.running("n2")
    d.start("n2")
    old = d.pid("n2")
    d.restart("n2")
    assert d.running("n2") and d.pid("n2") != old
    d.kill("n3")
    assert not d.running("n3")
    with pytest.raises(Exception, match="not running"):
        d.pause("n3")
    d.wipe("n3")
    assert any(c.startswith("rm -rf /w/n3/data /w/n3/metadata") for c in fakes(lab)[2].commands)
    d.reformat("n3")
    assert fakes(lab)[2].commands[-1].endswith("--ignore-formatted")
    with pytest.raises(Exception, match="stop kraft-node before wiping"):
        d.wipe("n1")
    assert d.clock_file("n4") == "/w/n4/clock.json" and d.metadata_log_dir("n4") == "/w/n4/metadata"


def answer(quorum: dict[str, object], cluster: dict[str, object]) -> list[tuple[str, CommandResult]]:
    return [("describe-quorum", CommandResult("", "", 0, json.dumps(quorum), "")),
            ("describe-cluster", CommandResult("", "", 0, json.dumps(cluster), ""))]


def test_wait_healthy(state_dir: Path) -> None:
    lab = fake_lab(5, "ssh")  # queries run on the hosts (the runner may not reach VMs itself)
    d = Deployment.create(lab)
    d.start_all()
    state: dict[str, object] = {"leader": -1, "fenced": {4, 5}, "starting": set()}

    def quorum(_: str) -> CommandResult:
        return CommandResult("", "", 0, json.dumps({"leader": state["leader"], "epoch": 3}), "")

    def cluster(host: str) -> Callable[[str], CommandResult]:
        def answer(_: str) -> CommandResult:
            fenced, starting = state["fenced"], state["starting"]
            assert isinstance(fenced, set) and isinstance(starting, set)
            if host in starting:
                return CommandResult("", "", 1, "", "broker refuses requests: STARTING")
            brokers = [{"id": i, "fenced": i in fenced} for i in range(1, 6)]
            return CommandResult("", "", 0, json.dumps({"cluster_id": "x", "brokers": brokers}), "")
        return answer

    for h in fakes(lab):
        h.on("describe-quorum", quorum)
        h.on("describe-cluster", cluster(h.name))
    assert d.health() == (False, "no quorum leader yet")
    state["leader"] = 2
    ok, why = d.health()
    assert not ok and why == "leader 2, brokers not registered and unfenced: [4, 5]"
    assert d.active_controller() == "n2"
    state["fenced"] = set()
    state["starting"] = {"n4"}  # restarted: the others still list it unfenced, it refuses until it runs
    ok, why = d.health()
    assert not ok and why == "describe-cluster failed: n4: broker refuses requests: STARTING"
    state["starting"] = set()
    assert d.wait_healthy(1.0) == "leader 2, brokers [1, 2, 3, 4, 5] unfenced"


def test_wait_healthy_times_each_phase(state_dir: Path) -> None:
    """Refused, then answering without a leader, then a leader with fenced brokers, then healthy: each
    phase's time is the polls it lasted."""
    lab = fake_lab(3, "ssh")
    d = Deployment.create(lab, "combined")
    d.start_all()
    polls = iter([0] * 4 + [1] * 3 + [2] * 5 + [3] * 100)  # per DescribeQuorum asked
    stage = {"now": 0}

    def quorum(_: str) -> CommandResult:
        stage["now"] = next(polls)
        if stage["now"] == 0:
            return CommandResult("", "", 1, "", "connection refused")
        return CommandResult("", "", 0, json.dumps({"leader": -1 if stage["now"] == 1 else 1}), "")

    def cluster(_: str) -> CommandResult:
        brokers = [{"id": i, "fenced": stage["now"] < 3 and i == 3} for i in (1, 2, 3)]
        return CommandResult("", "", 0, json.dumps({"brokers": brokers}), "")

    for h in fakes(lab):
        h.on("describe-quorum", quorum)
        h.on("describe-cluster", cluster)
    began = time.monotonic()
    d.wait_healthy(5.0, poll=0.02)
    elapsed = time.monotonic() - began
    t = d.timings
    # 4 refusals (a poll asks each controller in turn: 2 polls), 3 polls without a leader, 5 with a fenced broker
    assert t["answer"] >= 0.02 and t["leader"] >= 0.06 and t["unfenced"] >= 0.1, t
    assert t["answer"] + t["leader"] + t["unfenced"] <= elapsed, (t, elapsed)


def test_a_node_that_dies_is_named_with_its_log(state_dir: Path) -> None:
    lab = fake_lab()
    d = Deployment.create(lab)
    d.start_all()
    n4 = fakes(lab)[3]
    n4.on(r"tail -n 20 /w/n4/kraft-node.log", n4.reply("", 0, "Traceback\nConfigError: bad listener\n"))
    n4.daemons[DAEMON].state = "dead"
    with pytest.raises(DeployError) as exc:
        d.wait_healthy(2.0)
    assert "n4 (10.9.0.14, not running)" in str(exc.value) and "ConfigError: bad listener" in str(exc.value)


def test_not_healthy_in_time_says_why(state_dir: Path) -> None:
    lab = fake_lab(3, "vagrant")
    d = Deployment.create(lab, "combined")
    d.start_all()
    for h in fakes(lab):
        h.on("describe-quorum", h.reply("", 1, "", "connection refused"))
    with pytest.raises(DeployError, match=r"(?s)not healthy after 0.3s: describe-quorum failed.*connection refused"):
        d.wait_healthy(0.3, poll=0.05)


def test_install_reports_a_missing_executable(state_dir: Path) -> None:
    lab = fake_lab(3, "docker")
    d = Deployment.create(lab, "combined")
    fakes(lab)[1].on(r"^test -x", CommandResult("", "", 1, "", ""))
    with pytest.raises(DeployError, match=r"not installed on n2 \(no /opt/kraftlab/venv/bin/kraft-node\)"):
        d.install()


def test_collect(state_dir: Path, tmp_path: Path) -> None:
    lab = fake_lab(2, "netns")
    d = Deployment.create(lab, "combined")
    for h in fakes(lab):
        h.files[f"/w/{h.name}/kraft-node.log"] = b"log of " + h.name.encode()
        h.files[f"/w/{h.name}/data/journal.jsonl"] = b'{"ev":"start"}\n'
        h.on(r"^test -f", lambda c, h=h: h.reply(c, 0 if c.split()[-1].strip("'") in h.files else 1))
    got = d.collect(tmp_path / "nodes")
    assert got == {"n1": ["kraft-node.log", "journal.jsonl"], "n2": ["kraft-node.log", "journal.jsonl"]}
    assert (tmp_path / "nodes" / "n2" / "kraft-node.log").read_text() == "log of n2"


def test_describe_parsers() -> None:
    assert quorum_leader({"leader": 3}) == 3
    assert quorum_leader({"leader_id": -1}) is None
    assert quorum_leader({"leader": {"id": 2}}) == 2
    with pytest.raises(ValueError):
        quorum_leader({"epoch": 1})
    assert unfenced_brokers({"brokers": [{"id": 1, "fenced": False}, {"broker_id": 2, "state": "FENCED"},
                                         {"node_id": 3}]}) == {1, 3}
    with pytest.raises(ValueError):
        unfenced_brokers({})


def test_state_round_trip(state_dir: Path) -> None:
    lab = fake_lab()
    d = Deployment.create(lab, "combined", {"kraftlab.unsafe.test.mode": "true"}, cluster_id="AAAAAAAAAAAAAAAAAAAAAA")
    assert DeploymentState.load("dlab") == d.state
    with pytest.raises(LookupError, match="no deployment"):
        DeploymentState.load("other")


def test_a_node_that_journalled_fatal_ends_the_wait_at_once(state_dir: Path) -> None:
    """A running node whose journal holds a `fatal` event (it broke its own invariants) will never be
    healthy: the wait names it and its error instead of polling out its whole timeout."""
    lab = fake_lab()
    d = Deployment.create(lab)
    d.start_all()
    for h in fakes(lab):
        h.on("describe-quorum", h.reply("", 0, json.dumps({"leader": -1, "epoch": 3})))
    n2 = fakes(lab)[1]
    fatal = {"ev": "fatal", "node": 2, "error": "ImageError: topic t4 already exists", "stopped": False}
    n2.on(r"grep -m1 -F .*/n2/.*journal\.jsonl", n2.reply("", 0, json.dumps(fatal, separators=(",", ":")) + "\n"))
    began = time.monotonic()
    with pytest.raises(DeployError, match=r"fatal error .* n2: ImageError: topic t4 already exists"):
        d.wait_healthy(30.0, poll=0.05)
    assert time.monotonic() - began < 5.0


def test_fatal_scan_reads_only_fatal_events(state_dir: Path) -> None:
    lab = fake_lab(3)
    d = Deployment.create(lab, "combined")
    d.start_all()
    assert d.fatal_errors(["n1", "n2", "n3"]) == {}  # grep finds nothing on any node
    n3 = fakes(lab)[2]
    n3.on(r"grep -m1 -F .*journal\.jsonl", n3.reply("", 0, "not json at all\n"))
    assert d.fatal_errors(["n3"]) == {"n3": "not json at all"}


def test_rendered_security_serves_the_acl_and_scram_workloads() -> None:
    """Brokers have a SASL_PLAINTEXT listener with SCRAM (the scram workload's logins) beside the
    anonymous PLAINTEXT one; every node runs Kafka's StandardAuthorizer, open where no ACL is set."""
    from kraftlab.node.security.listeners import NodeSecurity

    specs = plan("combined+brokers", ADDRS)
    for spec in specs:
        cfg = config_from_properties(parse_properties(render_properties(spec, specs, NodePaths(f"/w/{spec.name}"))))
        security = NodeSecurity.from_config(cfg)
        assert security.authorizer.enabled and getattr(security.authorizer, "allow_if_no_acl", False)
        assert getattr(security.authorizer, "super_users", None) == frozenset({"User:admin"})
        if spec.broker:
            assert cfg.advertised("SASL_PLAINTEXT").port == SASL_PORT  # type: ignore[union-attr]
            assert security.guard_factory("SASL_PLAINTEXT") is not None
            assert set(security.mechanisms("SASL_PLAINTEXT")) >= {"SCRAM-SHA-256", "SCRAM-SHA-512"}
            assert security.guard_factory("PLAINTEXT") is None  # User:ANONYMOUS, as the workloads connect
