"""The Raft rules, one class per invariant (the package docstring of checker.raft states each),
every one reading the same `Replay` and none changing it: editing one rule cannot mask another."""

from __future__ import annotations

from collections.abc import Iterator

from kraftlab.checker.invariant import Violation
from kraftlab.checker.journal import Entry
from kraftlab.checker.raft import voters as vs
from kraftlab.checker.raft.matching import Runs, breaches, runs_of
from kraftlab.checker.raft.replay import LeaderHw, Moment, NodeLog, Replay
from kraftlab.checker.rules import NamedRule

STALE_LEADER_SLACK_MS = 1000.0


def _present(*entries: Entry | None) -> list[Entry]:
    return [e for e in entries if e is not None]


class SingleLeader(NamedRule):
    def check(self, replay: Replay) -> Iterator[Violation]:
        by_epoch: dict[int, list[Entry]] = {}
        for el in replay.elections:
            by_epoch.setdefault(int(el.entry["epoch"]), []).append(el.entry)
        for ep, es in sorted(by_epoch.items()):
            nodes = sorted({x.node for x in es})
            if len(nodes) > 1:
                yield Violation(self.name, f"nodes {nodes} were all leader in epoch {ep}", es)


class MonotonicEpoch(NamedRule):
    def check(self, replay: Replay) -> Iterator[Violation]:
        for e, m in replay.events("role"):
            ep, nid = int(e["epoch"]), e.node
            if ep < m.epoch and m.epoch_entry is not None:
                yield Violation(self.name, f"node {nid} went from epoch {m.epoch} back to {ep}",
                                [m.epoch_entry, e], before=f"node {nid} {m.role} in epoch {m.epoch}",
                                after=f"node {nid} {e['role']} in epoch {ep}")


class DurableVote(NamedRule):
    """What a restarted node read from its quorum-state (`start`'s `stored_epoch` and `stored_vote`)
    still holds the last vote it granted before (unless it had moved to a later epoch, or it starts
    on another disk: a new `directory_id` is a new voter to KIP-853, whose old vote cannot be used)."""

    def check(self, replay: Replay) -> Iterator[Violation]:
        for entries in replay.journals.by_node.values():
            last: Entry | None = None  # the last granted (non-pre-) vote of the current process life
            damaged = False
            directory: str | None = None  # the directory id of the current process life
            for e in entries:
                if e.ev == "start":
                    new_disk = None not in (directory, e.get("directory_id")) and directory != e.get("directory_id")
                    if last is not None and not damaged and not new_disk and "stored_epoch" in e.fields:
                        yield from self._judge(last, e)
                    last, damaged, directory = None, False, e.get("directory_id")
                elif e.ev == "vote" and e.get("granted") and not e.get("pre_vote"):
                    last = e
                elif e.ev == "corruption" and "quorum-state" in str(e.get("path", "")):
                    damaged = True

    def _judge(self, vote: Entry, start: Entry) -> Iterator[Violation]:
        epoch, candidate = int(vote["epoch"]), vote["candidate"]
        stored_epoch, stored_vote = start.get("stored_epoch"), start.get("stored_vote")
        if stored_epoch is not None and (int(stored_epoch) > epoch
                                         or (int(stored_epoch) == epoch and stored_vote == candidate)):
            return
        held = "no quorum-state" if stored_epoch is None else f"epoch {stored_epoch}, voted for {stored_vote}"
        yield Violation(self.name, (
            f"node {vote.node} granted its vote in epoch {epoch} to {candidate}, but after its restart its "
            f"quorum-state held {held}: it may vote again in that epoch, and two leaders can be elected "
            "(KIP-595: the vote is persisted before it is answered)"), [vote, start])


