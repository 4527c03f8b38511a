"""The controller listener's AddRaftVoter / RemoveRaftVoter / UpdateRaftVoter (KIP-853): decoded,
checked (cluster id, cluster permission) and handed to the Raft core, whose leader answers once the
change has committed (node/raft/membership/changes.py); an answer that does not come in time is
REQUEST_TIMED_OUT, as Kafka's leader answers a change it could not finish."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from kraftlab.node.process.driver import RaftDriver
from kraftlab.node.protocol.registry import ApiRegistry, RequestContext
from kraftlab.node.raft import messages as m
from kraftlab.node.raft.membership import wire
from kraftlab.node.security.listeners import NodeSecurity

log = logging.getLogger("kraft-node")

CHANGE_TIMEOUT_S = 30.0
"""How long a RemoveRaftVoter or UpdateRaftVoter may wait for its commit (AddRaftVoter: its own
timeout plus this)."""


def register_voter_change_apis(
    registry: ApiRegistry, driver: RaftDriver, cluster_id: str, security: NodeSecurity | None = None
) -> None:
    def handle(request: Any, context: RequestContext) -> Any:
        message = wire.request_from_wire(request)

        def refuse(error: m.Errors, why: str) -> Any:
            log.warning("refusing %s from %s: %s", type(message).__name__, context.peer, why)
            return wire.response_to_wire(message, m.VoterChangeResponse(error, why, None, driver.core.epoch))

        if security is not None and not security.allows_on_cluster(context.principal, context.peer):
            return refuse(m.Errors.CLUSTER_AUTHORIZATION_FAILED, f"{context.principal} lacks the cluster permission")
        sender_cluster = getattr(request, "cluster_id", None)
        if sender_cluster is not None and sender_cluster != cluster_id:
            return refuse(m.Errors.INCONSISTENT_CLUSTER_ID, f"cluster id {sender_cluster}")
        timeout_s = CHANGE_TIMEOUT_S
        if isinstance(message, m.AddRaftVoterRequest):
            timeout_s += message.timeout_ms / 1000.0
        try:
            future = driver.submit(-1, message, timeout_s)
        except ConnectionRefusedError as e:
            return refuse(m.Errors.NOT_LEADER_OR_FOLLOWER, str(e))
        if future.done():
            return _answer(message, future)
        return _later(message, future)

    for entity in wire.REQUEST_ENTITIES.values():
        version = int(entity.__version__)
        registry.register(int(entity.__api_key__), version, version, handle)


def _answer(request: m.Request, future: asyncio.Future[m.Message]) -> Any:
    try:
        response = future.result()
    except TimeoutError:
        response = m.VoterChangeResponse(m.Errors.REQUEST_TIMED_OUT, "the change did not commit in time")
    if not isinstance(response, m.VoterChangeResponse):
        response = m.VoterChangeResponse(m.Errors.UNKNOWN_SERVER_ERROR, f"unexpected {type(response).__name__}")
    return wire.response_to_wire(request, response)


async def _later(request: m.Request, future: asyncio.Future[m.Message]) -> Any:
    with contextlib.suppress(TimeoutError):
        await future
    return _answer(request, future)
