"""node.config: Java properties syntax, Kafka defaults, and validation errors."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kraftlab.node.config import (
    ConfigError,
    config_from_properties,
    load_config,
    parse_properties,
    parse_voters,
    render_properties,
)

BASE = {
    "process.roles": "broker,controller",
    "node.id": "1",
    "controller.quorum.voters": "1@127.0.0.1:9093,2@127.0.0.1:9094,3@[::1]:9095",
    "listeners": "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
    "controller.listener.names": "CONTROLLER",
    "log.dirs": "/data/a,/data/b",
}


def cfg(**changes: str | None) -> dict[str, str]:
    props = dict(BASE)
    for k, v in changes.items():
        key = k.replace("_", ".")
        if v is None:
            props.pop(key, None)
        else:
            props[key] = v
    return props


def test_properties_syntax() -> None:
    text = (
        "# comment\n"
        "  ! another comment\n"
        "a=1\n"
        "b : 2\n"
        "c 3\n"
        "d=\n"
        "e   =   spaced value  \n"
        "multi = one,\\\n"
        "        two,\\\n"
        "   three\n"
        "esc\\=key=tab\\there\\u0041\n"
        "back=slash\\\\\n"
        "colon\\:k:v:w\n"
        "last=dup1\nlast=dup2\n"
    )
    p = parse_properties(text)
    assert p["a"] == "1"
    assert p["b"] == "2"
    assert p["c"] == "3"
    assert p["d"] == ""
    assert p["e"] == "spaced value  "
    assert p["multi"] == "one,two,three"
    assert p["esc=key"] == "tab\thereA"
    assert p["back"] == "slash\\"
    assert p["colon:k"] == "v:w"
    assert p["last"] == "dup2"
    assert "# comment" not in p and len(p) == 10


def test_bad_unicode_escape() -> None:
    with pytest.raises(ConfigError, match="uxxxx"):
        parse_properties("a=\\u12x4\n")


@given(st.dictionaries(st.text(min_size=1, max_size=12), st.text(max_size=20), max_size=6))
def test_render_round_trips(props: dict[str, str]) -> None:
    assert parse_properties(render_properties(props)) == props


def test_defaults_and_accessors(tmp_path: Path) -> None:
    path = tmp_path / "server.properties"
    path.write_text(render_properties(BASE))
    c = load_config(path)
    assert c.roles == {"broker", "controller"} and c.is_broker and c.is_controller
    assert c.node_id == 1
    assert c.voter_ids == (1, 2, 3)
    assert c.voter(3) is not None and c.voter(3).host == "::1"  # type: ignore[union-attr]
    assert c.controller_listener is not None and c.controller_listener.port == 9093
    assert [e.name for e in c.broker_listeners] == ["PLAINTEXT"]
    assert c.metadata_log_dir == Path("/data/a")
    assert c.all_log_dirs == (Path("/data/a"), Path("/data/b"))
    assert (c.election_timeout_ms, c.fetch_timeout_ms, c.election_backoff_max_ms) == (1000, 2000, 1000)
    assert (c.request_timeout_ms, c.retry_backoff_ms, c.append_linger_ms) == (2000, 20, 25)
    assert (c.broker_session_timeout_ms, c.broker_heartbeat_interval_ms) == (9000, 2000)
    assert c.broker_self_fence_timeout_ms > c.broker_session_timeout_ms
    assert c.journal_file == Path("/data/a/journal.jsonl")
    assert c.metrics_port is None and c.clock_file is None  # nothing optional binds a port by default
    assert c.security_protocol_map == {"PLAINTEXT": "PLAINTEXT", "CONTROLLER": "PLAINTEXT"}
    # Kafka's metadata log retention: 100 MiB, 7 days
    assert (c.metadata_max_retention_bytes, c.metadata_max_retention_ms) == (104857600, 604800000)


def test_overrides() -> None:
    c = config_from_properties(
        cfg(
            **{
                "metadata_log_dir": "/meta",
                "controller_quorum_election_timeout_ms": "300",
                "kraftlab_metrics_port": "0",
                "kraftlab_clock_file": "/c.json",
                "metadata_max_retention_bytes": "-1",
                "metadata_max_retention_ms": "0",
            }
        )
    )
    assert (c.metadata_max_retention_bytes, c.metadata_max_retention_ms) == (-1, 0)  # -1: no limit
    assert c.metadata_log_dir == Path("/meta")
    assert c.all_log_dirs == (Path("/meta"), Path("/data/a"), Path("/data/b"))
    assert c.election_timeout_ms == 300 and c.metrics_port == 0 and c.clock_file == Path("/c.json")


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"process_roles": "broker,zookeeper"}, "unknown role 'zookeeper'"),
        ({"process_roles": None}, "process.roles: missing"),
        ({"node_id": None}, "node.id: missing"),
        ({"node_id": "x"}, "node.id: expected an integer"),
        ({"controller_quorum_voters": "1@host"}, "is not host:port"),
        ({"controller_quorum_voters": "a@host:1"}, "is not id@host:port"),
        ({"controller_quorum_voters": "1@h:1,1@h:2"}, "duplicate voter id"),
        ({"controller_quorum_voters": "2@h:1,3@h:2"}, "is not one of the voters"),
        ({"listeners": "PLAINTEXT://127.0.0.1:9092"}, "needs a listener named in controller.listener.names"),
        ({"controller_listener_names": None}, "controller.listener.names: missing"),
        ({"listeners": "PLAINTEXT//x:1,CONTROLLER://x:2"}, "is not NAME://host:port"),
        ({"listener_security_protocol_map": "PLAINTEXT:GSSAPI_SSL,CONTROLLER:PLAINTEXT"}, "unsupported"),
        ({"controller_quorum_fetch_timeout_ms": "-1"}, "must be >= 1"),
        ({"kraftlab_unsafe_bug": "stale-read"}, "test-only switch"),
        ({"kraftlab_unsafe_lose_unflushed": "true"}, "removed; a power loss is made by the disk-fault filesystem"),
        ({"kraftlab_unsafe_whatever": "1"}, "unknown test-only switch"),
        ({"kraftlab_broker_self_fence_timeout_ms": "5000"}, "must be longer than"),
        ({"metadata_max_retention_bytes": "-2"}, "metadata.max.retention.bytes: must be >= -1, got -2"),
        ({"metadata_max_retention_bytes": "100MB"}, "metadata.max.retention.bytes: expected an integer"),
        ({"metadata_max_retention_ms": "1.5"}, "metadata.max.retention.ms: expected an integer"),
    ],
)
def test_validation_errors(changes: dict[str, str | None], message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        config_from_properties(cfg(**changes))


def test_broker_only_rules() -> None:
    broker = {"process_roles": "broker", "node_id": "4", "listeners": "PLAINTEXT://127.0.0.1:9192"}
    c = config_from_properties(cfg(**broker))
    assert c.is_broker and not c.is_controller and c.controller_listener is None
    with pytest.raises(ConfigError, match="must not bind the controller listener"):
        config_from_properties(cfg(**{**broker, "listeners": "PLAINTEXT://h:1,CONTROLLER://h:2"}))
    with pytest.raises(ConfigError, match=r"inter\.broker\.listener\.name"):
        config_from_properties(cfg(**{**broker, "inter_broker_listener_name": "INTERNAL"}))


def test_unsafe_keys_accepted_in_test_mode() -> None:
    c = config_from_properties(
        cfg(
            kraftlab_unsafe_test_mode="true",
            kraftlab_unsafe_bug="no-check-quorum, ack-before-fsync",
        )
    )
    assert c.unsafe_test_mode
    assert c.bugs.on("no-check-quorum") and c.bugs.on("ack-before-fsync") and not c.bugs.on("no-self-fencing")
    with pytest.raises(ConfigError, match=r"kraftlab\.unsafe\.bug: unknown bug\(s\) no-such-bug"):
        config_from_properties(cfg(kraftlab_unsafe_test_mode="true", kraftlab_unsafe_bug="no-such-bug"))
    assert not config_from_properties(cfg()).bugs


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "nope.properties")


def test_parse_voters_ipv6() -> None:
    assert [(v.node_id, v.host, v.port) for v in parse_voters("7@[fe80::1]:1")] == [(7, "fe80::1", 1)]
