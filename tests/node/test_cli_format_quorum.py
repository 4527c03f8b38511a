"""`kraft-node format --standalone | --initial-controllers | --no-initial-controllers` (KIP-853) with
Kafka's rules, the bootstrap checkpoint they write, and `controller.quorum.bootstrap.servers`."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from kraftlab.node.cli import main
from kraftlab.node.config import ConfigError, config_from_properties
from kraftlab.node.kafka_uuid import uuid_to_kafka
from kraftlab.node.raft.membership.records import KRAFT_VERSION_1
from kraftlab.node.raft.voters import Endpoint, Voter, VoterSet
from kraftlab.node.storage.bootstrap import bootstrap_path, read_bootstrap_checkpoint
from kraftlab.node.storage.meta_properties import random_cluster_id, read_meta_properties
from kraftlab.testing.kraftnode import node_properties

VOTERS = {1: 19093, 2: 19094, 3: 19095, 4: 19096}
Write = Callable[..., Path]


def dynamic_props(node_id: int, base: Path, **extra: str) -> dict[str, str]:
    props = node_properties(node_id, base, VOTERS, **extra)
    del props["controller.quorum.voters"]
    props["controller.quorum.bootstrap.servers"] = "127.0.0.1:19093,127.0.0.1:19094"
    return props


def test_standalone_writes_this_node_as_the_only_voter(
    tmp_path: Path, write_config: Write, capsys: pytest.CaptureFixture[str]
) -> None:
    props = dynamic_props(1, tmp_path, **{"advertised.listeners": "CONTROLLER://n1.lab:19093"})
    assert (
        main(["format", "--config", str(write_config(props)), "--cluster-id", random_cluster_id(), "--standalone"]) == 0
    )
    assert "bootstrap checkpoint" in capsys.readouterr().out
    meta_dir = props["metadata.log.dir"]
    directory_id = read_meta_properties(meta_dir).directory_id
    assert directory_id is not None and directory_id != read_meta_properties(props["log.dirs"]).directory_id
    boot = read_bootstrap_checkpoint(meta_dir)
    assert boot is not None and boot.kraft_version == KRAFT_VERSION_1
    assert boot.voters == VoterSet([Voter(1, directory_id, (Endpoint("CONTROLLER", "n1.lab", 19093),))])
    assert bootstrap_path(meta_dir).name == "00000000000000000000-0000000000.checkpoint"
    # dump-log shows the records as Kafka's tool does
    assert main(["dump-log", str(bootstrap_path(meta_dir))]) == 0
    out = capsys.readouterr().out
    assert 'KRaftVersion {"version": 0, "kRaftVersion": 1}' in out
    assert (
        f'KRaftVoters {{"version": 0, "voters": [{{"voterId": 1, "voterDirectoryId": "{uuid_to_kafka(directory_id)}"'
        in out
    )


def test_initial_controllers_give_this_node_its_directory_id(tmp_path: Path, write_config: Write) -> None:
    dirs = [uuid.UUID(int=1000 + i) for i in range(3)]
    text = ",".join(f"{i + 1}@h{i + 1}:{9093 + i}:{uuid_to_kafka(d)}" for i, d in enumerate(dirs))
    for node in (2, 4):  # a listed controller, and one that is not listed (it will be an observer)
        props = dynamic_props(node, tmp_path)
        cfg = str(write_config(props, f"{node}.properties"))
        assert (
            main(["format", "--config", cfg, "--cluster-id", random_cluster_id(), "--initial-controllers", text]) == 0
        )
        boot = read_bootstrap_checkpoint(props["metadata.log.dir"])
        assert boot is not None and boot.voters.ids == (1, 2, 3)
        assert boot.voters.voter(3) == Voter(3, dirs[2], (Endpoint("CONTROLLER", "h3", 9095),))
        mine = read_meta_properties(props["metadata.log.dir"]).directory_id
        assert (mine == dirs[1]) if node == 2 else (mine not in dirs)


def test_no_initial_controllers_writes_no_checkpoint(tmp_path: Path, write_config: Write) -> None:
    props = dynamic_props(3, tmp_path)
    cfg = str(write_config(props))
    assert main(["format", "--config", cfg, "--cluster-id", random_cluster_id(), "--no-initial-controllers"]) == 0
    assert read_bootstrap_checkpoint(props["metadata.log.dir"]) is None
    assert read_meta_properties(props["metadata.log.dir"]).directory_id is not None


@pytest.mark.parametrize(
    ("dynamic", "role", "args", "error"),
    [
        (False, "controller", ["--standalone"], "controller.quorum.voters is set"),
        (False, "controller", ["--initial-controllers", "1@h:1:AAAAAAAAAAAAAAAAAAAAZA"], "for a dynamic quorum"),
        (True, "controller", [], "--no-initial-controllers"),
        (True, "broker", ["--standalone"], "process.roles has no controller"),
        (True, "controller", ["--initial-controllers", "1@h:1"], "is not id@host:port:directory-id"),
        (True, "controller", ["--initial-controllers", "1@h:1:nope"], "invalid directory id"),
        (True, "controller", ["--initial-controllers", "1@h:1:AAAAAAAAAAAAAAAAAAAAAA"], "reserved"),
        (
            True,
            "controller",
            ["--initial-controllers", "1@h:1:AAAAAAAAAAAAAAAAAAAAZA,1@g:2:AAAAAAAAAAAAAAAAAAAAZQ"],
            "twice",
        ),
        (True, "controller", ["--initial-controllers", "1@h:70000:AAAAAAAAAAAAAAAAAAAAZA"], "out of range"),
    ],
)
def test_format_refusals(
    dynamic: bool,
    role: str,
    args: list[str],
    error: str,
    tmp_path: Path,
    write_config: Write,
    capsys: pytest.CaptureFixture[str],
) -> None:
    props = dynamic_props(1, tmp_path) if dynamic else node_properties(1, tmp_path, VOTERS)
    if role == "broker":
        props.update({"process.roles": "broker", "listeners": "PLAINTEXT://127.0.0.1:19092"})
    assert main(["format", "--config", str(write_config(props)), "--cluster-id", random_cluster_id(), *args]) == 1
    assert error in capsys.readouterr().err
    assert not (Path(props["metadata.log.dir"]) / "meta.properties").exists()  # nothing half-written


def test_static_format_is_unchanged(tmp_path: Path, write_config: Write) -> None:
    props = node_properties(1, tmp_path, VOTERS)
    assert main(["format", "--config", str(write_config(props)), "--cluster-id", random_cluster_id()]) == 0
    assert read_bootstrap_checkpoint(props["metadata.log.dir"]) is None


def test_bootstrap_servers_config(tmp_path: Path) -> None:
    config = config_from_properties(dynamic_props(1, tmp_path))
    assert config.is_dynamic_quorum and config.voters == ()
    assert config.bootstrap_servers == (("127.0.0.1", 19093), ("127.0.0.1", 19094))
    static = config_from_properties(node_properties(1, tmp_path, VOTERS))
    assert not static.is_dynamic_quorum and static.bootstrap_servers == ()
    neither = node_properties(1, tmp_path, VOTERS)
    del neither["controller.quorum.voters"]
    with pytest.raises(ConfigError, match="one is required"):
        config_from_properties(neither)
    bad = dynamic_props(1, tmp_path)
    bad["controller.quorum.bootstrap.servers"] = "nohost"
    with pytest.raises(ConfigError, match="not host:port"):
        config_from_properties(bad)


def test_start_of_a_dynamic_quorum_needs_the_directory_id(
    tmp_path: Path, write_config: Write, capsys: pytest.CaptureFixture[str]
) -> None:
    """A dynamic quorum knows its voters by directory id: a metadata directory formatted without
    one (an older format) is refused clearly rather than run as a voter nobody can name."""
    props = dynamic_props(1, tmp_path)
    cfg = str(write_config(props))
    assert main(["format", "--config", cfg, "--cluster-id", random_cluster_id(), "--standalone"]) == 0
    meta = Path(props["metadata.log.dir"]) / "meta.properties"
    meta.write_text("".join(line for line in meta.read_text().splitlines(True) if not line.startswith("directory.id")))
    assert main(["start", "--config", cfg]) == 1
    assert "has no directory.id" in capsys.readouterr().err
