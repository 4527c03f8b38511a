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
    def power_off(self, node: str) -> dict[str, Any] | None:
        """SIGKILL the node and drop what its disk never made durable, then wait until the process
        is gone; what was dropped, or None when its data is not on the filesystem (a plain kill).

        The disk crashes as soon as the signal is sent, not once the process is gone: a process
        killed inside an fsync that a slow disk holds only exits when that fsync answers, and an
        fsync cut by the power never returns success (the filesystem answers it EIO)."""
        ...


def crash(control: NodeControl, node: str) -> dict[str, Any] | None:
    """SIGKILL the node, losing its un-fsynced writes where its disk can; what was lost."""
    if isinstance(control, PowerLoss):
        lost = control.power_off(node)
        if lost is not None:
            return {k: v for k, v in lost.items() if k != "ok"}
        return None
    control.kill(node)
    return None
