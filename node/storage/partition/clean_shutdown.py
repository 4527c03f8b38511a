"""The clean-shutdown marker of a broker's log directories (KIP-966's proof of a clean stop).

Kafka does not fsync partition data on acknowledgement, so a broker that stopped without closing
its logs (a crash, a power loss, a fail-stop) may have lost records it had acknowledged, and one
whose log directory was lost and formatted anew holds nothing at all. Only a broker that flushed
and closed every log may claim it still holds what it held: it writes `.kafka_cleanshutdown`
(`{"version":0,"broker_epoch":N}`, N its broker epoch) into every log directory as the last step
of a clean stop. The next start takes the markers (reads them, then deletes them durably, so a
crash of that life is never mistaken for a clean stop) and registers with the epoch they agree on
as BrokerRegistration's PreviousBrokerEpoch, or -1 when any directory lacks one; the controller
treats a registration whose PreviousBrokerEpoch is not the broker's current epoch as an unclean
shutdown (node.controller.cluster).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path

from kraftlab.node.storage.atomic import fsync_dir, write_atomically

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
VERSION = 0
NO_EPOCH = -1


def write_markers(log_dirs: Iterable[Path], broker_epoch: int) -> None:
    """Mark every log directory as cleanly shut down at `broker_epoch` (durably)."""
    data = json.dumps({"version": VERSION, "broker_epoch": broker_epoch}).encode()
    for d in log_dirs:
        write_atomically(Path(d) / CLEAN_SHUTDOWN_FILE, data)


def _read(path: Path) -> int:
    try:
        value = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return NO_EPOCH  # absent or damaged: no proof of a clean stop
    epoch = value.get("broker_epoch") if isinstance(value, dict) and value.get("version") == VERSION else None
    return epoch if isinstance(epoch, int) and not isinstance(epoch, bool) and epoch >= 0 else NO_EPOCH


def take_previous_broker_epoch(log_dirs: Iterable[Path]) -> int:
    """The broker epoch every log directory's marker names (-1 if one lacks it or they disagree),
    the markers deleted durably. Raises OSError if a marker cannot be deleted: a process that went on
    would leave a proof of a clean stop behind for a crash of its own."""
    dirs = [Path(d) for d in log_dirs]
    epochs = {_read(d / CLEAN_SHUTDOWN_FILE) for d in dirs}
    for d in dirs:
        marker = d / CLEAN_SHUTDOWN_FILE
        if marker.exists():
            os.unlink(marker)
            fsync_dir(d)
    return epochs.pop() if len(epochs) == 1 else NO_EPOCH
