"""Raft RPCs over the Kafka protocol: `PeerLinks` (one client per voter; responses — or `RequestFailed`
when none will come — fed back to the core with the request's ref) and `register_raft_apis` (the
listener side, refusing other clusters' requests without reaching the core)."""

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from kraftlab.node.config import NodeConfig
from kraftlab.node.process.driver import RaftDriver
from kraftlab.node.protocol.client import ProtocolClient
from kraftlab.node.protocol.errors import RequestError, RequestTimedOut
from kraftlab.node.protocol.registry import ApiRegistry, RequestContext
from kraftlab.node.raft import messages as m
from kraftlab.node.raft import wire
from kraftlab.node.security.listeners import NodeSecurity

log = logging.getLogger("kraft-node")

# ---------------------------------------------------------------------------------------------
# Transport: Raft RPCs over the Kafka protocol


class PeerLinks:
    """One client per voter; requests are sent as tasks and their responses fed back to the core."""

    def __init__(
        self,
        config: NodeConfig,
        cluster_id: str,
        deliver: Callable[[m.Envelope], None],
        security: NodeSecurity | None = None,
    ) -> None:
        self._login, self._ssl = security.controller_client if security is not None else (None, None)
        self._config = config
        self._cluster_id = cluster_id
        self._deliver = deliver
        self._clients: dict[int, ProtocolClient] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._timeout_s = config.request_timeout_ms / 1000.0

    def _client(self, node_id: int) -> ProtocolClient | None:
        client = self._clients.get(node_id)
        if client is None:
            voter = self._config.voter(node_id)
            if voter is None:
                return None
            client = ProtocolClient(
                voter.host,
                voter.port,
                client_id=f"raft-{self._config.node_id}",
                request_timeout=self._timeout_s,
                connect_timeout=self._timeout_s,
                login=self._login,
                ssl_context=self._ssl,
            )
            self._clients[node_id] = client
        return client

    def send(self, envelope: m.Envelope) -> None:
        if not m.is_request(envelope.message):
            log.debug("dropping a response to %s with no waiting request (ref %r)", envelope.dst, envelope.ref)
            return
        client = self._client(envelope.dst)
        if client is None:
            log.warning("no address for node %d: dropping %s", envelope.dst, type(envelope.message).__name__)
            return
        task = asyncio.get_running_loop().create_task(self._exchange(client, envelope))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _exchange(self, client: ProtocolClient, envelope: m.Envelope) -> None:
        # send() passes requests only (m.is_request)
        request = wire.request_to_wire(envelope.message, self._cluster_id, envelope.dst)  # type: ignore[arg-type]
        try:
            response = await client.send(request)
        except RequestError as e:
            log.debug("%s to %d failed: %s", type(envelope.message).__name__, envelope.dst, e)
            # The core retries after a backoff, and a vote round stops waiting for this voter.
            error = m.Errors.REQUEST_TIMED_OUT if isinstance(e, RequestTimedOut) else m.Errors.BROKER_NOT_AVAILABLE
            self._deliver(m.Envelope(envelope.dst, envelope.src, m.RequestFailed(error), envelope.ref))
            return
        try:
            message = wire.response_from_wire(response)
        except Exception as e:  # a peer answering nonsense must not stop this node
            log.warning("undecodable %s from %d: %s", type(response).__name__, envelope.dst, e)
            return
        self._deliver(m.Envelope(envelope.dst, envelope.src, message, envelope.ref))

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for client in self._clients.values():
            await client.close()
        self._clients.clear()


def request_source(message: m.Message) -> int:
    """The node a Raft request came from, as its fields say (-1 for DescribeQuorum, from anyone)."""
    if isinstance(message, m.VoteRequest):
        return message.candidate_id
    if isinstance(message, m.BeginQuorumEpochRequest | m.EndQuorumEpochRequest):
        return message.leader_id
    if isinstance(message, m.FetchRequest | m.FetchSnapshotRequest):
        return message.replica_id
    return -1


def refusal(message: m.Message, error: m.Errors, epoch: int) -> m.Response:
    """The core's response type for `message`, carrying only `error` (the core never sees it)."""
    if isinstance(message, m.VoteRequest):
        return m.VoteResponse(error, epoch, None, False, message.pre_vote)
    if isinstance(message, m.BeginQuorumEpochRequest):
        return m.BeginQuorumEpochResponse(error, epoch, None)
    if isinstance(message, m.EndQuorumEpochRequest):
        return m.EndQuorumEpochResponse(error, epoch, None)
    if isinstance(message, m.FetchRequest):
        return m.FetchResponse(error, epoch, None)
    if isinstance(message, m.FetchSnapshotRequest):
        return m.FetchSnapshotResponse(error, epoch, None)
    return m.DescribeQuorumResponse(error, None, epoch, -1)


async def _later(future: asyncio.Future[m.Message]) -> Any:
    return wire.response_to_wire(await future)  # type: ignore[arg-type]  # a request's answer is a response


def register_raft_apis(
    registry: ApiRegistry,
    driver: RaftDriver,
    cluster_id: str,
    timeout_s: float,
    security: NodeSecurity | None = None,
) -> None:
    """Serve Vote, BeginQuorumEpoch, EndQuorumEpoch, Fetch, FetchSnapshot and DescribeQuorum, each in
    the one version `node.raft.wire` maps. A request naming another cluster id is answered
    INCONSISTENT_CLUSTER_ID without reaching the core (a node of another cluster must not vote).
    With an authorizer, the sender's principal needs CLUSTER_ACTION on the cluster (DESCRIBE for
    DescribeQuorum), as Kafka's controllers require: CLUSTER_AUTHORIZATION_FAILED otherwise."""

    def handle(request: Any, context: RequestContext) -> Any:
        """The response entity at once when the core answered within its step (most requests: no
        task, no timer), else an awaitable of it (a parked Fetch)."""
        message = wire.request_from_wire(request)
        if security is not None and not security.allows_on_cluster(
            context.principal, context.peer, describe=isinstance(message, m.DescribeQuorumRequest)
        ):
            log.warning("refusing %s from %s: %s lacks the cluster permission", type(message).__name__,
                        context.peer, context.principal)
            return wire.response_to_wire(refusal(message, m.Errors.CLUSTER_AUTHORIZATION_FAILED, driver.core.epoch))
        sender_cluster = getattr(request, "cluster_id", None)
        if sender_cluster is not None and sender_cluster != cluster_id:
            log.warning("refusing %s from %s: cluster id %s", type(message).__name__, context.peer, sender_cluster)
            return wire.response_to_wire(refusal(message, m.Errors.INCONSISTENT_CLUSTER_ID, driver.core.epoch))
        future = driver.submit(request_source(message), message, timeout_s)
        if future.done():
            return wire.response_to_wire(future.result())  # type: ignore[arg-type]  # the request's response
        return _later(future)

    for entity in wire.REQUEST_ENTITIES.values():
        version = int(entity.__version__)
        registry.register(int(entity.__api_key__), version, version, handle)
