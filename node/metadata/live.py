"""The committed metadata image of a live quorum, read over the Kafka protocol (the live mode of
`kraft-node shell`). The I/O edge of the metadata shell; the image itself is built by
`CommittedReplay`, as on a broker.

`fetch_image(controllers)` talks to the controllers' listener as a plain consumer (replica id -1:
never counted as a voter's progress nor listed as an observer, never parked):

1. it finds the leader among the given controllers (a follower answers NOT_LEADER_OR_FOLLOWER, a
   stale epoch FENCED_LEADER_EPOCH with the current one);
2. when the leader's log no longer starts at the fetch offset, it answers with its latest
   snapshot id: the snapshot is read with FetchSnapshot, chunk by chunk, and loaded;
3. it Fetches the log from there and replays every batch wholly below the high-water mark, until
   it reaches the high-water mark seen in the first answer (what was committed when it asked).

The result is `(image, offset)`: the committed image at exclusive end offset `offset`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field

from kraftlab.node.metadata.image import MetadataImage
from kraftlab.node.metadata.replay import CommittedReplay
from kraftlab.node.protocol.client import ProtocolClient
from kraftlab.node.protocol.errors import RequestError
from kraftlab.node.raft import messages as m
from kraftlab.node.raft import wire
from kraftlab.node.raft.ports import OffsetAndEpoch
from kraftlab.node.storage.snapshots import decode_snapshot

CONSUMER_ID = -1
SNAPSHOT_CHUNK_BYTES = 1 << 20
RETRY_S = 0.2


class LiveFetchError(Exception):
    """The image could not be read from the quorum; the message says why."""


@dataclass
class _Cursor:
    """Where the reader stands: the leader's epoch and which address answered as leader."""

    epoch: int = 0
    leader: int | None = None  # index into the addresses
    tried: list[str] = field(default_factory=list)


async def fetch_image(
    controllers: Sequence[tuple[str, int]], timeout_s: float = 30.0
) -> tuple[MetadataImage, int]:
    """The committed metadata image of the quorum and its end offset (see the module docstring)."""
    if not controllers:
        raise LiveFetchError("no controller address given")
    connect_s = min(timeout_s, 5.0)
    clients = [ProtocolClient(h, p, request_timeout=timeout_s, connect_timeout=connect_s) for h, p in controllers]
    try:
        async with asyncio.timeout(timeout_s):
            return await _read(clients, controllers)
    except TimeoutError:
        raise LiveFetchError(f"no complete image from {_names(controllers)} within {timeout_s:g} s") from None
    finally:
        for client in clients:
            await client.close()


def _names(controllers: Sequence[tuple[str, int]]) -> str:
    return ", ".join(f"{h}:{p}" for h, p in controllers)


async def _ask(client: ProtocolClient, message: m.Request) -> m.Response | None:
    try:
        response = await client.send(wire.request_to_wire(message))
    except (RequestError, OSError):
        return None
    return wire.response_from_wire(response)


async def _read(clients: list[ProtocolClient], controllers: Sequence[tuple[str, int]]) -> tuple[MetadataImage, int]:
    replay = CommittedReplay(journal_applies=False)
    cursor = _Cursor()
    target: int | None = None  # the high-water mark when the reading started
    turn = 0
    while True:
        index = cursor.leader if cursor.leader is not None else turn % len(clients)
        turn += 1
        request = m.FetchRequest(cursor.epoch, CONSUMER_ID, replay.next_offset, replay.last_epoch)
        response = await _ask(clients[index], request)
        if not isinstance(response, m.FetchResponse):
            cursor.leader = None
            await asyncio.sleep(RETRY_S if turn % len(clients) == 0 else 0)
            continue
        if response.error in (m.Errors.FENCED_LEADER_EPOCH, m.Errors.UNKNOWN_LEADER_EPOCH):
            cursor.epoch = response.epoch  # ask the same node again at its epoch
            cursor.leader = index
            continue
        if response.error != m.Errors.NONE:
            cursor.epoch = max(cursor.epoch, response.epoch)
            cursor.leader = None
            if turn % len(clients) == 0:
                await asyncio.sleep(RETRY_S)
            continue
        cursor.leader = index
        if target is None:
            target = response.high_watermark
        if response.snapshot_id is not None:
            await _load_snapshot(clients[index], cursor.epoch, response.snapshot_id, replay)
            continue
        if response.diverging_epoch is not None:  # committed data never diverges
            raise LiveFetchError(f"the leader's log diverges from its committed data at {response.diverging_epoch}")
        for batch in response.batches:
            if batch.next_offset > response.high_watermark:
                break
            replay.apply_batch(batch)
        if replay.next_offset >= target:
            return replay.image, replay.next_offset
        if not response.batches:
            await asyncio.sleep(RETRY_S)


async def _load_snapshot(
    client: ProtocolClient, epoch: int, snapshot_id: OffsetAndEpoch, replay: CommittedReplay
) -> None:
    data = bytearray()
    while True:
        request = m.FetchSnapshotRequest(epoch, CONSUMER_ID, snapshot_id, len(data), SNAPSHOT_CHUNK_BYTES)
        response = await _ask(client, request)
        if not isinstance(response, m.FetchSnapshotResponse) or response.error != m.Errors.NONE:
            error = response.error.name if response is not None else "no answer"
            raise LiveFetchError(f"snapshot {snapshot_id.offset}-{snapshot_id.epoch} could not be read: {error}")
        if response.position != len(data):
            raise LiveFetchError(f"snapshot chunk at {response.position}, expected {len(data)}")
        data += response.data
        if len(data) >= response.size or not response.data:
            break
    replay.load_snapshot(snapshot_id, decode_snapshot(bytes(data), f"snapshot {snapshot_id}"))
