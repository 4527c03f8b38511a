"""The test-only append path: Produce to __cluster_metadata-0 over a real socket, answered on commit."""

from __future__ import annotations

import asyncio

from kraftlab.node.cli import append_test_records
from kraftlab.node.protocol.client import ProtocolClient
from kraftlab.node.protocol.registry import ApiRegistry
from kraftlab.node.protocol.server import ProtocolServer
from kraftlab.node.server import register_test_append
from kraftlab.testing.kraftnode import Cluster


def test_produce_appends_on_leader_and_refuses_elsewhere() -> None:
    async def run() -> None:
        c = Cluster(3, seed=3)
        c.start()
        servers = []
        try:
            leader = await c.leader()
            follower = next(i for i in c.ids if i != leader)
            ports = {}
            for i in (leader, follower):
                registry = ApiRegistry()
                register_test_append(registry, c.drivers[i], 2.0)
                server = ProtocolServer(registry, "127.0.0.1", 0)
                await server.start()
                servers.append(server)
                ports[i] = server.port
            async with ProtocolClient("127.0.0.1", ports[leader]) as client:
                error, base = await append_test_records(client, [b"one", b"two"])
                assert error == "NONE"
                assert c.drivers[leader].core.high_watermark >= base + 2
                values = [r.key for b in c.logs[leader].batches() if not b.control for r in b.records]
                assert values == [b"one", b"two"]
                error2, base2 = await append_test_records(client, [b"three"])
                assert (error2, base2) == ("NONE", base + 2)
            async with ProtocolClient("127.0.0.1", ports[follower]) as client:
                assert (await append_test_records(client, [b"x"]))[0] == "NOT_LEADER_OR_FOLLOWER"
        finally:
            for s in servers:
                await s.stop()
            await c.close()

    asyncio.run(run())