class SingleVote(NamedRule):
    """A node votes for at most one candidate in an epoch (Raft §5.2; KIP-595's votedId): the votes
    it grants (`vote`, not pre-votes) and the vote its transitions carry (`role`'s `voted_for`: a
    candidate votes for itself) name one node per epoch, across restarts too (the vote is durable)
    — unless its quorum-state was lost (a start without one: new or wiped storage) or found damaged."""

    def check(self, replay: Replay) -> Iterator[Violation]:
        for entries in replay.journals.by_node.values():
            votes: dict[int, tuple[int, Entry]] = {}  # epoch -> (candidate, the entry that named it)
            for e in entries:
                if (e.ev == "start" and e.get("stored_epoch") is None) or (
                        e.ev == "corruption" and "quorum-state" in str(e.get("path", ""))):
                    votes.clear()
                elif (vote := _vote_of(e)) is not None:
                    epoch, candidate = vote
                    before, first = votes.setdefault(epoch, (candidate, e))
                    if before != candidate:
                        yield Violation(self.name, (
                            f"node {e.node} voted for {before} and then for {candidate} in epoch {epoch}: a voter "
                            "grants one vote per epoch, or two candidates can each win a majority (KIP-595: "
                            "votedId)"), [first, e], before=f"node {e.node} voted for {before} in epoch {epoch}",
                            after=f"node {e.node} voted for {candidate} in epoch {epoch}")
                        votes[epoch] = (candidate, e)  # each change of vote reported once


def _vote_of(e: Entry) -> tuple[int, int] | None:
    """(epoch, candidate) a journal entry says this node voted for, or None."""
    if e.ev == "vote" and e.get("granted") and not e.get("pre_vote"):
        return int(e["epoch"]), int(e["candidate"])
    if e.ev == "role" and e.get("voted_for") is not None:
        return int(e["epoch"]), int(e["voted_for"])
    return None


class CheckpointedHighWatermark(NamedRule):
    """The high-water mark a node reads back from its checkpoint when it recovers its log
    (`recovery`'s `hw_checkpoint`) is one it had journalled (`hw`, or a snapshot's end at `start`)
    in an earlier process life: a checkpoint beyond any HW the node knew claims uncommitted entries
    are committed (recovery then refuses to cut a damaged uncommitted tail)."""

    def check(self, replay: Replay) -> Iterator[Violation]:
        for entries in replay.journals.by_node.values():
            known, known_entry = 0, None
            for e in entries:
                if e.ev == "hw" or (e.ev == "start" and e.get("hw")):
                    if int(e["hw"]) > known:
                        known, known_entry = int(e["hw"]), e
                elif e.ev == "recovery" and int(e.get("hw_checkpoint") or 0) > known:
                    yield Violation(self.name, (
                        f"node {e.node} recovered a high-water mark checkpoint of {e['hw_checkpoint']}, beyond "
                        f"the highest high-water mark it had ever known ({known}): its checkpoint claims "
                        "uncommitted entries are committed"), _present(known_entry, e))


class MonotonicHighWatermark(NamedRule):
    def check(self, replay: Replay) -> Iterator[Violation]:
        for e, m in replay.events("hw"):
            if int(e["hw"]) < m.hw and m.hw_entry is not None and m.hw_entry.ev == "hw":
                yield Violation(self.name, f"node {e.node} high-water mark went from {m.hw} back to {e['hw']}",
                                [m.hw_entry, e])


def _held(st: NodeLog, claim: LeaderHw, before: int | None, before_rmono: int | None) -> bool:
    """Whether a node held the entry at `hw - 1` durably (flushed, or under a snapshot) at some point
    of its journal, or — for the leader judging its own HW (`before`: that `hw` line's position) —
    before that line: the leader journals the flush that counts its own log before the `hw` it allows;
    with a shared clock (`before_rmono`: that line's), any voter only before that instant."""
    first = st.ever.get(claim.hw - 1, {}).get((claim.epoch, claim.crc))
    if first is not None and before_rmono is not None and first[1] is not None:
        return first[1] < before_rmono
    return (first is not None and (before is None or first[0] < before)) or st.snap_max >= claim.hw


