"""Partition replication on a broker (sans-IO): which partitions it leads and follows, from the
metadata image, and the data-plane APIs on them — Produce, Fetch (consumers and followers),
ListOffsets, OffsetForLeaderEpoch.

Modules: `ports` (the log seams: ReplicaLog, LogStore), `partition` (one partition's role, leader
epoch, ISR and followers' progress; the high-water mark), `manager` (ReplicaManager: the image's
roles, the requests, parked acks=all produces and min.bytes fetches), `fetcher` (follower fetchers:
FetchFromLeader, truncation by diverging epoch), `isr` (ISR shrink/expand: AlterIsr).

    manager = ReplicaManager(node_id, log_manager, wall_ms=clock.wall_ms)
    manager.apply_image(metadata.image, now_ms)     # after every metadata change
    manager.handle(token, request, now_ms)          # Produce / Fetch / ListOffsets / OffsetForLeaderEpoch
    manager.tick(now_ms)                            # parked requests whose time is up
    manager.take_outputs()                          # ClientReply(token, response | None), JournalEvent,
        # FetchFromLeader(leader, token, req) -> manager.fetcher.on_response(token, resp, now) / on_failure
        # AlterIsr(token, req) to the controller -> manager.isr.on_response(token, resp, now) / on_failure
"""

from kraftlab.node.broker.replication.fetcher import FetchFromLeader
from kraftlab.node.broker.replication.isr import AlterIsr
from kraftlab.node.broker.replication.manager import DATA_PLANE_APIS, ClientReply, ReplicaManager
from kraftlab.node.broker.replication.partition import Partition, Role

__all__ = ["DATA_PLANE_APIS", "AlterIsr", "ClientReply", "FetchFromLeader", "Partition", "ReplicaManager", "Role"]
