"""The Raft rules across voter sets (KIP-853), judged on real runs from the journals alone: each
node's voter sets are rebuilt from its `voters` events (checker.raft.voters), and each rule reads
the same `Replay` as the others (checker.raft.rules) and changes nothing.

- ElectedByMajority: a leader won its epoch with the votes of a majority of the voter set it held
  as a candidate (or as it became leader): its own vote and the granted `vote` lines of that epoch
  naming it; a voter whose journal is missing or ends before the election counts as unknown (it
  may have voted). Judged where the leader journalled its candidacy.
- OneChangeAtATime: a leader appends a voter set that differs from the one before only once that
  one committed (its high-water mark is past the previous VotersRecord).
- MajoritiesIntersect: every majority of a voter set a leader appends meets every majority of the
  set it replaces (KIP-853 adds or removes one voter at a time for this). Judged on the leader's
  appends: a follower may copy several sets in one batch and journals only the last.
- RemovedLeaderResigns: once a leader's high-water mark passed the VotersRecord of a set that does
  not name it (id and directory), it leads no more: no append as leader, no high-water mark
  advance and no `quorum` sample before its next role change.
- ReplacedDiskNeverVotes: a node whose voter set does not name it with the directory it runs on
  (`start`'s `directory_id`; a replaced disk is a new directory) never campaigns, and never grants
  a candidate whose set names it with another directory the vote of the directory it ran on before.

Static quorums journal no `voters` events: there the first four rules have nothing to judge but
ElectedByMajority, which counts the static set.
"""

from __future__ import annotations

from collections.abc import Iterator

from kraftlab.checker.invariant import Violation
from kraftlab.checker.journal import Entry
from kraftlab.checker.raft import voters as vs
from kraftlab.checker.raft.replay import Moment, Replay
from kraftlab.checker.rules import NamedRule

CAMPAIGNING = ("prospective", "candidate")


def _ended_before(replay: Replay, node: int, e: Entry) -> bool:
    """Whether `node`'s journal is missing or ends before `e` (by the shared clock when there is
    one, else by the wall clocks): what it did after is unknown."""
    st = replay.nodes.get(node)
    if st is None:
        return True
    if replay.shared_clock and st.last_rmono is not None and e.rmono is not None:
        return st.last_rmono <= e.rmono
    return st.last_ts <= e.ts


def _candidacies(replay: Replay) -> dict[tuple[int, int], tuple[Entry, Moment]]:
    """(node, epoch) → its last `candidate` line of that epoch, with its state just before."""
    return {(e.node, int(e["epoch"])): (e, m) for e, m in replay.events("role") if e.get("role") == "candidate"}


class ElectedByMajority(NamedRule):
    def check(self, replay: Replay) -> Iterator[Violation]:
        candidacies = _candidacies(replay)
        granted: dict[tuple[int, int], set[int]] = {}
        for e, _ in replay.events("vote"):
            if e.get("granted") and not e.get("pre_vote"):
                granted.setdefault((int(e["epoch"]), int(e["candidate"])), set()).add(e.node)
        for e, m in replay.events("role"):
            if e.get("role") != "leader":
                continue
            epoch = int(e["epoch"])
            candidacy = candidacies.get((e.node, epoch))
            if candidacy is None or candidacy[1].life != m.life:
                continue  # no candidacy journalled in this process life: nothing to count
            votes = granted.get((epoch, e.node), set()) | {e.node}
            best: tuple[list[int], list[int], int] | None = None
            for voter_set in (replay.set_in_force(candidacy[1]), replay.set_in_force(m)):
                voters = vs.ids(voter_set)
                won = [v for v in voters if v in votes]
                unknown = [v for v in voters if v not in votes and _ended_before(replay, v, e)]
                if len(won) + len(unknown) >= vs.majority(voter_set):
                    best = None
                    break
                best = best or (won, voters, vs.majority(voter_set))
            if best is not None:
                won, voters, need = best
                yield Violation(self.name, (
                    f"node {e.node} became leader of epoch {epoch} with the votes of {won} only, of voters {voters} "
                    f"(the set it held as a candidate): a majority is {need}, so another majority may elect "
                    "another leader (KIP-595; KIP-853 counts the voter set in force)"), [candidacy[0], e])


