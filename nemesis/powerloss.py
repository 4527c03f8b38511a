"""A crash as a power loss: the kill of a node whose data is on the disk-fault filesystem also
drops every write its disk never made durable (Jepsen's LazyFS `lose-unfsynced-writes`).

`PowerLoss` is an optional capability of a `NodeControl`: a deployment on the filesystem has it,
others (and the in-memory fake) do not, and their kills stay plain SIGKILLs.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from kraftlab.nemesis.ports import NodeControl


@runtime_checkable
class PowerLoss(Protocol):
    def lose_unfsynced(self, node: str) -> dict[str, Any] | None:
        """Drop what the (killed) node's disk never made durable; what was dropped, or None when
        its data is not on the filesystem."""
        ...


def crash(control: NodeControl, node: str) -> dict[str, Any] | None:
    """SIGKILL the node, then lose its un-fsynced writes where its disk can; what was lost."""
    control.kill(node)
    if isinstance(control, PowerLoss):
        lost = control.lose_unfsynced(node)
        if lost is not None:
            return {k: v for k, v in lost.items() if k != "ok"}
    return None
