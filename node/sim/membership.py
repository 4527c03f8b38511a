"""The simulator with a dynamic quorum (KIP-853): voters added, removed and replaced while the
faults run, and the invariants that must hold across voter sets.

Every node is a controller of a dynamic quorum: the first `initial` start from the bootstrap
checkpoint (`kraft-node format --initial-controllers`), the others with none
(`--no-initial-controllers`) and learn the voter set by fetching; all find the leader through
the bootstrap list (every node's id). An administrator sends AddRaftVoter and RemoveRaftVoter to
the leader every `change_every_ms` (the leader among the removed), keeping between one and
`max_voters` voters, and replaces a node's disk now and then (same id, new directory id: the node
is no longer the voter its id names until it is removed and added back).

Checked after every step, beside the simulator's own invariants (one leader per epoch, the high-
water mark held durably by a majority of the leader's voter set, committed data the same
everywhere):

- LeaderCompleteness: a new leader's log holds every committed entry (same record CRCs);
- OneChangeAtATime: a leader appends a voter set only after the previous one committed;
- MajoritiesIntersect: every majority of a new voter set meets every majority of the one before;
- ReplacedDiskNeverVotes: a node whose directory id the voter set does not name never campaigns,
  nor grants a candidate the vote of the directory it ran on before (judged with the simulator's
  own record of each node's disk);
- RemovedLeaderResigns: a leader no longer in the voter set resigns as soon as that set commits;
- AddedVoterIsAReplica: a voter set a leader appends names each voter it adds by a replica key
  (id, directory id) some disk of the simulation runs or ran on — Kafka's leader adds only a key
  it saw fetch (the Fetch's ReplicaDirectoryId), never a directory no disk is;
- VoterChangeAnswered: a client's AddRaftVoter / RemoveRaftVoter / UpdateRaftVoter, drawn from the
  whole space KIP-853 allows, gets Kafka's answer for the state the node took it in, once
  (node.sim.voter_requests), naming the responder's leader and epoch in an UpdateRaftVoter's
  CurrentLeader, read from Kafka's wire (VoterChangeLeader, node.sim.answer_fields);
- DescribeQuorumNodes: a leader's DescribeQuorum lists the voter set in force, its voters' directory
  ids and (v2) a Node with each voter's listeners (node.sim.answer_fields).
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kraftlab.node.raft import messages as m
from kraftlab.node.raft.config import RaftConfig
from kraftlab.node.raft.core import Output, RaftCore
from kraftlab.node.raft.membership.records import KRAFT_VERSION_1, kraft_version_record, voters_record
from kraftlab.node.raft.ports import OffsetAndEpoch
from kraftlab.node.raft.states import Candidate, Leader, Prospective
from kraftlab.node.raft.voters import Endpoint, Voter, VoterSet
from kraftlab.node.sim.answer_fields import judge_describe
from kraftlab.node.sim.cluster import SimNode, SimParams, SimResult, Simulation
from kraftlab.node.sim.invariants import CheckedNode, Invariants
from kraftlab.node.sim.voter_change_timing import VoterChangeTiming
from kraftlab.node.sim.voter_requests import (
    CLIENT_ID,
    Asked,
    VoterRequestJudge,
    draw,
    kafkas_answer,
    taken_outcomes,
)

ADMIN_ID = -1000
"""The administrator's id in envelopes (no node's)."""
MEMBER = 100
"""The simulator's event kind for the administrator's next action."""
REQUEST = 101
"""The simulator's event kind for the voter change client's next request (node.sim.voter_requests)."""


@dataclass(frozen=True, slots=True)
class MembershipParams:
    sim: SimParams
    """The simulation's parameters; `sim.voters` is the number of nodes (all controllers)."""
    initial: int = 1
    """Voters of the bootstrap checkpoint (1: `--standalone`)."""
    max_voters: int = 5
    change_every_ms: int = 700
    replace_disks: bool = True
    replace_chance: float = 0.15
    """How often an action of the administrator in a settled quorum of 3+ voters replaces a disk."""
    requests: bool = True
    """A client sends voter change requests drawn from KIP-853's whole space, every few hundred ms,
    each answer judged against Kafka's (node.sim.voter_requests)."""

    def replay_command(self) -> str:
        command = self.sim.replay_command().replace("kraftlab.node.sim.replay", "kraftlab.node.sim.membership_replay")
        disks = "" if self.replace_disks else " --no-disks"
        requests = "" if self.requests else " --no-requests"
        return (
            f"{command} --initial {self.initial} --max-voters {self.max_voters} --change-every-ms "
            f"{self.change_every_ms} --replace-chance {self.replace_chance}{disks}{requests}"
        )


