"""A snapshot transfer's lifecycle judged by the Raft simulator (node.sim.snapshot_transfer): the real
core fetches and installs snapshots as KIP-630 says over many seeds, and followers that carry a
transfer across epochs, ask past the bytes they hold, fetch a snapshot they installed, or install
one without taking its high-water mark or loading it are caught."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from sim_cores import first_violation_of

from kraftlab.node.raft import messages as m
from kraftlab.node.raft.core import LoadSnapshot, RaftCore
from kraftlab.node.raft.ports import OffsetAndEpoch
from kraftlab.node.raft.states import EpochState, Follower, SnapshotFetch
from kraftlab.node.sim.cluster import SimParams, Simulation
from kraftlab.node.sim.invariants import InvariantViolation


def params(seed: int) -> SimParams:
    """Crashes and partitions with a follower left behind often (small snapshots, no retained log)."""
    return SimParams(
        seed=seed,
        voters=3 + 2 * (seed % 2),
        observers=1,
        faults=("crash", "partition"),
        flush_delay_ms=5 * (seed % 3),
        retention_bytes=0,
    )


def first_violation(core_class: type[RaftCore], seeds: range) -> InvariantViolation | None:
    return first_violation_of(core_class, map(params, seeds))


def test_the_real_core_fetches_and_installs_snapshots_in_order() -> None:
    simulations = [Simulation(params(seed)) for seed in range(6)]
    for simulation in simulations:
        simulation.run()
    transfers = [s.durability.transfers for s in simulations]
    assert sum(t.installs for t in transfers) > 0 and sum(t.requests for t in transfers) > 0


class KeepsItsTransferAcrossEpochs(RaftCore):
    """A follower that goes on with its snapshot transfer when it next follows (after any transition)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._carried: SnapshotFetch | None = None

    def _set_state(self, state: EpochState, now: int) -> None:
        old = self.state
        if isinstance(old, Follower) and old.snapshot is not None and old is not state:
            self._carried = old.snapshot
        elif isinstance(state, Follower) and self._carried is not None:
            state.snapshot, self._carried = self._carried, None
        super()._set_state(state, now)


class AsksPastItsBytes(RaftCore):
    """A follower that asks for each chunk after the first one byte further than it holds."""

    def _send(self, dst: int, message: m.Request, now: int) -> None:
        if isinstance(message, m.FetchSnapshotRequest) and message.position > 0:
            message = dataclasses.replace(message, position=message.position + 1)
        super()._send(dst, message, now)


class FetchesWhatItInstalled(RaftCore):
    """A follower that fetches the snapshot it has just installed once more."""

    def _install_snapshot(self, sid: OffsetAndEpoch, state: Follower, now: int) -> None:
        super()._install_snapshot(sid, state, now)
        if self.snapshots.latest() == sid and self.state is state:
            state.snapshot = SnapshotFetch(sid)


class InstallsWithoutItsHighWatermark(RaftCore):
    """A follower whose high-water mark stays where it was when it installs a snapshot."""

    def _install_snapshot(self, sid: OffsetAndEpoch, state: Follower, now: int) -> None:
        hw = self._hw
        super()._install_snapshot(sid, state, now)
        self._hw = hw


class InstallsWithoutLoadingIt(RaftCore):
    """A follower that installs a snapshot without handing it to its state machine."""

    def _install_snapshot(self, sid: OffsetAndEpoch, state: Follower, now: int) -> None:
        super()._install_snapshot(sid, state, now)
        self._out.updates = [u for u in self._out.updates if not isinstance(u, LoadSnapshot)]


@pytest.mark.parametrize(
    ("core", "rule", "said"),
    [
        (KeepsItsTransferAcrossEpochs, "SnapshotFetchOrderly", "transfer in progress"),
        (AsksPastItsBytes, "SnapshotFetchOrderly", "bytes of it"),
        (FetchesWhatItInstalled, "SnapshotFetchOrderly", "it holds snapshot"),
        (InstallsWithoutItsHighWatermark, "SnapshotInstalled", "high-water mark"),
        (InstallsWithoutLoadingIt, "SnapshotInstalled", "state machine"),
    ],
    ids=["across-epochs", "past-its-bytes", "fetches-installed", "install-without-hw", "install-without-load"],
)
def test_a_wrong_snapshot_transfer_is_caught(core: type[RaftCore], rule: str, said: str) -> None:
    found = first_violation(core, range(16))
    assert found is not None and found.name == rule and said in found.detail, found