def _maybe_cut(st: NodeLog | None, e: Entry, hw: int, shared_clock: bool) -> bool:
    """Whether a voter's journal may end before a leader's `hw` line `e` (copied from a live node):
    it never shows a high-water mark of `hw` or more (which only comes after the leader's) and its
    last line is not later than `e` by the wall clocks (skewed clocks make this lenient, not wrong,
    once the clock faults are healed at the end of a run) — or by the shared clock when there is one."""
    if st is None:
        return True
    if shared_clock and st.last_rmono is not None and e.rmono is not None:
        return st.top_hw < hw and st.last_rmono <= e.rmono
    return st.top_hw < hw and st.last_ts <= e.ts


class MajorityReachedHighWatermark(NamedRule):
    def check(self, replay: Replay) -> Iterator[Violation]:
        yield from self._followers(replay)
        yield from self._leaders(replay)

    def _followers(self, replay: Replay) -> Iterator[Violation]:
        """A follower's HW never goes beyond its own durable end (reported once per process life)."""
        reported: set[tuple[int, int]] = set()  # (node, process life): every later HW of that life repeats it
        for e, m in replay.events("hw"):
            if (m.role != "leader" and int(e["hw"]) > max(m.durable, m.snap_max)
                    and (e.node, m.life) not in reported):
                reported.add((e.node, m.life))
                yield Violation(self.name, (
                    f"node {e.node} ({m.role}) took high-water mark {e['hw']} while its durable (flushed) log "
                    f"ended at {m.durable}: the Fetch that acknowledged those offsets came before their "
                    "flush"), _present(m.flush_entry, e))

    def _leaders(self, replay: Replay) -> Iterator[Violation]:
        """Judged against every voter set the leader may have counted (checker.raft.voters.counted_at:
        from the set in force at HW-1 to the one at its log end); a majority of any one suffices."""
        for claim in replay.leader_hws:
            e, hw = claim.entry, claim.hw
            at = e.rmono if replay.shared_clock else None
            short: list[tuple[list[int], list[int], int]] = []
            for voter_set in replay.sets_counted(claim.voters, hw - 1):
                voters = vs.ids(voter_set)
                holders = [v for v in voters if v in replay.nodes
                           and _held(replay.nodes[v], claim, claim.pos if v == e.node else None, at)]
                unknown = [v for v in voters
                           if v not in holders and _maybe_cut(replay.nodes.get(v), e, hw, replay.shared_clock)]
                if len(holders) + len(unknown) >= vs.majority(voter_set):
                    break
                short.append((holders, voters, vs.majority(voter_set)))
            else:
                holders, voters, majority = short[-1]
                earlier = [s[1] for s in short[:-1]]
                sets = f" (nor a majority of any earlier set it held: {earlier})" if earlier else ""
                yield Violation(self.name, (
                    f"leader {e.node} advanced the high-water mark to {hw} but only {holders} of voters {voters} "
                    f"{'had flushed' if at is not None else 'ever held'} offset {hw - 1} (epoch {claim.epoch})"
                    f"{' by then' if at is not None else ''}; a majority is {majority}{sets}"), [e])


class CommittedPrefixAgreement(NamedRule):
    def check(self, replay: Replay) -> Iterator[Violation]:
        yield from self._truncations(replay)
        committed = replay.committed
        for c in replay.claims:
            first = committed[c.offset]
            if c.crc != first.crc:
                yield Violation(self.name, f"offset {c.offset} committed with CRC {first.crc} on node "
                                           f"{first.entry.node} but with CRC {c.crc} on node {c.entry.node}",
                                [first.append, first.entry, c.append, c.entry])
        for o, first in sorted(committed.items()):
            for nid, st in replay.nodes.items():
                have = st.log.get(o)
                # only below the node's own high-water mark: a node cut off when the journals end (a killed
                # run, collected before any heal) may still hold a divergent tail it has not learned about
                if have is not None and have[1] != first.crc and o < st.end.hw:
                    yield Violation(self.name, f"node {nid} ends with CRC {have[1]} at committed offset {o} "
                                               f"(committed: {first.crc})", [first.append, first.entry, have[2]])

    def _truncations(self, replay: Replay) -> Iterator[Violation]:
        """No node truncates below its own HW (except to a snapshot, or a corrupt tail on recovery)."""
        for e, m in replay.events("truncate"):
            if e.get("reason") not in ("snapshot", "corrupt-tail") and int(e["to"]) < m.hw:
                yield Violation(self.name, f"node {e.node} truncated its log to {e['to']}, below its "
                                           f"high-water mark {m.hw}", _present(m.hw_entry, e))


