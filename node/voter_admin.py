"""`kraft-node add-controller` / `remove-controller` (Kafka's `kafka-metadata-quorum add-controller`
/ `remove-controller`, KIP-853): AddRaftVoter and RemoveRaftVoter sent to a dynamic quorum's leader.

The request goes to each `--bootstrap-controller` in turn until one does not answer
NOT_LEADER_OR_FOLLOWER (the leader, or a controller with a definite refusal). `add-controller`
adds the controller whose configuration it is given (`--command-config`, as Kafka's tool takes
it): its node id, its metadata directory's id (meta.properties) and its advertised controller
listeners.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from kraftlab.node.admin import AdminError, VoterChange, query
from kraftlab.node.config import ConfigError, load_config
from kraftlab.node.kafka_uuid import parse_kafka_uuid
from kraftlab.node.raft import messages as m
from kraftlab.node.raft.membership import wire
from kraftlab.node.raft.voters import Endpoint, Voter
from kraftlab.node.storage.errors import StorageError
from kraftlab.node.storage.meta_properties import read_meta_properties


def local_controller(config_path: str) -> tuple[Voter, str]:
    """The voter a controller's configuration and formatted metadata directory describe, and its cluster id."""
    try:
        config = load_config(config_path)
        if not config.is_controller:
            raise AdminError(f"{config_path}: process.roles has no controller")
        meta = read_meta_properties(config.metadata_log_dir)
    except (ConfigError, StorageError, ValueError, OSError) as e:
        raise AdminError(f"{config_path}: {e}") from None
    if meta.directory_id is None:
        raise AdminError(f"{config.metadata_log_dir}/meta.properties has no directory.id (format it again)")
    advertised = [config.advertised(name) for name in config.controller_listener_names]
    endpoints = tuple(Endpoint(a.name, a.host, a.port) for a in advertised if a is not None)
    if not endpoints:
        raise AdminError(f"{config_path}: no controller listener to advertise")
    return Voter(config.node_id, meta.directory_id, endpoints), meta.cluster_id


async def change_voters(
    addresses: Sequence[tuple[str, int]], request: m.Request, cluster_id: str | None, timeout: float
) -> m.VoterChangeResponse:
    """Send a voter change to the leader among `addresses`; its answer (AdminError if none took it)."""
    entity = wire.request_to_wire(request, cluster_id)
    api_key = int(entity.__api_key__)
    tried: list[str] = []
    for address in addresses:
        try:
            raw: Any = await query(address, api_key, (0, 0), lambda _: entity, timeout)
        except AdminError as e:
            tried.append(str(e))
            continue
        response = wire.response_from_wire(raw)
        if response.error != m.Errors.NOT_LEADER_OR_FOLLOWER:
            return response
        tried.append(f"{address[0]}:{address[1]}: not the leader")
    raise AdminError(f"{type(request).__name__}: no controller took it ({'; '.join(tried)})")


async def change_voters_together(
    addresses: Sequence[tuple[str, int]], changes: Sequence[VoterChange], cluster_id: str, timeout: float, slack: float
) -> list[tuple[str, str]]:
    """Several voter changes sent at once, each over its own connections (to each of `addresses` in
    turn until the leader takes it): each answer as (Kafka's error name, message), `UNREACHABLE`
    when no controller took it (it may still commit). The leader waits up to `timeout` for an added
    voter to catch up; an answer is awaited `slack` longer."""

    async def one(change: VoterChange) -> tuple[str, str]:
        try:
            directory = parse_kafka_uuid(change.directory_id, "directory id")
        except ValueError as e:
            return "INVALID_REQUEST", f"controller {change.node_id}: {e}"
        request: m.Request
        if change.kind == "add":
            voter = Voter(change.node_id, directory, (Endpoint(*change.endpoint),))
            request = m.AddRaftVoterRequest(voter, int(timeout * 1000))
        else:
            request = m.RemoveRaftVoterRequest(change.node_id, directory)
        try:
            response = await change_voters(
                addresses, request, cluster_id if change.kind == "add" else None, timeout + slack
            )
        except AdminError as e:
            return "UNREACHABLE", str(e)[-300:]
        return response.error.name, response.message or ""

    return list(await asyncio.gather(*(one(c) for c in changes)))


def describe_change(kind: str, voter_id: int, response: m.VoterChangeResponse) -> str:
    """The tool's one line for an answer; AdminError unless it succeeded."""
    if response.error != m.Errors.NONE:
        raise AdminError(f"{kind} controller {voter_id} failed: {response.error.name} {response.message or ''}".strip())
    return f"{kind.capitalize()}ed controller {voter_id}" if kind == "add" else f"Removed controller {voter_id}"
