"""PeerLinks' addresses in a dynamic quorum (KIP-853): a voter's endpoint from the voter set in force,
and still once a set without it is in force — a leader that removed itself leads on until that set
commits, and its followers must go on fetching from it."""

from __future__ import annotations

import uuid
from pathlib import Path

from kraftlab.node.config import config_from_properties
from kraftlab.node.process.transport import PeerLinks
from kraftlab.node.raft.voters import Endpoint, Voter, VoterSet


def _voter(i: int) -> Voter:
    return Voter(i, uuid.UUID(int=i), (Endpoint("CONTROLLER", "127.0.0.1", 9000 + i),))


def test_a_removed_voter_stays_reachable(tmp_path: Path) -> None:
    config = config_from_properties({
        "process.roles": "controller",
        "node.id": "1",
        "controller.quorum.bootstrap.servers": "127.0.0.1:9001,127.0.0.1:9002",
        "listeners": "CONTROLLER://127.0.0.1:9001",
        "controller.listener.names": "CONTROLLER",
        "metadata.log.dir": str(tmp_path / "meta"),
    })
    current = [VoterSet([_voter(1), _voter(2), _voter(3)])]
    links = PeerLinks(config, "cluster", lambda envelope: None, voters_of=lambda: current[0])
    assert links.address(2) == ("127.0.0.1", 9002)
    assert links.address(-3) == ("127.0.0.1", 9002)  # the second bootstrap server
    assert links.address(4) is None  # never named by a set, never learned
    current[0] = VoterSet([_voter(1), _voter(3)])  # 2 (the leader) removed itself; not yet committed
    assert links.address(2) == ("127.0.0.1", 9002)
