"""Asking a cluster what its brokers serve before a run is built (ApiVersions, synchronously).

`brokers_serve(cluster, connector, api_keys)` asks the brokers in turn and answers for the first
that replies: whether its ApiVersions lists every api key (the nodes of a test run one build, so
one answer speaks for all). None answering means no: a workload that needs those APIs is left out
or refused rather than run into errors. It runs its own event loop in a worker thread, so a
caller may or may not be inside one.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
from collections.abc import Sequence

from kraftlab.workloads import versions
from kraftlab.workloads.kafka import Cluster, Connector


async def _ask(cluster: Cluster, connector: Connector, api_keys: Sequence[int], timeout: float) -> bool:
    for node in cluster.brokers:
        addr = cluster.nodes[node].broker
        assert addr is not None
        transport = connector(addr)
        try:
            ranges = await asyncio.wait_for(versions.server_ranges(transport), timeout)
        except Exception:  # down, refused, or no answer: ask the next broker
            continue
        finally:
            with contextlib.suppress(Exception):
                await transport.close()
        return versions.serves(ranges, api_keys)
    return False


def brokers_serve(cluster: Cluster, connector: Connector, api_keys: Sequence[int], timeout: float = 3.0) -> bool:
    """Whether the first broker that answers ApiVersions serves every one of `api_keys`."""
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, _ask(cluster, connector, api_keys, timeout)).result()
