"""Broker membership on the active controller: registration, heartbeats, leases, fencing.

- BrokerRegistration: the cluster id must match (INCONSISTENT_CLUSTER_ID, today's name of
  KIP-631's INVALID_CLUSTER_ID); a different incarnation while the current one's lease is live
  gets DUPLICATE_BROKER_REGISTRATION (unless that one is in controlled shutdown: a restart after
  SIGTERM need not wait for the old lease), and so does an incarnation a newer one already replaced
  (a zombie process); a retry from the same incarnation gets the same epoch and
  writes nothing; the broker must support every finalized feature level (UNSUPPORTED_VERSION);
  otherwise a fenced RegisterBrokerRecord whose offset is the new broker epoch. A new incarnation
  leaves every ISR and leadership; one whose PreviousBrokerEpoch is not the registered epoch came
  back from an unclean shutdown (KIP-966: no clean-shutdown marker in its log directories — a
  crash, a power loss, a lost and reformatted directory); unless it registers the same log
  directory ids as before (KIP-858: a reformatted disk has a new one), it is also struck from the
  remembered last ISR members, so it never leads from a log that may lack acknowledged records; so
  is one registering while no registration of its id exists (unregistered meanwhile: nothing to
  match). Back on the same directories, it is the last known leader Kafka 4.1's balanced recovery
  elects again. A replica placed on a directory the registration no longer names is placed on one
  it names (log_dirs.rehome, Kafka's AssignReplicasToDirs) and its broker is struck as above.
- BrokerHeartbeat: BROKER_ID_NOT_REGISTERED / STALE_BROKER_EPOCH, else the lease is renewed;
  unfenced when it asks (WantFence false) and has replayed its own registration; WantShutDown
  moves its leaderships and ISR memberships away and ShouldShutDown is answered once it leads
  nothing; WantFence on an unfenced broker fences it.
- Leases live in memory on the active controller only; a newly active controller grants every
  registered broker a fresh one. An expired lease fences the broker: it leaves every ISR and
  leadership (partitions.remove_broker), then FenceBrokerRecord (last, as in Kafka).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kraftlab.node.controller.log_dirs import handle_offline_dirs, lost_replicas, rehome
from kraftlab.node.controller.messages import error_name
from kraftlab.node.controller.partitions import leads_any, recover_leaderless, remove_broker
from kraftlab.node.controller.write import Outcome, Write
from kraftlab.node.metadata.image import MetadataImage
from kraftlab.node.metadata.journal import JournalEvent
from kraftlab.node.metadata.records import (
    BrokerEndpoint,
    BrokerFeature,
    BrokerRegistrationChangeRecord,
    FenceBrokerRecord,
    RegisterBrokerRecord,
    UnfenceBrokerRecord,
    UnregisterBrokerRecord,
)


class Leases:
    """Last contact per broker (active controller only) and the sampled `lease` journal events."""

    def __init__(self, session_timeout_ms: int, journal_interval_ms: int) -> None:
        self.session_timeout_ms = session_timeout_ms
        self.journal_interval_ms = journal_interval_ms
        self.last_contact: dict[int, int] = {}
        self._journaled: dict[int, int] = {}

    def touch(self, broker: int, now_ms: int, events: list[JournalEvent]) -> None:
        self.last_contact[broker] = now_ms
        last = self._journaled.get(broker)
        if last is None or now_ms - last >= self.journal_interval_ms:
            self._journaled[broker] = now_ms
            events.append(JournalEvent("lease", {"broker": broker, "expires_ms": now_ms + self.session_timeout_ms}))

    def alive(self, broker: int, now_ms: int) -> bool:
        last = self.last_contact.get(broker)
        return last is not None and now_ms - last < self.session_timeout_ms

    def forget(self, broker: int) -> None:
        self.last_contact.pop(broker, None)
        self._journaled.pop(broker, None)

    def expired(self, image: MetadataImage, now_ms: int) -> list[int]:
        """Unfenced brokers whose lease ran out (a broker with no lease entry gets one first)."""
        return sorted(
            b.id
            for b in image.brokers.values()
            if not b.fenced and b.id in self.last_contact and not self.alive(b.id, now_ms)
        )

    def next_expiry_ms(self, image: MetadataImage) -> int | None:
        """When the first unfenced broker's lease runs out (None: nobody to fence)."""
        times = [
            t + self.session_timeout_ms
            for b, t in self.last_contact.items()
            if b in image.brokers and not image.brokers[b].fenced
        ]
        return min(times) if times else None


