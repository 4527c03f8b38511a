"""quorum-state-no-fsync on disk: with the page-cache emulation, a crash (a new store reading the
file) forgets the last vote; the correct store never does."""

from __future__ import annotations

from pathlib import Path

from kraftlab.node.bugs import NO_BUGS, BugSet
from kraftlab.node.raft.ports import QuorumStateData
from kraftlab.node.storage.quorum_state import FileQuorumStateStore

VOTE_1 = QuorumStateData(3, None, 1, (1, 2, 3))
VOTE_2 = QuorumStateData(4, None, 2, (1, 2, 3))


def _crash_after_two_votes(tmp_path: Path, bugs: BugSet) -> QuorumStateData | None:
    store = FileQuorumStateStore(tmp_path / "quorum-state", bugs, lose_unflushed=True)
    store.write(VOTE_1)
    store.write(VOTE_2)
    assert store.read() == VOTE_2  # the running process sees its vote either way
    return FileQuorumStateStore(tmp_path / "quorum-state").read()  # the next process after a SIGKILL


def test_unsynced_quorum_state_forgets_the_last_vote(tmp_path: Path) -> None:
    assert _crash_after_two_votes(tmp_path, BugSet.of("quorum-state-no-fsync")) == VOTE_1


def test_correct_quorum_state_survives_the_crash(tmp_path: Path) -> None:
    assert _crash_after_two_votes(tmp_path, NO_BUGS) == VOTE_2
