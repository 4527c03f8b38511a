"""A client process that spans several client kinds: each op goes to the client of its workload.

The `mixed` workload runs workloads whose clients differ (the kio sessions of topics, registry and
isr; the queue workload's Kafka producer and consumer). `RoutedFactory` opens, per process, one
client per kind on the first op that needs it (`routes[workload]`, else `default`) and closes them
together. A client that cannot even be opened sent nothing, so that op definitely failed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from kraftlab.workloads.client import Client, ClientFactory, Completion, DefiniteFailure, Invocation


@dataclass
class RoutedClient:
    node_name: str
    process: int
    default: ClientFactory
    routes: Mapping[str, ClientFactory]
    opened: dict[str, Client] = field(default_factory=dict)

    @property
    def node(self) -> str:
        return self.node_name

    async def invoke(self, op: Invocation) -> Completion:
        workload = str((op.extra or {}).get("workload", ""))
        route = workload if workload in self.routes else ""
        client = self.opened.get(route)
        if client is None:
            try:
                client = await self.routes.get(route, self.default).open(self.node_name, self.process)
            except DefiniteFailure:
                raise
            except Exception as e:
                raise DefiniteFailure(f"not-sent: connect: {type(e).__name__}: {e}", op.value) from e
            self.opened[route] = client
        return await client.invoke(op)

    async def close(self) -> None:
        clients, self.opened = list(self.opened.values()), {}
        for c in clients:
            await c.close()


@dataclass
class RoutedFactory:
    """The `ClientFactory` protocol: ops of a workload in `routes` go to its factory's clients,
    the rest to `default`'s."""

    default: ClientFactory
    routes: Mapping[str, ClientFactory]

    async def open(self, node: str, process: int) -> RoutedClient:
        return RoutedClient(node, process, self.default, self.routes)
