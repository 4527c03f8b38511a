"""The node's public admin surface: the one part of the node the suite (deploy, runner, labs) may
import, besides the Kafka protocol client. Kafka's admin queries (DescribeQuorum, DescribeCluster,
UnregisterBroker) as JSON-ready data, voter changes sent together, formatting storage, a new cluster
id, and `server.properties` rendering — the same functions `kraft-node`'s commands use, so a query in
the suite's process and `kraft-node describe-quorum` give the same JSON. Failures raise `AdminError`
with one clear line.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from kraftlab.node.config import ConfigError, load_config, render_properties
from kraftlab.node.kafka_uuid import uuid_to_kafka
from kraftlab.node.storage.errors import StorageError
from kraftlab.node.storage.meta_properties import format_dirs, random_cluster_id, validate_cluster_id

__all__ = ["AdminError", "VoterChange", "bug_names", "change_voters_together_now", "cluster_json", "describe_cluster",
           "describe_cluster_now", "describe_quorum", "describe_quorum_now", "format_storage", "quorum_json",
           "random_cluster_id", "render_properties"]

METADATA_TOPIC = "__cluster_metadata"
DESCRIBE_QUORUM_KEY = 55
DESCRIBE_CLUSTER_KEY = 60
UNREGISTER_BROKER_KEY = 64


class AdminError(Exception):
    """An admin operation could not do its job; the message says why in one line."""


def bug_names(end_to_end_only: bool = False) -> list[str]:
    """The names of the node's test-only bug switches (`kraftlab.unsafe.bug`), from its registry
    (node/bugs.py): the one list the suite's bug zoo plans against (`end_to_end_only`: those an
    end-to-end run can expose yet)."""
    from kraftlab.node.bugs import BUGS

    return [b.name for b in BUGS if b.end_to_end or not end_to_end_only]


def _schema(api: str, version: int, kind: str) -> Any:
    return importlib.import_module(f"kio.schema.{api}.v{version}.{kind}")


async def query(
    address: tuple[str, int], api_key: int, versions: tuple[int, int], build: Callable[[int], Any], timeout: float
) -> Any:
    from kraftlab.node.protocol.client import ProtocolClient
    from kraftlab.node.protocol.errors import RequestError
    from kraftlab.node.protocol.negotiate import negotiate

    host, port = address
    try:
        async with ProtocolClient(
            host, port, client_id="kraft-node", request_timeout=timeout, connect_timeout=timeout
        ) as client:
            version = (await negotiate(client, {api_key: versions}))[api_key]
            return await client.send(build(version))
    except (RequestError, OSError) as e:
        raise AdminError(f"{host}:{port}: {type(e).__name__}: {e}") from None


def describe_quorum_request(version: int) -> Any:
    mod = _schema("describe_quorum", version, "request")
    partition = mod.PartitionData(partition_index=0)
    return mod.DescribeQuorumRequest(topics=(mod.TopicData(topic_name=METADATA_TOPIC, partitions=(partition,)),))


def error_name(code: Any) -> str:
    return getattr(code, "name", str(code)).upper()


def quorum_json(response: Any) -> dict[str, Any]:
    """DescribeQuorum's answer as the CLI prints it: leader, epoch, HW, voters, observers."""
    top_error = getattr(response, "error_code", None)
    if top_error is not None and int(top_error) != 0:
        raise AdminError(f"DescribeQuorum failed: {error_name(top_error)} {getattr(response, 'error_message', '')}")
    try:
        part = next(p for t in response.topics if t.topic_name == METADATA_TOPIC for p in t.partitions)
    except StopIteration:
        raise AdminError("DescribeQuorum answered without the metadata partition") from None
    if int(part.error_code) != 0:
        raise AdminError(f"DescribeQuorum failed: {error_name(part.error_code)}")

    v2 = hasattr(response, "nodes")  # KIP-853: directory ids and the voters' listeners

    def replica(r: Any) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": int(r.replica_id),
            "log_end_offset": int(r.log_end_offset),
            "last_fetch_timestamp": int(getattr(r, "last_fetch_timestamp", -1)),
            "last_caught_up_timestamp": int(getattr(r, "last_caught_up_timestamp", -1)),
        }
        if v2:
            directory = r.replica_directory_id
            out["directory_id"] = None if directory is None or directory.int == 0 else uuid_to_kafka(directory)
        return out

    leader = int(part.leader_id)
    described: dict[str, Any] = {
        "leader": leader if leader >= 0 else None,
        "epoch": int(part.leader_epoch),
        "high_watermark": int(part.high_watermark),
        "voters": [replica(r) for r in part.current_voters],
        "observers": [replica(r) for r in part.observers],
    }
    if v2:
        described["nodes"] = {
            str(int(n.node_id)): [f"{x.name}://{x.host}:{int(x.port)}" for x in n.listeners] for n in response.nodes
        }
        # A VotersRecord names every voter's directory (kraft.version 1); a static quorum's voters have none.
        dynamic = any(v.get("directory_id") for v in described["voters"])
        described["kraft_version"] = 1 if dynamic else 0
    return described