class LogMatching(NamedRule):
    """Raft's Log Matching property, on what the nodes stored: (1) one entry per (offset, epoch) —
    every append of an offset in an epoch, on any node at any time, carries the same CRC (a leader
    writes each offset once in its epoch, followers copy it); (2) a log's epochs never go down as its
    offsets rise; (3) two logs that hold the same epoch at an offset hold the same epochs (so, by
    (1), the same entries) at every offset below it that both hold. (2) and (3) are judged over each
    node's final log and each leader's log when it was elected: a follower left holding an epoch the
    leader's log skips at that offset, below an entry they share, is a divergence no truncation cut."""

    def check(self, replay: Replay) -> Iterator[Violation]:
        yield from self._one_entry_per_epoch(replay)
        views: dict[Runs, tuple[str, Entry | None]] = {}
        for nid, st in sorted(replay.nodes.items()):
            views.setdefault(runs_of({o: x[0] for o, x in st.log.items()}), (f"node {nid}'s final log", None))
        for el in replay.elections:
            views.setdefault(runs_of({o: x[0] for o, x in el.log.items()}),
                             (f"node {el.entry.node}'s log when it became leader of epoch {el.entry['epoch']}",
                              el.entry))
        logs = [(runs, name) for runs, (name, _) in views.items()]
        at = {name: entry for name, entry in views.values()}
        for b in breaches(logs):
            yield Violation(self.name, b.explanation, _present(*(at[n] for n in b.logs)), before=b.before,
                            after=b.after)

    def _one_entry_per_epoch(self, replay: Replay) -> Iterator[Violation]:
        first: dict[tuple[int, int], tuple[int, Entry]] = {}
        reported: set[tuple[int, int]] = set()
        for e, _ in replay.events("append"):
            base, ep = int(e["base"]), int(e["epoch"])
            for j, crc in enumerate(e["crcs"]):
                key = (base + j, ep)
                seen = first.setdefault(key, (int(crc), e))
                if seen[0] != int(crc) and key not in reported:
                    reported.add(key)
                    yield Violation(self.name, (
                        f"offset {key[0]} was written in epoch {ep} with CRC {seen[0]} on node {seen[1].node} and "
                        f"with CRC {crc} on node {e.node}: two entries at one offset in one epoch"), [seen[1], e])


class LeaderCompleteness(NamedRule):
    """A new leader holds every entry committed in an earlier epoch. An offset its restart recovered
    from disk (below the `start` line's log end) whose append the journal never recorded — the
    process was killed between writing the log and journalling it — is held with unknown content:
    not judged here (StoredLogMatching compares what the disks hold)."""

    def check(self, replay: Replay) -> Iterator[Violation]:
        committed = replay.committed
        for el in replay.elections:
            e = el.entry
            for o, c in committed.items():
                if c.hw_epoch < int(e["epoch"]) and o >= el.log_start:
                    have = el.log.get(o)
                    if have is None and o < el.log_end:
                        continue
                    if have is None or have[1] != c.crc:
                        what = "lacks" if have is None else f"has CRC {have[1]} at"
                        yield Violation(self.name, f"node {e.node} became leader of epoch {e['epoch']} but {what} "
                                                   f"offset {o}, committed in epoch {c.hw_epoch} with CRC {c.crc}",
                                        [c.entry, e])
                        break


class NoUncommittedApply(NamedRule):
    def check(self, replay: Replay) -> Iterator[Violation]:
        committed = replay.committed
        for e, m in replay.events("apply"):
            o = int(e["offset"])
            c = committed.get(o)
            if o >= m.hw:
                yield Violation(self.name, f"node {e.node} applied offset {o} while its high-water mark was "
                                           f"{m.hw}", [e])
            elif c is not None and e.get("crc") is not None and int(e["crc"]) != c.crc:
                yield Violation(self.name, f"node {e.node} applied CRC {e['crc']} at offset {o}; the "
                                           f"committed CRC is {c.crc}", [c.entry, e])


