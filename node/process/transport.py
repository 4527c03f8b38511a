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
from kraftlab.node.raft import wire, wire_refusals
from kraftlab.node.raft.voters import VoterSet
from kraftlab.node.security.listeners import NodeSecurity

log = logging.getLogger("kraft-node")

# ---------------------------------------------------------------------------------------------
# Transport: Raft RPCs over the Kafka protocol


def bootstrap_peer_id(index: int) -> int:
    """The peer id of the `index`-th entry of `controller.quorum.bootstrap.servers` (Kafka gives
    bootstrap servers negative ids, as their node ids are unknown): -2, -3, …"""
    return -2 - index


class PeerLinks:
    """One client per peer; requests are sent as tasks and their responses fed back to the core.

    A peer's address: a static voter's from `controller.quorum.voters`; a bootstrap server's
    (negative ids, `bootstrap_peer_id`) from `controller.quorum.bootstrap.servers`; a voter of a
    dynamic quorum's from its endpoint in the voter set in force (`voters_of`, the core's), or in the
    last set that named it (a removed leader leads on until its removal commits); and a leader found
    through a bootstrap server that served a Fetch as leader, at that server's address.
    A request to a peer with no known address fails at once (the core backs off and, as an
    observer, asks the bootstrap servers again)."""

    def __init__(
        self,
        config: NodeConfig,
        cluster_id: str,
        deliver: Callable[[m.Envelope], None],
        security: NodeSecurity | None = None,
        voters_of: Callable[[], VoterSet] | None = None,
    ) -> None:
        self._login, self._ssl = security.controller_client if security is not None else (None, None)
        self._config = config
        self._cluster_id = cluster_id
        self._deliver = deliver
        self._voters_of = voters_of
        self._clients: dict[int, tuple[tuple[str, int], ProtocolClient]] = {}
        self._learned: dict[int, tuple[str, int]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._timeout_s = config.request_timeout_ms / 1000.0

    def address(self, node_id: int) -> tuple[str, int] | None:
        config = self._config
        static = config.voter(node_id)
        if static is not None:
            return static.host, static.port
        if node_id <= -2:
            index = -2 - node_id
            return config.bootstrap_servers[index] if index < len(config.bootstrap_servers) else None
        voter = self._voters_of().voter(node_id) if self._voters_of is not None else None
        if voter is not None:
            names = config.controller_listener_names
            endpoint = next((e for e in voter.endpoints if e.name in names), None)
            if endpoint is not None:
                # Kept: a leader that removed itself still leads until that set commits, and its
                # followers must reach it (Kafka's followers learn its endpoint from its responses).
                self._learned[node_id] = endpoint.host, endpoint.port
                return endpoint.host, endpoint.port
        return self._learned.get(node_id)

    def _client(self, node_id: int) -> ProtocolClient | None:
        address = self.address(node_id)
        if address is None:
            return None
        known = self._clients.get(node_id)
        if known is not None and known[0] == address:
            return known[1]
        if known is not None:  # the voter moved (UpdateRaftVoter): a new connection
            task = asyncio.get_running_loop().create_task(known[1].close())
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        client = ProtocolClient(
            address[0],
            address[1],
            client_id=f"raft-{self._config.node_id}",
            request_timeout=self._timeout_s,
            connect_timeout=self._timeout_s,
            login=self._login,
            ssl_context=self._ssl,
        )
        self._clients[node_id] = (address, client)
        return client

    def send(self, envelope: m.Envelope) -> None:
        if not m.is_request(envelope.message):
            log.debug("dropping a response to %s with no waiting request (ref %r)", envelope.dst, envelope.ref)
            return
        client = self._client(envelope.dst)
        if client is None:
            log.debug("no address for node %d yet: %s fails", envelope.dst, type(envelope.message).__name__)
            failed = m.RequestFailed(m.Errors.BROKER_NOT_AVAILABLE)
            asyncio.get_running_loop().call_soon(
                self._deliver, m.Envelope(envelope.dst, envelope.src, failed, envelope.ref)
            )
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
        if (
            envelope.dst <= -2
            and isinstance(message, m.FetchResponse)
            and message.error == m.Errors.NONE
            and message.leader_id is not None
        ):
            # A bootstrap server that served the Fetch is the leader: its address is the leader's.
            self._learned[message.leader_id] = client.host, client.port
        self._deliver(m.Envelope(envelope.dst, envelope.src, message, envelope.ref))

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for _, client in self._clients.values():
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


async def _later(future: asyncio.Future[m.Message], version: int) -> Any:
    return wire.response_to_wire(await future, version)  # type: ignore[arg-type]  # a request's answer is a response


def register_raft_apis(
    registry: ApiRegistry,
    driver: RaftDriver,
    cluster_id: str,
    timeout_s: float,
    security: NodeSecurity | None = None,
) -> None:
    """Serve Vote, BeginQuorumEpoch, EndQuorumEpoch, Fetch, FetchSnapshot and DescribeQuorum, each in
    the one version `node.raft.wire` maps. A request naming another cluster id, or not for the
    metadata partition, is refused without reaching the core, as Kafka refuses it
    (`node.raft.wire_refusals`: a node of another cluster must not vote). With an authorizer, the
    sender's principal needs CLUSTER_ACTION on the cluster (DESCRIBE for DescribeQuorum), as Kafka's
    controllers require: CLUSTER_AUTHORIZATION_FAILED for the whole request otherwise."""

    def handle(request: Any, context: RequestContext) -> Any:
        """The response entity at once when the core answered within its step (most requests: no
        task, no timer), else an awaitable of it (a parked Fetch)."""
        version = int(request.__version__)
        describe = type(request).__name__ == "DescribeQuorumRequest"
        authorized = security is None or security.allows_on_cluster(context.principal, context.peer, describe=describe)
        refused = wire_refusals.refusal(request, cluster_id, authorized)
        if refused is not None:
            log.warning("refusing %s from %s (%s): %r", type(request).__name__, context.peer, context.principal,
                        refused)
            return refused
        message = wire.request_from_wire(request)
        future = driver.submit(request_source(message), message, timeout_s)
        if future.done():
            return wire.response_to_wire(future.result(), version)  # type: ignore[arg-type]  # the request's response
        return _later(future, version)

    for entity in wire.REQUEST_ENTITIES.values():
        key, version = int(entity.__api_key__), int(entity.__version__)
        registry.register(key, wire.MIN_VERSIONS.get(key, version), wire.MAX_VERSIONS.get(key, version), handle)
