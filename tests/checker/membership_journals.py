"""Hand-built journals of a dynamic quorum (KIP-853) for the Raft rules across voter sets: a healthy
run to mutate, and one journal per membership rule that breaks that rule alone."""

from __future__ import annotations

from collections.abc import Callable

from checker_journals import JB

DIRS = {n: f"dir-{n}" for n in (1, 2, 3, 4, 5, 6)}


def _voters(j: JB, node: int, offset: int, voters: list[int], reason: str,
            dirs: dict[int, str] | None = None) -> None:
    named = dirs or DIRS
    j.add(node, "voters", offset=offset, voters=voters, directory_ids=[named[v] for v in voters], kraft_version=1,
          reason=reason)


def _replicate(j: JB, leader: int, followers: list[int], base: int, epoch: int, crc: int,
               voters: list[int] | None = None, hw: bool = True) -> None:
    """`leader` appends one record at `base` (a VotersRecord when `voters`), every follower copies it
    (journalling the set in force), then the leader and the followers advance the HW past it."""
    for n in [leader, *followers]:
        j.add(n, "append", base=base, epoch=epoch, crcs=[crc], control=voters is not None, leader=n == leader)
        if voters is not None:
            _voters(j, n, base, voters, "append")
    if hw:
        for n in [leader, *followers]:
            j.add(n, "hw", hw=base + 1, epoch=epoch)


def _change(j: JB, leader: int, kind: str, voter: int, offset: int, voters: list[int],
            replicate: Callable[[], None]) -> None:
    """The leader's journal of one voter change around its replication (docs/contracts.md)."""
    j.add(leader, "voter_change", action="requested", kind=kind, voter=voter)
    j.add(leader, "voter_change", action="appended", kind=kind, voter=voter, offset=offset, voters=voters)
    replicate()
    j.add(leader, "voter_change", action="committed", kind=kind, voter=voter, offset=offset)


def healthy_dynamic(after_removal: Callable[[JB], None] | None = None) -> JB:
    """Voters 1-3 from the bootstrap checkpoint and node 4 formatted without one: node 1 leads epoch
    1, writes the set into the log, adds 4, removes itself and resigns once that commits; node 2
    leads epoch 2 with voters 2-4 and commits one record. `after_removal` adds lines right after
    node 1's removal committed, before it resigns."""
    j = JB()
    for n in (1, 2, 3, 4):
        j.add(n, "start", roles=["controller"], voters=[1, 2, 3] if n < 4 else [], log_start=0, log_end=0, hw=0,
              stored_epoch=None, stored_vote=None, directory_id=DIRS[n])
        _voters(j, n, -1, [1, 2, 3] if n < 4 else [], "start")
    j.add(1, "role", role="candidate", epoch=1, leader=None, voted_for=1)
    j.add(2, "vote", epoch=1, candidate=1, granted=True, pre_vote=False, reason="ok")
    j.add(1, "role", role="leader", epoch=1, leader=1, voted_for=1)
    for n in (2, 3):
        j.add(n, "role", role="follower", epoch=1, leader=1, voted_for=1 if n == 2 else None)
    j.add(4, "role", role="observer", epoch=1, leader=1, voted_for=None)
    _replicate(j, 1, [2, 3, 4], 0, 1, 11)  # LeaderChange
    _replicate(j, 1, [2, 3, 4], 1, 1, 12, voters=[1, 2, 3])  # the checkpoint's set, written into the log
    _change(j, 1, "add", 4, 2, [1, 2, 3, 4], lambda: _replicate(j, 1, [2, 3, 4], 2, 1, 13, voters=[1, 2, 3, 4]))
    j.add(4, "role", role="follower", epoch=1, leader=1, voted_for=None)
    # remove the leader itself
    _change(j, 1, "remove", 1, 3, [2, 3, 4], lambda: _replicate(j, 1, [2, 3, 4], 3, 1, 14, voters=[2, 3, 4]))
    if after_removal is not None:
        after_removal(j)
    j.add(1, "role", role="resigned", epoch=1, leader=1, voted_for=1)
    j.add(2, "role", role="candidate", epoch=2, leader=None, voted_for=2)
    j.add(3, "vote", epoch=2, candidate=2, granted=True, pre_vote=False, reason="ok")
    j.add(2, "role", role="leader", epoch=2, leader=2, voted_for=2)
    for n in (3, 4):
        j.add(n, "role", role="follower", epoch=2, leader=2, voted_for=2 if n == 3 else None)
    j.add(1, "role", role="observer", epoch=2, leader=2, voted_for=None)
    _replicate(j, 2, [3, 4, 1], 4, 2, 21)
    j.add(2, "quorum", epoch=2, fetch_age_ms={"3": 10, "4": 10}, check_quorum_ms=3000, replicas={})
    return j