class OneChangeAtATime(NamedRule):
    def check(self, replay: Replay) -> Iterator[Violation]:
        for e, m in replay.events("voters"):
            offset = int(e["offset"])
            if e.get("reason") != "append" or m.role != "leader":
                continue
            before = [x for x in m.voters if x[0] < offset]
            if not before:
                continue
            previous_offset, previous = before[-1]
            if previous != vs.voter_set(e.fields) and previous_offset >= 0 and previous_offset >= m.hw:
                yield Violation(self.name, (
                    f"leader {e.node} appended the voter set {vs.ids(vs.voter_set(e.fields))} at offset {offset} while "
                    f"the set before it (offset {previous_offset}, voters {vs.ids(previous)}) was not committed (its "
                    f"high-water mark was {m.hw}): KIP-853 allows one voter change at a time"),
                    [x for x in (m.hw_entry, e) if x is not None])


class MajoritiesIntersect(NamedRule):
    def check(self, replay: Replay) -> Iterator[Violation]:
        seen: set[tuple[vs.VoterSet, vs.VoterSet]] = set()
        for e, m in replay.events("voters"):
            offset = int(e["offset"])
            before = [x for x in m.voters if x[0] < offset]
            if e.get("reason") != "append" or m.role != "leader" or not before:
                continue  # (a follower may append several sets in one batch and journals the last)
            previous, new = before[-1][1], vs.voter_set(e.fields)
            if (previous, new) in seen or vs.majorities_intersect(previous, new):
                continue
            seen.add((previous, new))
            yield Violation(self.name, (
                f"node {e.node} appended the voter set {vs.ids(new)} at offset {offset} after {vs.ids(previous)}: a "
                "majority of one need not meet a majority of the other, so each can elect its own leader or commit "
                "its own entries"), [e])


class RemovedLeaderResigns(NamedRule):
    def check(self, replay: Replay) -> Iterator[Violation]:
        states = {id(e): m for kind in ("hw", "quorum", "append") for e, m in replay.events(kind)}
        for entries in replay.journals.by_node.values():
            removed: Entry | None = None  # the `hw` line that committed the set without this leader
            for e in entries:
                if e.ev in ("role", "start"):
                    removed = None
                    continue
                m = states.get(id(e))
                if m is None or m.role != "leader":
                    continue
                if removed is not None and (e.ev in ("hw", "quorum") or (e.ev == "append" and e.get("leader"))):
                    yield Violation(self.name, (
                        f"leader {e.node} (epoch {m.epoch}) went on leading ({e.ev}) after its high-water mark passed "
                        "the voter set that removed it: KIP-853's removed leader resigns once its removal commits"),
                        [removed, e])
                    removed = None
                elif e.ev == "hw" and m.voters:
                    committed = [s for at, s in m.voters if at < int(e["hw"])]
                    if committed and not vs.holds(committed[-1], e.node, m.directory):
                        removed = e


class ReplacedDiskNeverVotes(NamedRule):
    def check(self, replay: Replay) -> Iterator[Violation]:
        for e, m in replay.events("role"):
            if e.get("role") in CAMPAIGNING and m.voters and m.directory is not None:
                in_force = replay.set_in_force(m)
                if not vs.holds(in_force, e.node, m.directory):
                    named = vs.named_directory(in_force, e.node)
                    what = "is not in it" if named is None else f"runs on directory {m.directory}, not {named}"
                    yield Violation(self.name, (
                        f"node {e.node} became {e['role']} in epoch {e['epoch']} though its voter set "
                        f"{vs.ids(in_force)} does not name it with its disk (it {what}): only voters campaign"), [e])
        candidacies = _candidacies(replay)
        for e, m in replay.events("vote"):
            if not e.get("granted") or e.get("pre_vote") or m.directory is None:
                continue
            candidacy = candidacies.get((int(e["candidate"]), int(e["epoch"])))
            if candidacy is None or not candidacy[1].voters:
                continue
            named = vs.named_directory(replay.set_in_force(candidacy[1]), e.node)
            if named is not None and named != m.directory:
                yield Violation(self.name, (
                    f"node {e.node}, running on directory {m.directory}, granted candidate {e['candidate']} its vote "
                    f"in epoch {e['epoch']}, but the candidate's voter set names node {e.node} with directory {named}: "
                    "a replaced disk voted with the old disk's vote"), [candidacy[0], e])
