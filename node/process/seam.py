"""The seam between the node process and what runs on top of Raft in it: the `Application` protocol,
the `NodeContext` it is built with, the `Appender` it writes through, and `StartupError`."""

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from kraftlab.node import metrics as mx
from kraftlab.node.clock import Clock
from kraftlab.node.config import NodeConfig
from kraftlab.node.journal import Journal
from kraftlab.node.protocol.registry import ApiRegistry
from kraftlab.node.raft.ports import Record, StateMachine
from kraftlab.node.security.listeners import NodeSecurity

log = logging.getLogger("kraft-node")


class StartupError(Exception):
    """The node cannot start; the message says why and what to do."""


# ---------------------------------------------------------------------------------------------
# The application seam: what sits on top of Raft in this process


class Appender(Protocol):
    """How an application writes to the metadata log: one batch, on the leader only
    (`node.raft.core.NotLeader` otherwise); returns the batch's base offset."""

    def append(self, records: Sequence[Record], now_ms: int) -> int: ...

    def next_offset(self) -> int:
        """The offset the next append's first record would get (control records the log writes
        itself included)."""
        ...


@dataclass(slots=True)
class NodeContext:
    """What the process hands an application when it builds it."""

    config: NodeConfig
    cluster_id: str
    clock: Clock
    journal: Journal
    metrics: mx.Metrics
    appender: Appender
    controller_apis: ApiRegistry | None
    broker_apis: ApiRegistry | None
    restarted: bool = False
    """The metadata log held records or a snapshot when the process started (not a first start)."""
    security: NodeSecurity | None = None
    """The listeners' security and the authorizer (node.security.listeners); the application points
    it at the metadata image its SCRAM logins and authorization read."""
    controller_address: Callable[[int], tuple[str, int] | None] | None = None
    """Where controller `id` listens (host, port): in a dynamic quorum (KIP-853) the voter set in
    force says; None: `controller.quorum.voters` does."""
    fail_stop: Callable[[OSError], None] | None = None
    """Stop the node on an I/O error of its log directories met outside a Raft step (a partition log's
    read or write while serving a request or a replica fetch): as Kafka halts when the directory
    holding its metadata log fails; None: nobody to tell (tests)."""


class Application(Protocol):
    """The controller/broker side of a node. Built once storage is open, before the core starts."""

    @property
    def state_machine(self) -> StateMachine: ...

    def after_step(self, now_ms: int) -> None:
        """Called after every Raft step the process applied (commits may have completed requests)."""
        ...

    def tick(self, now_ms: int) -> int | None:
        """Time passed; returns the next time (node ms) it wants a tick, or None."""
        ...

    async def stop(self) -> None:
        """Graceful stop (a broker's controlled shutdown); called before the core stops."""
        ...


ApplicationFactory = Callable[[NodeContext], Application]
