"""Kafka's size-prefixed framing: a big-endian int32 length, then that many bytes.

The maximum frame size is Kafka's ``socket.request.max.bytes`` (default 104857600). A negative or
larger prefix is rejected before any of the body is read, as Kafka's NetworkReceive does.
"""

from __future__ import annotations

import asyncio
import struct

from kraftlab.node.protocol.errors import FrameTooLarge, TruncatedFrame

DEFAULT_MAX_FRAME_BYTES = 104_857_600
SIZE_PREFIX = struct.Struct(">i")


def frame(payload: bytes) -> bytes:
    """Prefix ``payload`` with its size."""
    return SIZE_PREFIX.pack(len(payload)) + payload


def check_frame_size(size: int, max_bytes: int) -> None:
    """Raise ``FrameTooLarge`` if a size prefix is negative or above ``max_bytes``."""
    if size < 0:
        raise FrameTooLarge(f"negative frame size {size}")
    if size > max_bytes:
        raise FrameTooLarge(f"frame size {size} larger than the maximum {max_bytes}")


async def read_frame(reader: asyncio.StreamReader, max_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> bytes | None:
    """Read one frame's payload; ``None`` on a clean end of stream between frames.

    Raises ``FrameTooLarge`` on a bad prefix and ``TruncatedFrame`` if the stream ends inside a frame.
    """
    try:
        prefix = await reader.readexactly(SIZE_PREFIX.size)
    except asyncio.IncompleteReadError as exc:
        if not exc.partial:
            return None
        raise TruncatedFrame(f"stream ended after {len(exc.partial)} bytes of a size prefix") from None
    (size,) = SIZE_PREFIX.unpack(prefix)
    check_frame_size(size, max_bytes)
    try:
        return await reader.readexactly(size)
    except asyncio.IncompleteReadError as exc:
        raise TruncatedFrame(f"stream ended after {len(exc.partial)} of {size} frame bytes") from None
