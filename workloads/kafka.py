"""Kafka connections for workload clients, with Jepsen's op semantics on every failure.

- `Transport` is the seam: one address, `send(kio request) -> kio response`. `TcpTransport` is
  `node.protocol.client.ProtocolClient`; `workloads.fake_kafka` is the in-memory one for tests.
- `call(transport, request)` maps transport failures: a request never sent (`RequestNotSent`:
  connect refused, client closed, unencodable) raises `DefiniteFailure` (Jepsen `fail`); one
  sent without an answer (`RequestOutcomeUnknown`: timeout, connection lost) propagates, and
  the interpreter records it as `info` and retires the process.
- `check(code)` maps a Kafka error code in a response: NONE returns; a definite refusal by the
  controller (`DEFINITE_ERRORS`, and every `INVALID_*` validation error) raises
  `DefiniteFailure(name)`; anything else — NOT_CONTROLLER and REQUEST_TIMED_OUT above all: a
  deposed controller's uncommitted records may still be committed by the next leader — raises
  `IndefiniteError` (→ `info`).
- `ControllerChannel` finds the active controller with DescribeQuorum on any controller and
  sends controller-listener requests there; a NOT_CONTROLLER answer or a lost connection makes
  the NEXT request re-discover it.

A cluster is described by `Cluster`: node name → `NodeAddrs(id, broker, controller)`, each an
"ip:port" or None (`Cluster.parse` takes the catalog's dict form).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from kio.schema.describe_quorum.v1.request import DescribeQuorumRequest
from kio.schema.describe_quorum.v1.request import PartitionData as DqPartition
from kio.schema.describe_quorum.v1.request import TopicData as DqTopic
from kio.schema.errors import ErrorCode
from kio.schema.types import TopicName
from kio.static.primitive import i32

from kraftlab.node.protocol.client import ProtocolClient
from kraftlab.node.protocol.errors import RequestNotSent
from kraftlab.workloads.client import DefiniteFailure

METADATA_TOPIC = TopicName("__cluster_metadata")

DEFINITE_ERRORS: frozenset[str] = frozenset({
    "TOPIC_ALREADY_EXISTS",
    "UNKNOWN_TOPIC_OR_PARTITION",
    "UNKNOWN_TOPIC_ID",
    "STALE_BROKER_EPOCH",
    "DUPLICATE_BROKER_REGISTRATION",
    "FENCED_LEADER_EPOCH",
    "INVALID_UPDATE_VERSION",
    "INELIGIBLE_REPLICA",
    "BROKER_ID_NOT_REGISTERED",
    "INCONSISTENT_CLUSTER_ID",
    "UNSUPPORTED_VERSION",
    "LEADER_NOT_AVAILABLE",
    "SECURITY_DISABLED",  # ACL requests without an authorizer: refused before anything is done
    "CLUSTER_AUTHORIZATION_FAILED",
    "TOPIC_AUTHORIZATION_FAILED",
    "RESOURCE_NOT_FOUND",  # AlterUserScramCredentials: no such credential to delete
    "UNACCEPTABLE_CREDENTIAL",
    "UNSUPPORTED_SASL_MECHANISM",
    "DUPLICATE_RESOURCE",
})
"""Refusals after which the request certainly had no effect (plus every INVALID_* error)."""


def error_name(code: int) -> str:
    """Kafka's name of an error code, as the history records it (`NOT_CONTROLLER`)."""
    try:
        return ErrorCode(code).name.upper()
    except ValueError:
        return f"ERROR_{int(code)}"


def is_definite(name: str) -> bool:
    """Whether a request refused with this error certainly did not take effect."""
    return name in DEFINITE_ERRORS or name.startswith("INVALID_")


class IndefiniteError(Exception):
    """A Kafka error after which the request may still take effect (the op ends `info`)."""

    def __init__(self, error: str) -> None:
        super().__init__(error)
        self.error = error


def check(code: int, value: Any = None) -> None:
    """Raise the Jepsen meaning of a response's error code; return on NONE."""
    if int(code) == 0:
        return
    name = error_name(code)
    if is_definite(name):
        raise DefiniteFailure(name, value)
    raise IndefiniteError(name)


class Transport(Protocol):
    """One Kafka-protocol endpoint."""

    async def send(self, request: Any) -> Any: ...

    async def close(self) -> None: ...


Connector = Callable[[str], Transport]
"""Opens a transport to an "ip:port" address (lazily: no I/O before the first send)."""


def split_addr(addr: str) -> tuple[str, int]:
    host, _, port = addr.rpartition(":")
    return host.strip("[]"), int(port)


@dataclass
class TcpConnector:
    """Real connections: a `ProtocolClient` per address with the given request timeout."""

    request_timeout: float = 3.0
    connect_timeout: float = 2.0
    client_id: str = "kraftlab-workload"

    def __call__(self, addr: str) -> Transport:
        host, port = split_addr(addr)
        return ProtocolClient(host, port, client_id=self.client_id, request_timeout=self.request_timeout,
                              connect_timeout=self.connect_timeout)


