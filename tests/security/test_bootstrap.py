"""KIP-900: `kraft-node format --add-scram` and the first active controller writing the credentials."""

from __future__ import annotations

from pathlib import Path

import pytest

from kraftlab.node.cli import main
from kraftlab.node.config import render_properties
from kraftlab.node.controller.fake_quorum import FakeQuorum
from kraftlab.node.controller.ports import ControllerConfig
from kraftlab.node.controller.quorum_controller import QuorumController
from kraftlab.node.security.bootstrap import BootstrapError, parse_add_scram, read_bootstrap
from kraftlab.node.security.scram import SCRAM_SHA_512, ScramClient, ScramServer
from kraftlab.node.storage.meta_properties import random_cluster_id


def _login(record: object, password: str) -> None:
    server = ScramServer(SCRAM_SHA_512, lambda mech, first: _credential(record))
    client = ScramClient(SCRAM_SHA_512, "alice", password)
    client.verify(server.step(client.final(server.step(client.first()))))


def _credential(record: object) -> object:
    from kraftlab.node.metadata.image import MetadataImage

    image = MetadataImage()
    image.apply(record)  # type: ignore[arg-type]
    return image.scram[("alice", 2)]


def test_add_scram_parses_kip_900_syntax() -> None:
    record = parse_add_scram("SCRAM-SHA-512=[name=alice,password=alice-secret,iterations=8192]")
    assert (record.name, record.mechanism, record.iterations) == ("alice", 2, 8192)
    _login(record, "alice-secret")
    with pytest.raises(Exception, match="Invalid user credentials"):
        _login(record, "wrong")
    for bad in ("SCRAM-SHA-1=[name=a,password=b]", "SCRAM-SHA-256=[name=a]", "SCRAM-SHA-256=name=a,password=b",
                "SCRAM-SHA-256=[name=a,password=b,iterations=10]", "SCRAM-SHA-256=[name=a,password=b,x=1]"):
        with pytest.raises(BootstrapError):
            parse_add_scram(bad)


def test_format_writes_the_bootstrap_file_and_refuses_bad_arguments(tmp_path: Path) -> None:
    props = {"process.roles": "controller", "node.id": "1", "controller.quorum.voters": "1@127.0.0.1:9093",
             "listeners": "CONTROLLER://127.0.0.1:9093", "controller.listener.names": "CONTROLLER",
             "metadata.log.dir": str(tmp_path / "meta"), "log.dirs": str(tmp_path / "data")}
    cfg = tmp_path / "server.properties"
    cfg.write_text(render_properties(props))
    assert main(["format", "--config", str(cfg), "--cluster-id", random_cluster_id(),
                 "--add-scram", "SCRAM-SHA-256=[name=bad]"]) == 1
    assert not (tmp_path / "meta" / "meta.properties").exists()
    assert main(["format", "--config", str(cfg), "--cluster-id", random_cluster_id(),
                 "--add-scram", "SCRAM-SHA-256=[name=alice,password=a]",
                 "--add-scram", "SCRAM-SHA-512=[name=bob,password=b]"]) == 0
    assert [(r.name, r.mechanism) for r in read_bootstrap(tmp_path / "meta")] == [("alice", 1), ("bob", 2)]
    (tmp_path / "meta" / "bootstrap.checkpoint").write_bytes(b"garbage")
    with pytest.raises(BootstrapError):
        read_bootstrap(tmp_path / "meta")


def test_the_first_active_controller_writes_the_bootstrap_credentials_once() -> None:
    record = parse_add_scram("SCRAM-SHA-512=[name=alice,password=pw]")
    q = FakeQuorum()
    c = QuorumController(ControllerConfig(node_id=1, cluster_id="c", bootstrap_records=(record,)), q.writer(1))
    q.attach("c1", 1, c)
    q.elect(1)
    q.commit()
    c.tick(1000)
    q.commit()
    assert set(c.committed_image.scram) == {("alice", 2)}
    records_before = len(c.committed_image.to_records())
    q.elect(1)
    q.commit()
    c.tick(2000)
    q.commit()
    assert len(c.committed_image.to_records()) == records_before
