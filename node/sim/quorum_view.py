"""DescribeQuorum judged against what the simulator saw: the leader's view of its replicas.

The simulator delivers every Fetch and FetchSnapshot itself, so it knows, for each leadership (a
node and the epoch it leads), when each replica last fetched, when it last fetched at the
leader's log end (caught up), and the furthest offset it fetched from that continues the
leader's log. `QuorumWitness` records that from the deliveries and, whenever a leader takes a
timer runs, compares the leader's `describe_quorum` answer with it (KIP-595's DescribeQuorum fields):

- the answer names this leader, its epoch and its high-water mark (-1 until one past the epoch's
  start offset commits: Kafka's leader holds none before), every voter and exactly the observers
  that fetched in this leadership;
- the leader's own entry is caught up now, at a log end no further than it holds durably;
- each other replica's `lastFetchTimestamp`, `lastCaughtUpTimestamp` and `logEndOffset` are those
  the deliveries show (-1: never in this leadership; a voter's last fetch may read as the time the
  leadership began, when the leader starts its check-quorum clock for every voter);
- a high-water mark this leader advanced is held by a majority of the voters as described.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from kraftlab.node.raft import messages as m
from kraftlab.node.raft.core import Output
from kraftlab.node.raft.states import majority
from kraftlab.node.sim.invariants import CheckedNode


@dataclass(slots=True)
class _Seen:
    """One replica as the deliveries show it, in one leadership."""

    last_fetch: int = -1
    last_caught_up: int = -1
    end_offset: int = 0


@dataclass(slots=True)
class _Leadership:
    began: int
    replicas: dict[int, _Seen] = field(default_factory=dict)


class QuorumWitness:
    def __init__(self, voters: list[int], fail: Callable[[str, str], None]) -> None:
        self.voters = sorted(voters)
        self.majority = majority(len(voters))
        self.fail = fail
        self.leaderships: dict[tuple[int, int], _Leadership] = {}
        self.judging = True
        """False: record deliveries but judge no answer (a run whose voter set changes within a
        leadership, where the fixed `voters` above do not hold; node.sim.membership judges those)."""

    def leadership(self, node: CheckedNode, now: int) -> _Leadership | None:
        core = node.core
        if core is None or not core.is_leader:
            return None
        return self.leaderships.setdefault((node.node_id, core.epoch), _Leadership(now))

    def before(self, node: CheckedNode, env: m.Envelope, now: int) -> tuple[int, int] | None:
        """Called before `node` handles `env`: (the leader's log end, its epoch) when `env` is a
        Fetch or FetchSnapshot of a real replica in the epoch `node` leads, else None."""
        core = node.core
        req = env.message
        if core is None or not isinstance(req, m.FetchRequest | m.FetchSnapshotRequest):
            return None
        if self.leadership(node, now) is None or req.epoch != core.epoch:
            return None
        return node.log.end_offset(), core.epoch

    def after(self, node: CheckedNode, env: m.Envelope, out: Output, leo_epoch: tuple[int, int], now: int) -> None:
        """Record what the leader's answer to a replica's Fetch or FetchSnapshot shows."""
        leo, epoch = leo_epoch
        lead = self.leaderships[(node.node_id, epoch)]
        req = env.message
        answer = next((e.message for e in out.messages if e.dst == env.src and e.ref == env.ref), None)
        if isinstance(req, m.FetchSnapshotRequest):
            if isinstance(answer, m.FetchSnapshotResponse) and answer.error == m.Errors.NONE:
                lead.replicas.setdefault(env.src, _Seen()).last_fetch = now
            return
        assert isinstance(req, m.FetchRequest)
        if req.fetch_offset < 0 or req.max_wait_ms < 0 or not 0 <= req.last_fetched_epoch <= req.epoch:
            return  # malformed: refused, it changes nothing
        seen = lead.replicas.setdefault(env.src, _Seen())
        seen.last_fetch = now
        # No answer yet: the leader parked it, which it does only for a fetch that continues its log.
        continues = answer is None or (
            isinstance(answer, m.FetchResponse)
            and answer.error == m.Errors.NONE
            and answer.diverging_epoch is None
            and answer.snapshot_id is None
        )
        if continues:
            seen.end_offset = max(seen.end_offset, req.fetch_offset)
            if req.fetch_offset >= leo:
                seen.last_caught_up = now

    def check(self, node: CheckedNode, now: int) -> None:
        lead = self.leadership(node, now)
        core = node.core
        if lead is None or core is None or not self.judging:
            return
        nid = node.node_id
        view = core.describe_quorum(now)
        where = f"leader {nid} (epoch {core.epoch})"
        # Kafka's leader holds no high-water mark (-1) until one past its epoch's start offset commits.
        began_at = getattr(core.state, "epoch_start_offset", 0)
        told = core.high_watermark if core.high_watermark > began_at else -1
        if (view.error, view.leader_id, view.epoch, view.high_watermark) != (m.Errors.NONE, nid, core.epoch, told):
            self.fail(
                "DescribeQuorumLeader",
                f"{where} describes error {view.error.name}, leader "
                f"{view.leader_id}, epoch {view.epoch}, high-water mark {view.high_watermark} "
                f"(Kafka's: {told}; its own {core.high_watermark}, its epoch began at {began_at})",
            )
        voters = [r.replica_id for r in view.voters]
        observers = [r.replica_id for r in view.observers]
        fetched = sorted(r for r in lead.replicas if r not in self.voters)
        if voters != self.voters or observers != fetched:
            self.fail(
                "DescribeQuorumReplicas",
                f"{where} describes voters {voters} and observers {observers}; "
                f"the voters are {self.voters} and the observers that fetched {fetched}",
            )
        ends: list[int] = []
        for r in (*view.voters, *view.observers):
            if r.replica_id == nid:
                durable = node.log.flushed_end_offset()
                ok = r.last_fetch_ms == r.last_caught_up_ms == now and r.log_end_offset <= durable
                expected = f"caught up at {now}, log end at most its durable end {durable}"
            else:
                seen = lead.replicas.get(r.replica_id, _Seen())
                fetch_ok = r.last_fetch_ms == seen.last_fetch or (
                    seen.last_fetch == -1 and r.replica_id in self.voters and r.last_fetch_ms == lead.began
                )
                ok = fetch_ok and (r.last_caught_up_ms, r.log_end_offset) == (seen.last_caught_up, seen.end_offset)
                expected = f"last fetch {seen.last_fetch}, caught up {seen.last_caught_up}, log end {seen.end_offset}"
            if not ok:
                self.fail(
                    "DescribeQuorumReplicaState",
                    f"{where} at t={now} describes replica {r.replica_id} with "
                    f"last fetch {r.last_fetch_ms}, caught up {r.last_caught_up_ms}, log end "
                    f"{r.log_end_offset}; the deliveries show {expected}",
                )
            if r.replica_id in self.voters:
                ends.append(r.log_end_offset)
        ends.sort(reverse=True)
        # A high-water mark learned before this leadership (at most the log end it began with) was
        # committed by an earlier leader's majority; one this leader advanced needs its own.
        if ends and core.high_watermark > max(ends[self.majority - 1], began_at):
            self.fail(
                "DescribeQuorumHighWatermark",
                f"{where} has high-water mark {core.high_watermark} but "
                f"describes voters' log ends {ends}: no majority holds it",
            )

    def forget(self, nodes: Mapping[int, CheckedNode]) -> None:
        """Leaderships that ended (keeps the memory small over long runs)."""
        live = {(n.node_id, n.core.epoch) for n in nodes.values() if n.core is not None and n.core.is_leader}
        for key in [k for k in self.leaderships if k not in live]:
            del self.leaderships[key]