def replication_table(described: dict[str, Any]) -> str:
    """`kafka-metadata-quorum describe --replication`'s table of a `quorum_json` answer."""
    hw = described["high_watermark"]
    rows = [("NodeId", "DirectoryId", "LogEndOffset", "Lag", "LastFetchTimestamp", "LastCaughtUpTimestamp", "Status")]
    for status, replicas in (("Voter", described["voters"]), ("Observer", described["observers"])):
        for r in replicas:
            role = "Leader" if r["id"] == described["leader"] else status
            rows.append(
                (
                    str(r["id"]),
                    str(r.get("directory_id") or "-"),
                    str(r["log_end_offset"]),
                    str(max(0, hw - r["log_end_offset"])),
                    str(r["last_fetch_timestamp"]),
                    str(r["last_caught_up_timestamp"]),
                    role,
                )
            )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows)


def describe_cluster_request(version: int) -> Any:
    mod = _schema("describe_cluster", version, "request")
    return mod.DescribeClusterRequest(include_cluster_authorized_operations=False)


def cluster_json(response: Any) -> dict[str, Any]:
    if int(response.error_code) != 0:
        detail = response.error_message or ""
        raise AdminError(f"DescribeCluster failed: {error_name(response.error_code)} {detail}")
    controller = int(response.controller_id)
    return {
        "cluster_id": str(response.cluster_id),
        "controller": controller if controller >= 0 else None,
        "brokers": [
            {"id": int(b.broker_id), "host": b.host, "port": int(b.port), "rack": b.rack}
            for b in sorted(response.brokers, key=lambda b: int(b.broker_id))
        ],
    }


async def describe_quorum(address: tuple[str, int], timeout: float = 5.0) -> dict[str, Any]:
    """DescribeQuorum against a controller listener, as JSON-ready data (AdminError on errors)."""
    response = await query(address, DESCRIBE_QUORUM_KEY, (0, 2), describe_quorum_request, timeout)
    return quorum_json(response)


async def describe_cluster(address: tuple[str, int], timeout: float = 5.0) -> dict[str, Any]:
    """DescribeCluster against a broker listener, as JSON-ready data (AdminError on errors)."""
    response = await query(address, DESCRIBE_CLUSTER_KEY, (0, 1), describe_cluster_request, timeout)
    return cluster_json(response)


def unregister_request(broker_id: int) -> Callable[[int], Any]:
    def build(version: int) -> Any:
        return _schema("unregister_broker", version, "request").UnregisterBrokerRequest(broker_id=broker_id)

    return build



def describe_quorum_now(host: str, port: int, timeout: float = 2.0) -> dict[str, Any]:
    """`describe_quorum` from synchronous code (the suite's deploy and health checks)."""
    import asyncio  # here, not at import: `kraft-node --help` answers without loading it

    return asyncio.run(describe_quorum((host, port), timeout))


@dataclass(frozen=True, slots=True)
class VoterChange:
    """One AddRaftVoter (`kind` "add": the controller `node_id`, its disk's `directory_id`, its
    controller listener `endpoint` as (name, host, port)) or RemoveRaftVoter ("remove": `node_id`,
    `directory_id`), as Kafka's text for directory ids."""

    kind: str
    node_id: int
    directory_id: str
    endpoint: tuple[str, str, int] = ("", "", 0)


def change_voters_together_now(
    addresses: Sequence[tuple[str, int]], changes: Sequence[VoterChange], cluster_id: str, timeout: float, slack: float
) -> list[tuple[str, str]]:
    """Voter changes sent at once (each over its own connections) from synchronous code: the suite's
    membership nemesis racing two changes. Each answer as (Kafka's error name, message)."""
    import asyncio

    from kraftlab.node.voter_admin import change_voters_together

    return asyncio.run(change_voters_together(addresses, changes, cluster_id, timeout, slack))


def describe_cluster_now(host: str, port: int, timeout: float = 2.0) -> dict[str, Any]:
    """`describe_cluster` from synchronous code."""
    import asyncio

    return asyncio.run(describe_cluster((host, port), timeout))


def format_storage(config_path: str, cluster_id: str, *, ignore_formatted: bool) -> None:
    """`kraft-node format`: meta.properties in every log directory of the node configured at
    `config_path` (AdminError on a bad config, a bad cluster id or a directory formatted otherwise)."""
    try:
        config = load_config(config_path)
        validate_cluster_id(cluster_id)
        format_dirs(config.all_log_dirs, cluster_id, config.node_id, ignore_formatted)
    except (ConfigError, ValueError, StorageError, OSError) as exc:
        raise AdminError(str(exc)) from None