class StaleLeader(NamedRule):
    """A leader's `quorum` samples: the voters it heard a Fetch from within the check-quorum timeout
    plus slack, itself included; reported on the second stale sample in a row of an epoch."""

    def __init__(self, slack_ms: float = STALE_LEADER_SLACK_MS) -> None:
        self.slack_ms = slack_ms

    def check(self, replay: Replay) -> Iterator[Violation]:
        states = {id(e): m for e, m in replay.events("quorum")}
        for entries in replay.journals.by_node.values():
            stale: Entry | None = None  # the last `quorum` sample, if it showed no majority
            reported = -1  # the epoch whose StaleLeader is reported already
            for e in entries:
                if e.ev in ("start", "role"):
                    stale = None
                elif e.ev == "quorum":
                    ages = {int(v): float(a) for v, a in (e.get("fetch_age_ms") or {}).items()}
                    limit = float(e["check_quorum_ms"]) + self.slack_ms
                    heard, need, silent = self._heard(replay, states.get(id(e)), e.node, ages, limit)
                    prev, stale = (None, None) if heard >= need else (stale, e)
                    epoch = int(e["epoch"])
                    if prev is None or int(prev["epoch"]) != epoch or reported == epoch:
                        continue
                    reported = epoch
                    yield Violation(self.name, (
                        f"node {e.node} still led epoch {epoch} though it had heard no Fetch from voters {silent} "
                        f"for over {limit:g} ms (check-quorum {e['check_quorum_ms']} ms + slack "
                        f"{self.slack_ms:g} ms): {heard} voters heard, a majority is {need}"),
                        [prev, e])

    @staticmethod
    def _heard(replay: Replay, m: Moment | None, leader: int, ages: dict[int, float],
               limit: float) -> tuple[int, int, list[int]]:
        """(voters heard from within `limit`, the leader counted if it is one; a majority): of the
        voter set in force at the leader's log end where it journalled one (a voter the sample
        omits was not heard from, a non-voter it reports does not count), else of the sample's."""
        if m is None or not m.voters:
            silent = sorted(v for v, a in ages.items() if a > limit)
            return 1 + len(ages) - len(silent), (len(ages) + 1) // 2 + 1, silent
        voters = vs.ids(m.voters[-1][1])
        silent = [v for v in voters if v != leader and ages.get(v, float("inf")) > limit]
        return len(voters) - len(silent), len(voters) // 2 + 1, silent


class AnsweredBeforeCommit(NamedRule):
    """A successful `decision` while the controller's own HW is not past its records' last offset
    (reported once per process life: every later answer repeats it)."""

    def check(self, replay: Replay) -> Iterator[Violation]:
        reported: set[tuple[int, int]] = set()  # (node, process life)
        for e, m in replay.events("decision"):
            if ((e.node, m.life) not in reported and e.get("error", "NONE") == "NONE"
                    and e.get("offset") is not None and int(e["offset"]) >= m.hw):
                reported.add((e.node, m.life))
                yield Violation(self.name, (
                    f"node {e.node} answered {e.get('api', 'a request')} successfully with its records ending at "
                    f"offset {e['offset']} while its high-water mark was {m.hw}"), _present(m.hw_entry, e))


class NodeStoppedOnSafetyError(NamedRule):
    """A `fatal` line, unless that process life also journalled `corruption`."""

    def check(self, replay: Replay) -> Iterator[Violation]:
        damaged = {(e.node, m.life) for e, m in replay.events("corruption")}
        for e, m in replay.events("fatal"):
            if (e.node, m.life) not in damaged:
                yield self._stopped(e)

    def _stopped(self, e: Entry) -> Violation:
        return Violation(self.name, (
            f"node {e.node} {'stopped' if e.get('stopped') else 'is stuck'} on an internal error of its Raft core: "
            f"{e.get('error')} (epoch {e.get('epoch')}, applied up to {e.get('applied')}, high-water mark "
            f"{e.get('hw')}, log end {e.get('log_end')})"), [e])