@dataclass(slots=True)
class MembershipResult:
    sim: SimResult
    answers: dict[str, int] = field(default_factory=dict)
    """AddRaftVoter/RemoveRaftVoter answers by `kind:ERROR`."""
    changes_committed: int = 0
    leader_removals: int = 0
    """RemoveRaftVoter requests the leader got for itself."""
    disks_replaced: int = 0
    final_voters: tuple[int, ...] = ()
    requests: dict[str, int] = field(default_factory=dict)
    """The voter change client's answers by `request kind:ERROR`."""


class MembershipInvariants(Invariants):
    """The simulator's invariants where a voter's disk may be replaced: until the voter set stops
    naming the old directory, that voter counts as holding what its old disk held durably, and only
    that — the new disk is another replica (KIP-853's replica key), whose fetches Kafka's leader
    counts as an observer's. A replaced disk is not the voter (it never votes nor campaigns,
    ReplacedDiskNeverVotes), so for every majority that could elect a leader it is as a crashed
    voter that kept its log."""

    def __init__(self, voters: list[int], directories: dict[int, uuid.UUID]) -> None:
        super().__init__(voters)
        self.directories = directories
        self.lost: dict[tuple[int, uuid.UUID], int] = {}
        """(node id, replaced directory id) -> the durable end offset of that disk when replaced."""

    def durable_voters(self, voters: VoterSet, hw: int, nodes: Mapping[int, CheckedNode]) -> int:
        count = 0
        for v in voters:
            directory = _directory(voters, v)
            if directory is not None and directory != self.directories[v]:
                end = self.lost.get((v, directory), -1)
            else:
                end = nodes[v].log.flushed_end_offset()
            count += end >= hw
        return count