async def call(transport: Transport, request: Any) -> Any:
    """Send one request; never-sent → DefiniteFailure, sent-and-lost → the error propagates."""
    try:
        return await transport.send(request)
    except RequestNotSent as e:
        raise DefiniteFailure(f"not-sent: {type(e).__name__}", None) from e


# --- the cluster's addresses ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class NodeAddrs:
    id: int
    broker: str | None
    controller: str | None
    sasl: str | None = None
    """The broker's SASL_PLAINTEXT listener (SCRAM logins), if it has one."""


@dataclass(frozen=True)
class Cluster:
    nodes: Mapping[str, NodeAddrs]

    @classmethod
    def parse(cls, spec: Mapping[str, Mapping[str, Any]]) -> Cluster:
        """From {name: {"broker": "ip:port"|None, "controller": "ip:port"|None, "id": int?,
        "sasl": "ip:port"?}}; the id defaults to the digits of the name (n3 → 3)."""
        out = {}
        for name, d in spec.items():
            nid = d.get("id")
            if nid is None:
                digits = re.findall(r"\d+", name)
                if not digits:
                    raise ValueError(f"node {name!r} needs an 'id' (no digits in its name)")
                nid = int(digits[-1])
            out[name] = NodeAddrs(int(nid), d.get("broker"), d.get("controller"), d.get("sasl"))
        return cls(out)

    @property
    def brokers(self) -> list[str]:
        """Names of the nodes with a broker listener, sorted."""
        return sorted(n for n, a in self.nodes.items() if a.broker)

    @property
    def controllers(self) -> list[str]:
        return sorted(n for n, a in self.nodes.items() if a.controller)

    def controller_addr(self, node_id: int) -> str | None:
        for a in self.nodes.values():
            if a.id == node_id:
                return a.controller
        return None


# --- connections shared by one client ---------------------------------------------------------


@dataclass
class Connections:
    """One transport per address, opened on first use, all closed together."""

    connector: Connector
    _open: dict[str, Transport] = field(default_factory=dict)

    def get(self, addr: str) -> Transport:
        t = self._open.get(addr)
        if t is None:
            t = self._open[addr] = self.connector(addr)
        return t

    async def drop(self, addr: str) -> None:
        t = self._open.pop(addr, None)
        if t is not None:
            await t.close()

    async def close(self) -> None:
        for addr in list(self._open):
            await self.drop(addr)


@dataclass
class ControllerChannel:
    """Sends controller-listener requests to the active controller, found via DescribeQuorum."""

    cluster: Cluster
    conns: Connections
    start: int = 0  # which controller to ask first (spreads discovery over the quorum)
    _active: str | None = None

    async def discover(self) -> str:
        """Ask the controllers in turn who leads; the address of the first leader named."""
        names = self.cluster.controllers
        if not names:
            raise DefiniteFailure("not-sent: no controller listener in the cluster")
        last: str = "no controller answered"
        for i in range(len(names)):
            addr = self.cluster.nodes[names[(self.start + i) % len(names)]].controller
            assert addr is not None
            req = DescribeQuorumRequest(topics=(DqTopic(topic_name=METADATA_TOPIC,
                                                        partitions=(DqPartition(partition_index=i32(0)),)),))
            try:
                resp = await self.conns.get(addr).send(req)
            except Exception as e:  # nothing was written by DescribeQuorum: try the next one
                await self.conns.drop(addr)
                last = f"{addr}: {type(e).__name__}"
                continue
            leader = _quorum_leader(resp)
            found = self.cluster.controller_addr(leader) if leader is not None else None
            if found is not None:
                self._active = found
                return found
            last = f"{addr}: no leader known"
        # Discovery sends no write: the op itself was never sent.
        raise DefiniteFailure(f"not-sent: no active controller ({last})")

    async def active(self) -> str:
        """The active controller's address (discovered when not known)."""
        return self._active or await self.discover()

    async def send(self, request: Any, code_of: Callable[[Any], int] | None = None) -> Any:
        """Send to the active controller; NOT_CONTROLLER (per `code_of`) or a lost connection
        forgets it so the next request re-discovers."""
        addr = await self.active()
        try:
            resp = await call(self.conns.get(addr), request)
        except DefiniteFailure:
            self._active = None
            raise
        except BaseException:
            self._active = None
            await self.conns.drop(addr)
            raise
        if code_of is not None and int(code_of(resp)) == int(ErrorCode.not_controller):
            self._active = None
        return resp


def _quorum_leader(resp: Any) -> int | None:
    if int(resp.error_code) != 0:
        return None
    for t in resp.topics:
        for p in t.partitions:
            if int(p.error_code) == 0 and int(p.leader_id) >= 0:
                return int(p.leader_id)
    return None