def _decision(api: str, broker: int, epoch: int, code: ErrorCode, **extra: Any) -> dict[str, Any]:
    return {"api": api, "broker": broker, "broker_epoch": epoch, "error": error_name(code), **extra}


def _features_ok(image: MetadataImage, features: Any) -> bool:
    offered = {f.name: (f.min_supported_version, f.max_supported_version) for f in features}
    for name, level in image.features.items():
        lo_hi = offered.get(name)
        if lo_hi is None or not lo_hi[0] <= level <= lo_hi[1]:
            return False
    return True


def register(w: Write, req: Any, leases: Leases) -> Outcome:
    bid, incarnation = req.broker_id, req.incarnation_id
    existing = w.image.brokers.get(bid)

    previous = int(getattr(req, "previous_broker_epoch", -1))
    log_dirs = tuple(d for d in getattr(req, "log_dirs", ()) if d is not None)

    def answer(code: ErrorCode, epoch: int = -1) -> Outcome:
        d = _decision("BrokerRegistration", bid, epoch, code, incarnation=str(incarnation), at_ms=w.now_ms,
                      previous_broker_epoch=previous)
        return Outcome({"error_code": code, "broker_epoch": epoch}, [d])

    if req.cluster_id != w.config.cluster_id:
        return answer(ErrorCode.inconsistent_cluster_id)
    if existing is not None and existing.incarnation_id == incarnation:
        if not w.config.bugs.on("reregister-bumps-epoch"):
            leases.touch(bid, w.now_ms, w.events)
            return answer(ErrorCode.none, existing.epoch)
        # BUG ZOO: reregister-bumps-epoch (KAFKA-16952) — a retry of the same incarnation falls
        # through to a new RegisterBrokerRecord: a new epoch, fenced again.
    elif existing is not None and leases.alive(bid, w.now_ms) and not existing.in_controlled_shutdown:
        return answer(ErrorCode.duplicate_broker_registration)
    if incarnation in w.image.retired.get(bid, ()):
        return answer(ErrorCode.duplicate_broker_registration)  # a replaced (zombie) process
    if not _features_ok(w.image, req.features):
        return answer(ErrorCode.unsupported_version)
    epoch = w.offset_of_next_record()
    w.emit(
        RegisterBrokerRecord(
            broker_id=bid,
            incarnation_id=incarnation,
            broker_epoch=epoch,
            end_points=tuple(
                BrokerEndpoint(name=li.name, host=li.host, port=li.port, security_protocol=li.security_protocol)
                for li in req.listeners
            ),
            features=tuple(
                BrokerFeature(
                    name=f.name,
                    min_supported_version=f.min_supported_version,
                    max_supported_version=f.max_supported_version,
                )
                for f in req.features
            ),
            rack=req.rack,
            fenced=True,
            in_controlled_shutdown=False,
            log_dirs=log_dirs,
        )
    )
    # A replaced registration's old incarnation must not stay in any ISR or lead; after an unclean
    # shutdown from which its log directories did not come back (KIP-858: a directory id it did not
    # register before — a lost and reformatted disk), its log is not trusted to hold every committed
    # message either. Back on the same directories, it stays the last known leader Kafka's balanced
    # recovery elects again (KIP-966), as a crashed process finds its log where it left it.
    # (no registration at all: unregistered meanwhile, its id may still be remembered; nothing proves it)
    same_dirs = existing is not None and bool(existing.log_dirs) and set(existing.log_dirs) == set(log_dirs)
    lost = lost_replicas(w.image, bid)  # replicas on a directory it no longer has: their logs are new
    unclean_shutdown = ((existing is None or previous != existing.epoch) and not same_dirs) or bool(lost)
    if w.config.bugs.on("trust-unclean-return"):  # BUG ZOO: trust-unclean-return — every return is clean
        unclean_shutdown = False
    remove_broker(w.image, bid, w.emit, unclean=w.config.unclean_leader_election, unclean_shutdown=unclean_shutdown)
    rehome(w, bid, lost)
    leases.touch(bid, w.now_ms, w.events)
    return answer(ErrorCode.none, epoch)


