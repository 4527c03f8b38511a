"""The follower fetchers' edge: each `FetchFromLeader` the replication core emits is sent to the
leader broker's inter-broker listener (its endpoint from the metadata image), one client per
leader, and its answer (or the failure) handed back to the core's fetcher."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any

from kraftlab.node.broker.replication import FetchFromLeader
from kraftlab.node.broker.replication.fetcher import FOLLOWER_MAX_WAIT_MS
from kraftlab.node.metadata.image import MetadataImage
from kraftlab.node.protocol.client import ProtocolClient
from kraftlab.node.protocol.errors import RequestError

log = logging.getLogger("kraft-node")


class ReplicaLinks:
    def __init__(self, node_id: int, listener: str, image: Callable[[], MetadataImage], timeout_s: float,
                 on_response: Callable[[int, Any], None], on_failure: Callable[[int], None]) -> None:  # fmt: skip
        self.node_id = node_id
        self.listener = listener
        self.image = image
        self.timeout_s = timeout_s
        self.on_response = on_response
        self.on_failure = on_failure
        self._clients: dict[tuple[int, str, int], ProtocolClient] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    def send(self, out: FetchFromLeader) -> None:
        task = asyncio.get_running_loop().create_task(self._exchange(out))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _client(self, leader: int) -> ProtocolClient | None:
        broker = self.image().brokers.get(leader)
        endpoint = broker.endpoint(self.listener) if broker is not None else None
        if endpoint is None:
            return None
        key = (leader, endpoint.host, endpoint.port)
        client = self._clients.get(key)
        if client is None:
            client = self._clients[key] = ProtocolClient(
                endpoint.host, endpoint.port, client_id=f"replica-fetcher-{self.node_id}",
                request_timeout=self.timeout_s, connect_timeout=self.timeout_s,
            )  # fmt: skip
        return client

    async def _exchange(self, out: FetchFromLeader) -> None:
        client = self._client(out.leader)
        if client is None:
            await asyncio.sleep(0.1)
            self.on_failure(out.token)
            return
        try:
            response = await client.send(out.request, timeout=self.timeout_s + FOLLOWER_MAX_WAIT_MS / 1000.0)
        except (RequestError, OSError) as e:
            log.debug("fetch from leader %d failed: %s", out.leader, e)
            self.on_failure(out.token)
            return
        self.on_response(out.token, response)

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for client in self._clients.values():
            with contextlib.suppress(Exception):
                await client.close()
