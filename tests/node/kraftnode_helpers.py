"""Helpers for the node process tests: free loopback ports, server.properties for loopback clusters."""

from __future__ import annotations

import socket
from pathlib import Path


def free_ports(n: int) -> list[int]:
    """n distinct free loopback TCP ports (bound together, then released)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def node_properties(node_id: int, base: Path, voters: dict[int, int], **extra: str) -> dict[str, str]:
    """server.properties of a controller on loopback; `voters` maps id → controller port."""
    port = voters[node_id]
    props = {
        "process.roles": "controller",
        "node.id": str(node_id),
        "controller.quorum.voters": ",".join(f"{i}@127.0.0.1:{p}" for i, p in sorted(voters.items())),
        "listeners": f"CONTROLLER://127.0.0.1:{port}",
        "controller.listener.names": "CONTROLLER",
        "metadata.log.dir": str(base / f"n{node_id}" / "meta"),
        "log.dirs": str(base / f"n{node_id}" / "data"),
        "kraftlab.metrics.port": "0",
    }
    props.update(extra)
    return props
