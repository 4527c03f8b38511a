"""The sans-IO quorum controller (KIP-631): registration, heartbeats, fencing, topics, ISRs.

API for the node process (node/server.py)::

    from kraftlab.node.controller import ControllerConfig, QuorumController, NotLeader, Reply, CONTROLLER_APIS

    ctrl = QuorumController(ControllerConfig(node_id=1, cluster_id=cid, session_timeout_ms=9000,
                                             seed=random_seed), writer)
    # `writer.append(records, now_ms) -> base offset` appends ONE batch on the Raft leader and
    # raises node.controller.NotLeader otherwise. Adapter over the Raft core: call
    # RaftNode.append(records, now) -> (base, Output), dispatch that Output like any other, and
    # translate node.raft.core.NotLeader into node.controller.NotLeader. The controller may be
    # re-entered (handle_commit) from inside append: that is fine.
    RaftNode(core, ctrl)                       # ctrl is the ports.StateMachine
    ctrl.handle_request(token, kio_request, now_ms)   # any CONTROLLER_APIS request, any version
    ctrl.tick(now_ms)                          # at least at ctrl.next_deadline_ms() (lease expiry);
                                               # calling it every ~100 ms is simplest
    for out in ctrl.take_outputs():            # after every call above (and after Raft steps)
        Reply(token, response)                 # -> answer the request with `response` (same version)
        JournalEvent(ev, fields)               # -> journal line (add ts, mono, node)
    ctrl.snapshot_due() / ctrl.snapshot_records()   # periodic snapshots of the committed image
    ctrl.active, ctrl.committed_image, ctrl.committed_offset   # metrics, describe, shell

Wire versions the controller is written against (the response is always built in the request's
own version): BrokerRegistration v4 (any), BrokerHeartbeat v1 (any), UnregisterBroker v0,
CreateTopics v7 (v2+), DeleteTopics v6 (v1+), AlterPartition v3 (v2+, topic ids),
AlterPartitionReassignments v0, ListPartitionReassignments v0, ElectLeaders v2 (v0+),
IncrementalAlterConfigs v1 (v0+), AlterConfigs v2 (v0+), CreatePartitions v3 (v0+).
Kafka's INVALID_CLUSTER_ID is today's INCONSISTENT_CLUSTER_ID (104).

Outcomes, for workloads and checkers: an answer other than NOT_CONTROLLER / REQUEST_TIMED_OUT is
committed (ok or a definite failure). NOT_CONTROLLER is definite when a standby refuses at once,
but a request held by a controller that then lost leadership is also answered NOT_CONTROLLER
and its records may still commit under the next leader: treat NOT_CONTROLLER as indeterminate.
The `decision` journal events tell the two apart (released decisions carry the real error;
reverted ones say NOT_CONTROLLER).

The controller listener serves Raft's APIs, ApiVersions and CONTROLLER_APIS only; client APIs
(Metadata, Produce, …) are refused there (`is_controller_listener_api`).
"""

from kraftlab.node.controller.ports import ControllerConfig, InMemoryLog, MetadataWriter, NotLeader, Reply
from kraftlab.node.controller.quorum_controller import CONTROLLER_APIS, QuorumController, error_response

RAFT_APIS = ("Vote", "BeginQuorumEpoch", "EndQuorumEpoch", "Fetch", "FetchSnapshot", "DescribeQuorum")


def is_controller_listener_api(api: str) -> bool:
    """Whether the controller listener serves `api` (a name like `BrokerHeartbeat`)."""
    return api in CONTROLLER_APIS or api in RAFT_APIS or api == "ApiVersions"


__all__ = [
    "CONTROLLER_APIS",
    "RAFT_APIS",
    "ControllerConfig",
    "InMemoryLog",
    "MetadataWriter",
    "NotLeader",
    "QuorumController",
    "Reply",
    "error_response",
    "is_controller_listener_api",
]
