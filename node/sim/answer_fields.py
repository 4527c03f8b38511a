"""Answer fields Kafka fills that the simulator's other rules leave unjudged: the leader an
UpdateRaftVoter answer names, and DescribeQuorum v2's Nodes (the markers of an absent value on the
wire, AbsentIsKafkasDefault, are `raft_reading`'s, judged here too on the voter change answers).

- **VoterChangeLeader** (`voter_change_leader`, on every answer of the dynamic-quorum simulator's
  voter change client, read from the wire as Kafka's admin client reads it): an UpdateRaftVoter
  answer's CurrentLeader names the responder's leader and epoch as the request found it (KIP-853):
  a refusal at once carries `quorum.leaderAndEpoch()`, and a leader, whether it answers at once, at
  the commit, at the timeout or when it leaves office (`LeaderState.close` completing the pending
  update with NOT_LEADER_OR_FOLLOWER), names itself in the epoch it took the request in.
  AddRaftVoter and RemoveRaftVoter answers have no such field in Kafka's schema.
- **DescribeQuorumNodes** (`describe_nodes`, on a leader's DescribeQuorum answer whenever its voter
  set changes): `RaftUtil.singletonDescribeQuorumResponse` lists the voter set in force as the
  current voters (ids and, v2, directory ids), and from v2 a Node per voter — exactly the voters,
  each once, with the listeners the voter set names for it — read from the v2 wire.
"""

from __future__ import annotations

from collections.abc import Callable

from kraftlab.node.raft import messages as m
from kraftlab.node.raft.membership import describe
from kraftlab.node.raft.membership import wire as membership_wire
from kraftlab.node.raft.voters import VoterSet
from kraftlab.node.sim.raft_reading import absent_markers, read_response
from kraftlab.node.sim.wire import through_the_wire


def as_read_from_the_wire(request: m.Request, answer: m.VoterChangeResponse) -> m.VoterChangeResponse:
    """A voter change answer as Kafka's client reads it: the node's entity for it through Kafka's
    wire format, read by Kafka's schema (`raft_reading`)."""
    what = f"answer to {request!r}"
    entity = through_the_wire(membership_wire.response_to_wire(request, answer), what)
    absent_markers(entity, what)
    read = read_response(entity)
    assert isinstance(read, m.VoterChangeResponse)
    return read


def voter_change_leader(
    request: m.Request, read: m.VoterChangeResponse, found: tuple[int | None, int]
) -> str | None:
    """VoterChangeLeader: what an answer (`read` from the wire) to `request`, taken by a responder
    whose (leader, epoch) were `found`, names otherwise than Kafka (None: nothing)."""
    if not isinstance(request, m.UpdateRaftVoterRequest):
        return None
    if (read.leader_id, read.epoch) != found:
        return (f"its CurrentLeader names leader {read.leader_id} in epoch {read.epoch}; the responder's were "
                f"{found[0]} in epoch {found[1]} when it took the request")
    return None


def describe_nodes(view: m.DescribeQuorumResponse, voters: VoterSet) -> str | None:
    """DescribeQuorumNodes: what a leader's DescribeQuorum answer `view`, read back from the v2 wire,
    says of the voter set `voters` in force otherwise than Kafka (None: nothing)."""
    read = read_response(through_the_wire(describe.response_to_v2(view), "DescribeQuorum v2"))
    assert isinstance(read, m.DescribeQuorumResponse)
    named = [(r.replica_id, r.directory_id) for r in read.voters]
    held = [(v, voter.directory_id) for v in voters.ids if (voter := voters.voter(v)) is not None]
    if sorted(named, key=lambda k: k[0]) != held:
        return f"current voters {named}, the voter set in force is {held}"
    nodes = sorted(read.nodes, key=lambda n: n[0])
    listed = [(v, voter.endpoints) for v in voters.ids if (voter := voters.voter(v)) is not None]
    if nodes != listed or len(read.nodes) != len(listed):
        return f"Nodes {list(read.nodes)}, Kafka lists each voter once with its listeners: {listed}"
    return None


def judge_describe(
    view: m.DescribeQuorumResponse, voters: VoterSet, where: str, fail: Callable[[str, str], None]
) -> None:
    wrong = describe_nodes(view, voters)
    if wrong is not None:
        fail("DescribeQuorumNodes", f"{where}: {wrong}")
