"""The sans-IO broker side: lifecycle states, metadata replay, client-facing APIs.

API for the node process (node/server.py)::

    from kraftlab.node.broker import (BrokerApis, BrokerConfig, BrokerEndpoint, BrokerLifecycle, BrokerMetadata,
                             BrokerState, ClientReply, Forward, Refused, SendToController)

    cfg = BrokerConfig(node_id=4, cluster_id=cid, incarnation_id=uuid.uuid4(),
                       listeners=(BrokerEndpoint("PLAINTEXT", host, 9092),),
                       heartbeat_interval_ms=2000, session_timeout_ms=9000,
                       self_fence_timeout_ms=0)      # 0: session timeout + 2 heartbeat intervals
    metadata = BrokerMetadata()          # the ports.StateMachine of the broker's Raft observer
    lifecycle = BrokerLifecycle(cfg)
    apis = BrokerApis(cid, metadata, lifecycle)

    lifecycle.start(now_ms)                                  # NOT_RUNNING -> STARTING
    lifecycle.tick(now_ms, metadata.highest_offset)          # every ~50-100 ms
    apis.tick(now_ms)                                        # forward retries
    lifecycle.begin_controlled_shutdown(now_ms)              # on SIGTERM; stop when
                                                             # lifecycle.state is SHUTTING_DOWN
    apis.handle(token, kio_request, now_ms, listener_name)   # a client request on a broker listener

    outputs (take_outputs() of lifecycle, apis and metadata):
      SendToController(token, req) -> send to the active controller (metadata.controller_id, the
                                      Raft leader); then lifecycle.on_response(token, resp, now)
                                      or lifecycle.on_failure(token, now)
      Forward(token, req)          -> likewise; apis.on_forward_response(token, resp) or
                                      apis.on_forward_failure(token, now, sent=bool)
      ClientReply(token, resp)     -> answer the client (response in the request's version)
      Refused(token, reason)       -> close the client's connection (not running / fenced itself)
      JournalEvent                 -> journal (`broker_state`, `apply`)

A process with both roles runs one Raft node whose state machine fans out to the controller and
the broker's metadata (`node.metadata.fanout.FanOut(controller, metadata)`); construct
`BrokerMetadata(journal_applies=False)` there so `apply` events are journalled once.
ApiVersions is the protocol layer's; DescribeQuorum is Raft's (the core's describe_quorum).
"""

from kraftlab.node.broker.apis import BrokerApis, ClientReply, Forward, Refused
from kraftlab.node.broker.lifecycle import BrokerConfig, BrokerEndpoint, BrokerLifecycle, BrokerState, SendToController
from kraftlab.node.broker.metadata import BrokerMetadata

__all__ = [
    "BrokerApis",
    "BrokerConfig",
    "BrokerEndpoint",
    "BrokerLifecycle",
    "BrokerMetadata",
    "BrokerState",
    "ClientReply",
    "Forward",
    "Refused",
    "SendToController",
]