def heartbeat(w: Write, req: Any, leases: Leases) -> Outcome:
    bid, epoch = req.broker_id, req.broker_epoch
    b = w.image.brokers.get(bid)

    def answer(code: ErrorCode, *, caught_up: bool = False, fenced: bool = True, shut_down: bool = False) -> Outcome:
        d = _decision("BrokerHeartbeat", bid, epoch, code, fenced=fenced, shut_down=shut_down,
                      metadata_offset=req.current_metadata_offset, want_fence=bool(req.want_fence),
                      want_shut_down=bool(req.want_shut_down), at_ms=w.now_ms)
        values = {"error_code": code, "is_caught_up": caught_up, "is_fenced": fenced, "should_shut_down": shut_down}
        return Outcome(values, [d])

    if b is None:
        return answer(ErrorCode.broker_id_not_registered)
    if b.epoch != epoch and not w.config.bugs.on("accept-stale-broker-epoch"):  # BUG ZOO: skip the check
        return answer(ErrorCode.stale_broker_epoch)
    leases.touch(bid, w.now_ms, w.events)
    caught_up = req.current_metadata_offset >= b.epoch
    unclean = w.config.unclean_leader_election
    offline = [d for d in getattr(req, "offline_log_dirs", ()) if d is not None]
    if offline:
        handle_offline_dirs(w, bid, epoch, offline)
    if b.fenced:
        if not req.want_fence and not req.want_shut_down and caught_up:
            w.emit(UnfenceBrokerRecord(id=bid, epoch=epoch))
            w.fence_event(bid, "unfence", "heartbeat", epoch, metadata_offset=int(req.current_metadata_offset))
            recover_leaderless(w.image, bid, w.emit, unclean=unclean)
    elif req.want_fence:
        fence(w, bid, epoch, "requested")
    elif req.want_shut_down:
        if not b.in_controlled_shutdown:
            w.emit(BrokerRegistrationChangeRecord(broker_id=bid, broker_epoch=epoch, in_controlled_shutdown=1))
            w.fence_event(bid, "shutdown", "controlled shutdown", epoch)
        remove_broker(w.image, bid, w.emit, unclean=unclean)
    after = w.image.brokers[bid]
    shut_down = bool(req.want_shut_down) and (
        after.fenced or (after.in_controlled_shutdown and not leads_any(w.image, bid))
    )
    return answer(ErrorCode.none, caught_up=caught_up, fenced=after.fenced, shut_down=shut_down)


def fence(w: Write, bid: int, epoch: int, reason: str, limit: int | None = None) -> int | None:
    """Take an unfenced broker out of every ISR and leadership, then fence it (Kafka's order: the
    records of a large fence span several batches, and at no committed offset between them is a
    fenced broker in an ISR). With a `limit`, at most that many partitions change now and the
    broker is fenced only once none is left: returns the changes made when done, None when not."""
    changed = 0
    if not w.config.bugs.on("fenced-stays-in-isr"):
        # BUG ZOO: fenced-stays-in-isr (KAFKA-13173) — the fenced broker keeps its ISR places and leaderships
        changed = remove_broker(w.image, bid, w.emit, unclean=w.config.unclean_leader_election, limit=limit)
        if limit is not None and changed >= limit:
            return None  # maybe more: the next call goes on (the broker stays unfenced until then)
    w.emit(FenceBrokerRecord(id=bid, epoch=epoch))
    w.fence_event(bid, "fence", reason, epoch)
    return changed


def fence_expired(w: Write, leases: Leases, budget: int | None = None) -> bool:
    """Fence the brokers whose lease expired, within a `budget` of partition changes; True when
    every one of them is fenced, False when some work is left for the next tick."""
    for bid in leases.expired(w.image, w.now_ms):
        done = fence(w, bid, w.image.brokers[bid].epoch, "session timeout", budget)
        if done is None:
            return False
        if budget is not None:
            budget -= done
            if budget <= 0:
                return not leases.expired(w.image, w.now_ms)
    return True


def unregister(w: Write, req: Any, leases: Leases) -> Outcome:
    bid = req.broker_id
    b = w.image.brokers.get(bid)
    if b is None:  # as Kafka: unregistering an unknown broker is an error, not a no-op
        code = ErrorCode.broker_id_not_registered
        return Outcome({"error_code": code}, [_decision("UnregisterBroker", bid, -1, code)])
    remove_broker(w.image, bid, w.emit, unclean=w.config.unclean_leader_election)
    w.emit(UnregisterBrokerRecord(broker_id=bid, broker_epoch=b.epoch))
    w.fence_event(bid, "fence", "unregistered", b.epoch)
    leases.forget(bid)
    return Outcome({"error_code": ErrorCode.none},
                   [_decision("UnregisterBroker", bid, b.epoch, ErrorCode.none, at_ms=w.now_ms)])
