"""One workload client process over Kafka: a `Session` (its node, its connections, the active
controller channel) and a `KafkaClient` that dispatches each op to its workload's handler.

A handler is `async (session, invocation) -> completion value`: it returns on success (`ok`),
raises `DefiniteFailure` for a definite refusal (`fail`) and `IndefiniteError` or a transport
error when the outcome is unknown (`info`; the interpreter retires the process) — except for
broker reads (value `broker_read`), which change nothing: unanswered, they are `fail`, and the
process lives on. Handlers are
looked up by the op's workload (`invocation.extra["workload"]`) and `f`, so several workloads
share one client (the `mixed` workload).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kio.schema.describe_cluster.v1.request import DescribeClusterRequest

from kraftlab.checker.history import Completion
from kraftlab.node.protocol.errors import RequestNotSent, RequestOutcomeUnknown
from kraftlab.workloads import versions
from kraftlab.workloads.client import DefiniteFailure, Invocation
from kraftlab.workloads.kafka import Cluster, Connections, Connector, ControllerChannel, IndefiniteError, call, check

Handler = Callable[["Session", Invocation], Awaitable[Any]]
Handlers = Mapping[tuple[str, str], Handler]
"""(workload, f) → handler."""


@dataclass
class Shared:
    """State shared by every client of one test (one asyncio loop: no locks needed)."""

    cluster_id: str | None = None
    ranges: dict[str, versions.Ranges] = field(default_factory=dict)  # address → served api versions


@dataclass
class Session:
    node: str
    process: int
    cluster: Cluster
    conns: Connections
    controller: ControllerChannel
    shared: Shared

    def broker_addr(self, node: str) -> str:
        addr = self.cluster.nodes[node].broker if node in self.cluster.nodes else None
        if addr is None:
            raise DefiniteFailure(f"not-sent: {node} has no broker listener")
        return addr

    async def broker(self, node: str, request: Any) -> Any:
        """A request to `node`'s broker listener (reads, and writes the broker forwards)."""
        addr = self.broker_addr(node)
        try:
            return await call(self.conns.get(addr), request)
        except DefiniteFailure:
            raise
        except BaseException:
            await self.conns.drop(addr)
            raise

    async def version(self, addr: str, api_key: int) -> int:
        """The version of `api_key` to send to `addr` (its ApiVersions asked once per test)."""
        ranges = self.shared.ranges.get(addr)
        if ranges is None:
            try:
                ranges = await versions.server_ranges(self.conns.get(addr))
            except DefiniteFailure:
                raise
            except RequestNotSent as e:
                raise DefiniteFailure(f"not-sent: {type(e).__name__}") from e
            except Exception as e:  # ApiVersions went unanswered: the op itself was never sent
                await self.conns.drop(addr)
                raise DefiniteFailure(f"not-sent: ApiVersions: {type(e).__name__}") from e
            self.shared.ranges[addr] = ranges
        return versions.pick(ranges, api_key)

    async def broker_api(self, node: str, api_key: int, make: Callable[[int], Any]) -> Any:
        """`make(version)` sent to `node`'s broker in the version both sides serve."""
        addr = self.broker_addr(node)
        return await self.broker(node, make(await self.version(addr, api_key)))

    async def admin(self, api_key: int, make: Callable[[int], Any], code_of: Callable[[Any], int],
                    direct: bool = False) -> Any:
        """CreateTopics/DeleteTopics: through this process's broker (which forwards to the
        controller), or straight to the active controller when `direct` or the node has no
        broker role."""
        if self.cluster.nodes[self.node].broker and not direct:
            return await self.broker_api(self.node, api_key, make)
        addr = await self.controller.active()
        return await self.controller.send(make(await self.version(addr, api_key)), code_of)

    async def cluster_id(self) -> str:
        """The cluster id (DescribeCluster on any broker), fetched once per test."""
        if self.shared.cluster_id is None:
            brokers = self.cluster.brokers
            if not brokers:
                raise DefiniteFailure("not-sent: no broker to ask for the cluster id")
            start = brokers.index(self.node) if self.node in brokers else self.process % len(brokers)
            for i in range(len(brokers)):
                node = brokers[(start + i) % len(brokers)]
                try:
                    resp = await self.broker(node, DescribeClusterRequest(include_cluster_authorized_operations=False))
                    check(resp.error_code)
                except Exception:  # a read: nothing was written; ask the next broker
                    continue
                self.shared.cluster_id = resp.cluster_id
                break
            else:
                raise DefiniteFailure("not-sent: no broker told the cluster id")
        assert self.shared.cluster_id is not None
        return self.shared.cluster_id


@dataclass
class KafkaClient:
    """The `Client` protocol over a `Session`."""

    session: Session
    handlers: Handlers

    @property
    def node(self) -> str:
        return self.session.node

    async def invoke(self, op: Invocation) -> Completion:
        workload = (op.extra or {}).get("workload", "")
        handler = self.handlers.get((workload, op.f))
        if handler is None:
            raise DefiniteFailure(f"not-sent: no handler for {workload}/{op.f}", op.value)
        is_read = isinstance(op.value, dict) and bool(op.value.get("broker_read"))
        try:
            return Completion("ok", await handler(self.session, op))
        except IndefiniteError as e:
            return Completion("fail" if is_read else "info", None, e.error)
        except RequestOutcomeUnknown as e:
            if is_read:  # a read changes nothing: unanswered, it simply did not happen (Jepsen's rule)
                return Completion("fail", None, f"read-unanswered: {type(e).__name__}")
            raise

    async def close(self) -> None:
        await self.session.conns.close()


@dataclass
class KafkaClientFactory:
    """The `ClientFactory` protocol: a fresh session (fresh connections) per process."""

    cluster: Cluster
    connector: Connector
    handlers: Handlers
    shared: Shared = field(default_factory=Shared)

    async def open(self, node: str, process: int) -> KafkaClient:
        conns = Connections(self.connector)
        controllers = self.cluster.controllers
        start = controllers.index(node) if node in controllers else process
        channel = ControllerChannel(self.cluster, conns, start=start)
        return KafkaClient(Session(node, process, self.cluster, conns, channel, self.shared), self.handlers)