class MembershipSimulation(Simulation):
    def __init__(
        self, params: MembershipParams, config: RaftConfig | None = None, core_class: type[RaftCore] = RaftCore
    ) -> None:
        super().__init__(params.sim, config, core_class)
        self.membership = params
        self.report = MembershipResult(self.result)
        self._admin_rng = random.Random(params.sim.seed ^ 0x853)
        self.directories: dict[int, uuid.UUID] = {i: self._new_directory() for i in self.nodes}
        self.disks: set[tuple[int, uuid.UUID]] = set(self.directories.items())
        """Every replica key (node id, directory id) a disk of the simulation ran on."""
        self.invariants = MembershipInvariants(self.voter_ids, self.directories)
        self.witness.judging = False
        self.check_quorum.judging = False
        self.backoff.judging = False
        self.witness.fail = self.invariants.fail
        self.control_log.configured = ()  # a dynamic quorum: no controller.quorum.voters
        initial = VoterSet(self._voter(i) for i in sorted(self.nodes)[: params.initial])
        for i in initial:
            self.nodes[i].snapshots.write(
                OffsetAndEpoch(0, 0), [], 0, [kraft_version_record(KRAFT_VERSION_1), voters_record(initial)]
            )
        self._ref = 0
        self._committed: dict[int, int] = {}
        """Offset -> record CRC of every committed entry seen so far."""
        self._committed_end = 0
        self._led: set[tuple[int, int]] = set()
        self._sets_seen: dict[tuple[int, int], tuple[int, VoterSet]] = {}
        """(leader, epoch) -> the offset and set of the last voter set that leader had in force."""
        self.queue.push(params.change_every_ms, MEMBER, None)
        # The client's own generator: the administrator and the faults draw what they did without it.
        self._requests_rng = random.Random(params.sim.seed ^ 0x853C)
        self.voter_requests = VoterRequestJudge(lambda name, detail: self.invariants.fail(name, detail))
        self.change_timing = VoterChangeTiming(lambda name, detail: self.invariants.fail(name, detail))
        self.report.requests = self.voter_requests.outcomes
        if params.requests:
            self.queue.push(self._requests_rng.randint(1, 500), REQUEST, None)

    def _new_directory(self) -> uuid.UUID:
        return uuid.UUID(int=self._admin_rng.getrandbits(128) | (1 << 64))

    def _voter(self, node_id: int) -> Voter:
        return Voter(node_id, self.directories[node_id], (Endpoint("CONTROLLER", f"n{node_id}", 9093),))

    # ------------------------------------------------------------------ nodes

    def new_core(self, node: SimNode, rng: random.Random, **options: Any) -> RaftCore:
        # A dynamic-quorum controller: no configured voters, its directory id, every node to ask.
        return super().new_core(
            node,
            rng,
            voters=VoterSet([]),
            directory_id=self.directories[node.node_id],
            bootstrap=tuple(sorted(self.nodes)),
            **options,
        )

    def crash_node(self, node: SimNode, wipe: bool) -> None:
        durable = node.log.flushed_end_offset()
        super().crash_node(node, wipe)
        if wipe:  # a new disk: a new directory id and no bootstrap checkpoint
            invariants = self.invariants
            assert isinstance(invariants, MembershipInvariants)
            invariants.lost[(node.node_id, self.directories[node.node_id])] = durable
            self.directories[node.node_id] = self._new_directory()
            self.disks.add((node.node_id, self.directories[node.node_id]))
            self.report.disks_replaced += 1

    # ------------------------------------------------------------------ the loop

    def run(self) -> SimResult:
        result = super().run()
        leader = self._leader()
        if leader is not None and leader.core is not None:
            self.report.final_voters = leader.core.voter_set.ids
        return result

    def other_event(self, kind: int, payload: Any, now: int) -> SimNode | None:
        if kind == REQUEST:
            return self._request(now)
        if kind != MEMBER:
            return super().other_event(kind, payload, now)
        return self._admin(now)

    def _dispatch(self, node: SimNode, out: Output, now: int) -> None:
        self._judge_votes(node, out)
        admin = [e for e in out.messages if e.dst in (ADMIN_ID, CLIENT_ID)]
        if admin:
            for env in admin:
                if env.dst == CLIENT_ID:
                    self.voter_requests.answered(env)
                    self.change_timing.answered(env, now)
                else:
                    self._answered(env)
            out = Output(
                [e for e in out.messages if e.dst not in (ADMIN_ID, CLIENT_ID)], out.events, out.updates,
                out.deadline, out.flush_to,
            )
        self.change_timing.overdue(self.nodes, now)
        super()._dispatch(node, out, now)
        self._judge(node)

    def _answered(self, env: m.Envelope) -> None:
        kind = env.ref[0] if isinstance(env.ref, tuple) else "?"
        message = env.message
        error = message.error.name if isinstance(message, m.VoterChangeResponse) else type(message).__name__
        key = f"{kind}:{error}"
        self.report.answers[key] = self.report.answers.get(key, 0) + 1
        if error == "NONE":
            self.report.changes_committed += 1

    # ------------------------------------------------------------------ the administrator

    def _admin(self, now: int) -> SimNode | None:
        """The administrator's next action, sent to the leader: remove a voter whose disk was
        replaced, replace a voter's disk, add a node that is not a voter, or remove a voter."""
        params = self.membership
        if now < self.params.fault_ms + self.params.settle_ms // 2:
            self.queue.push(now + params.change_every_ms, MEMBER, None)
        rng = self._admin_rng
        leader = self._leader()
        if leader is None or leader.raft is None or leader.core is None:
            return None
        voters = leader.core.voter_set
        stale = [v for v in voters if _directory(voters, v) != self.directories[v]]
        outside = [i for i in sorted(self.nodes) if i not in voters and self.nodes[i].raft is not None]
        self._ref += 1
        request: m.AddRaftVoterRequest | m.RemoveRaftVoterRequest
        if stale:
            victim = rng.choice(stale)
            kind, request = "remove", m.RemoveRaftVoterRequest(victim, _directory(voters, victim))
        elif (
            params.replace_disks
            and len(voters) >= 3
            and self._settled(leader, now)
            and rng.random() < params.replace_chance
        ):
            # A voter's disk replaced (it keeps its id): it is no longer the voter its id names.
            # As an operator would, only in a settled quorum: every voter up, no change in flight.
            node = self.nodes[rng.choice(list(voters))]
            if node.raft is not None:
                self.crash_node(node, wipe=True)
                self.invariants.restarted(node.node_id, wiped=True)
                self.start_node(node, now)
            return None
        elif outside and len(voters) < params.max_voters and (len(voters) == 1 or rng.random() < 0.5):
            kind, request = "add", m.AddRaftVoterRequest(self._voter(rng.choice(outside)), 3_000)
        elif len(voters) > 1:
            # From two voters, the leader removes the other one: were it to remove itself and the
            # remaining voter lag behind its log, neither could be elected (the removed leader no
            # longer campaigns and refuses a vote to a log behind its own) — KIP-853 as Kafka has it.
            candidates = list(voters) if len(voters) > 2 else list(voters.others(leader.node_id))
            victim = rng.choice(candidates)
            kind, request = "remove", m.RemoveRaftVoterRequest(victim, _directory(voters, victim))
        else:
            return None
        if isinstance(request, m.RemoveRaftVoterRequest) and request.voter_id == leader.node_id:
            self.report.leader_removals += 1
        env = m.Envelope(ADMIN_ID, leader.node_id, request, (kind, self._ref))
        self._dispatch(leader, leader.raft.handle(env, now), now)
        return leader

    def _request(self, now: int) -> SimNode | None:
        """The voter change client's next request, to the leader or any live node, judged against
        Kafka's answer in the state the node takes it in (node.sim.voter_requests)."""
        rng = self._requests_rng
        self.queue.push(now + rng.randint(100, 600), REQUEST, None)
        live = [n for n in self.nodes.values() if n.raft is not None and n.core is not None]
        leader = self._leader()
        node = leader if leader is not None and rng.random() < 0.7 else (rng.choice(live) if live else None)
        if node is None or node.raft is None or node.core is None:
            return None
        request = draw(rng, node.core, sorted(self.nodes), self.directories)
        expected, why = kafkas_answer(node.core, request)
        self._ref += 1
        ref = self._ref
        taken = taken_outcomes(request, self.directories)
        found = (node.core.leader_id, node.core.epoch)
        self.voter_requests.sent(ref, Asked(request, expected, why, node.node_id, taken=taken, found=found))
        self.change_timing.asked(ref, request, expected is not None, node, now)
        out = node.raft.handle(m.Envelope(CLIENT_ID, node.node_id, request, ref), now)
        if expected is not None and not any(e.dst == CLIENT_ID and e.ref == ref for e in out.messages):
            self.invariants.fail("VoterChangeAnswered", f"node {node.node_id} took {request!r}, which Kafka refuses "
                                 f"at once with {expected.name} ({why})")
        self._dispatch(node, out, now)
        return node

    def _settled(self, leader: SimNode, now: int) -> bool:
        """What an operator checks (DescribeQuorum at the leader) before replacing a voter's disk:
        no change in flight, the leader has committed an entry of its own epoch (before that Kafka
        reports no high-water mark), and every voter is up, has fetched in this epoch within a fetch
        timeout and holds the high-water mark. A leader no other voter has followed yet is not a
        settled quorum: its epoch's entries may live on its disk alone (and observers'), while
        another voter may hold an uncommitted tail with a voter set of its own — replacing that
        leader's disk can leave no replica able to win an election, in Kafka as here."""
        core = leader.core
        assert core is not None
        state = core.state
        if not isinstance(state, Leader) or state.voter_change is not None:
            return False
        hw = core.high_watermark
        fresh = now - self.config.fetch_timeout_ms
        return (
            core.control.last_change_offset() < hw
            and hw > state.epoch_start_offset
            and all(self.nodes[v].raft is not None for v in core.voter_set)
            and all(
                v not in state.unacknowledged and p.last_fetch_ms >= fresh and p.end_offset >= hw
                for v, p in state.voters.items()
                if v != leader.node_id
            )
        )

    # ------------------------------------------------------------------ membership invariants

    def _judge(self, node: SimNode) -> None:
        core = node.core
        if core is None:
            return
        fail = self.invariants.fail
        nid = node.node_id
        # Judged by the simulator's own knowledge of the node's disk, not the core's opinion.
        holds = core.voter_set.holds(nid, self.directories[nid])
        if not holds and isinstance(core.state, Prospective | Candidate):
            fail("ReplacedDiskNeverVotes", f"node {nid} campaigns but is not a voter of {core.voter_set!r}")
        self._note_committed(node)
        if not core.is_leader:
            return
        if not holds and core.control.last_change_offset() < core.high_watermark:
            fail("RemovedLeaderResigns", f"leader {nid} (epoch {core.epoch}) still leads after the set without it "
                 f"(offset {core.control.last_change_offset()}) committed")
        key = (nid, core.epoch)
        if key not in self._led:
            self._led.add(key)
            log = node.log
            if log.end_offset() < self._committed_end:
                fail(
                    "LeaderCompleteness",
                    f"leader {nid} (epoch {core.epoch}) log ends at {log.end_offset()}, "
                    f"before the committed offset {self._committed_end}",
                )
            for batch in log.batches():
                for i, record in enumerate(batch.records):
                    known = self._committed.get(batch.base_offset + i)
                    if known is not None and known != record.crc():
                        fail(
                            "LeaderCompleteness",
                            f"leader {nid} (epoch {core.epoch}) holds another record "
                            f"at committed offset {batch.base_offset + i}",
                        )
        history = core.voter_history
        now_set = (history.last_offset, history.latest)
        before = self._sets_seen.get(key)
        self._sets_seen[key] = now_set
        if before is None or before[0] != now_set[0]:
            view = core.describe_quorum(self.invariants.now)
            judge_describe(view, now_set[1], f"leader {nid} (epoch {core.epoch})", fail)
        if before is None or before[0] == now_set[0]:
            return
        previous_offset, previous = before
        for v in now_set[1]:
            directory = _directory(now_set[1], v)
            added = v not in previous or _directory(previous, v) != directory
            if added and directory is not None and (v, directory) not in self.disks:
                fail("AddedVoterIsAReplica", f"leader {nid} added voter ({v}, {directory}) at {now_set[0]}: no disk "
                     f"of node {v} has that directory id (it runs on {self.directories.get(v)})")
        if previous_offset >= core.high_watermark and previous_offset >= 0:
            fail(
                "OneChangeAtATime",
                f"leader {nid} appended the voter set at {now_set[0]} while the one at "
                f"{previous_offset} had not committed (high-water mark {core.high_watermark})",
            )
        if not previous.overlaps_majority_with(now_set[1]):
            fail("MajoritiesIntersect", f"leader {nid}: voter sets {previous.ids} then {now_set[1].ids}")

    def _judge_votes(self, node: SimNode, out: Output) -> None:
        """ReplacedDiskNeverVotes, the granting side: a vote granted to a candidate whose voter set
        names this node with another directory than the one it runs on (the disk was replaced)."""
        for env in out.messages:
            message = env.message
            if not isinstance(message, m.VoteResponse) or not message.granted:
                continue
            candidate = self.nodes.get(env.dst)
            core = None if candidate is None else candidate.core
            if core is None:
                continue
            named = _directory(core.voter_set, node.node_id)
            if named is not None and named != self.directories[node.node_id]:
                self.invariants.fail(
                    "ReplacedDiskNeverVotes",
                    f"node {node.node_id} (a new disk) granted {env.dst} the vote of its old directory {named}",
                )

    def _note_committed(self, node: SimNode) -> None:
        core = node.core
        assert core is not None
        hw = core.high_watermark
        if hw <= self._committed_end:
            return
        for batch in node.log.batches():
            for i, record in enumerate(batch.records):
                offset = batch.base_offset + i
                if self._committed_end <= offset < hw:
                    self._committed.setdefault(offset, record.crc())
        self._committed_end = hw


def _directory(voters: VoterSet, node_id: int) -> uuid.UUID | None:
    voter = voters.voter(node_id)
    return None if voter is None else voter.directory_id


def run(params: MembershipParams, config: RaftConfig | None = None) -> MembershipResult:
    simulation = MembershipSimulation(params, config)
    simulation.run()
    return simulation.report