def _plus(build: Callable[[JB], None]) -> Callable[[], JB]:
    def journal() -> JB:
        j = healthy_dynamic()
        build(j)
        return j
    return journal


def _elected_alone(j: JB) -> None:
    """Node 4 declares itself leader of epoch 3 with its own vote only, of voters 2-4."""
    j.add(4, "role", role="candidate", epoch=3, leader=None, voted_for=4)
    j.add(4, "role", role="leader", epoch=3, leader=4, voted_for=4)
    for n in (2, 3):  # alive after the election (their journals go on), and neither voted for 4
        j.add(n, "role", role="follower", epoch=3, leader=4, voted_for=None)


def _two_changes(j: JB) -> None:
    """Node 2 adds 1 back and, before that commits, removes it again."""
    for base, crc, voters in ((5, 22, [1, 2, 3, 4]), (6, 23, [2, 3, 4])):
        j.add(2, "append", base=base, epoch=2, crcs=[crc], control=True, leader=True)
        _voters(j, 2, base, voters, "append")


def _two_added_at_once(j: JB) -> None:
    """Node 2 adds 5 and 6 in one VotersRecord: {2,3,4} and {5,6,+one} are both majorities."""
    j.add(2, "append", base=5, epoch=2, crcs=[22], control=True, leader=True)
    _voters(j, 2, 5, [2, 3, 4, 5, 6], "append")


def _keeps_leading(j: JB) -> None:
    """Node 1's removal committed, yet it goes on leading: a `quorum` sample of epoch 1."""
    j.add(1, "quorum", epoch=1, fetch_age_ms={"2": 10, "3": 10, "4": 10}, check_quorum_ms=3000, replicas={})


def _replaced_disk_votes(j: JB) -> None:
    """Node 3 restarts on a new disk, then grants candidate 4 (whose set names 3's old disk) its vote."""
    j.add(3, "start", roles=["controller"], voters=[], log_start=0, log_end=0, hw=0, stored_epoch=None,
          stored_vote=None, directory_id="dir-3-new")
    _voters(j, 3, -1, [], "start")
    j.add(4, "role", role="candidate", epoch=3, leader=None, voted_for=4)
    j.add(3, "vote", epoch=3, candidate=4, granted=True, pre_vote=False, reason="ok")


def _restarts_without_its_set(j: JB) -> None:
    """Node 4 restarts and follows leader 2 before it journals the voter set it starts with."""
    j.add(4, "start", roles=["controller"], voters=[2, 3, 4], log_start=0, log_end=5, hw=5, stored_epoch=2,
          stored_vote=None, directory_id=DIRS[4])
    j.add(4, "role", role="follower", epoch=2, leader=2, voted_for=None)


def _commits_unasked(j: JB) -> None:
    """Leader 2 journals a committed addition of 1 it never journalled taking or appending."""
    j.add(2, "voter_change", action="committed", kind="add", voter=1, offset=4)


def _vote_without_reason(j: JB) -> None:
    j.add(3, "vote", epoch=2, candidate=1, granted=False, pre_vote=False)


MEMBERSHIP_BREAKERS: dict[str, Callable[[], JB]] = {
    "JournalFields": _plus(_vote_without_reason),
    "VotersAtStart": _plus(_restarts_without_its_set),
    "VoterChangeSequence": _plus(_commits_unasked),
    "ElectedByMajority": _plus(_elected_alone),
    "OneChangeAtATime": _plus(_two_changes),
    "MajoritiesIntersect": _plus(_two_added_at_once),
    "RemovedLeaderResigns": lambda: healthy_dynamic(_keeps_leading),
    "ReplacedDiskNeverVotes": _plus(_replaced_disk_votes),
}
