"""A broker that comes back from an unclean shutdown (KIP-966: its PreviousBrokerEpoch is not its
registered epoch) is struck from every ISR and from the remembered last ISR members, so it never
leads from a log that may lack acknowledged records (a power loss, a lost and reformatted log
directory); one that proves a clean stop comes back as the last ISR member it was."""

from __future__ import annotations

import uuid

from controller_harness import Harness


def _last_member_fenced(h: Harness) -> dict[int, int]:
    """Topic t (replicas 1, 2): broker 2 left the ISR, then broker 1, the last member, was fenced."""
    epochs = h.start_brokers(1, 2)
    h.create("t", assignments={0: [1, 2]})
    h.alter_isr(1, epochs[1], "t", 0, [1])
    h.tick(5_000)
    h.heartbeat(2, epochs[2])
    h.tick(5_000)  # broker 1's lease ran out
    h.heartbeat(2, epochs[2])
    p = h.image().topic("t").partitions[0]
    assert p.leader == -1 and p.isr == () and p.last_known_elr == (1,)
    return epochs


def test_a_broker_back_from_an_unclean_shutdown_is_not_elected_from_the_last_isr_members(h: Harness) -> None:
    epochs = _last_member_fenced(h)
    resp = h.run(h.registration(1, incarnation=uuid.UUID(int=4242)))  # no clean-shutdown marker: -1
    assert resp.error_code == 0
    p = h.image().topic("t").partitions[0]
    assert p.last_known_elr == () and p.isr == () and p.leader == -1
    assert not h.heartbeat(1, resp.broker_epoch).is_fenced
    h.heartbeat(2, epochs[2])
    p = h.image().topic("t").partitions[0]
    assert p.leader == -1 and p.isr == ()  # offline, never led by a log that may have lost records
    decision = [d for d in h.evs("decision") if d["api"] == "BrokerRegistration"][-1]
    assert decision["previous_broker_epoch"] == -1 and decision["error"] == "NONE"


def test_a_stale_previous_epoch_is_an_unclean_shutdown_too(h: Harness) -> None:
    """A marker from an older life (a directory restored from a backup) proves nothing about this one."""
    epochs = _last_member_fenced(h)
    resp = h.run(h.registration(1, incarnation=uuid.UUID(int=4242), previous_broker_epoch=epochs[1] - 1))
    assert not h.heartbeat(1, resp.broker_epoch).is_fenced
    p = h.image().topic("t").partitions[0]
    assert p.leader == -1 and p.last_known_elr == ()


def test_a_broker_back_from_a_clean_shutdown_leads_again(h: Harness) -> None:
    epochs = _last_member_fenced(h)
    resp = h.run(h.registration(1, incarnation=uuid.UUID(int=4242), previous_broker_epoch=epochs[1]))
    assert h.image().topic("t").partitions[0].last_known_elr == (1,)
    assert not h.heartbeat(1, resp.broker_epoch).is_fenced
    p = h.image().topic("t").partitions[0]
    assert p.leader == 1 and p.isr == (1,) and p.last_known_elr == ()


def test_an_unclean_return_leaves_the_isr_and_other_members_lead(h: Harness) -> None:
    epochs = h.start_brokers(1, 2, 3)
    h.create("t", assignments={0: [1, 2, 3]})
    h.tick(9_001)  # broker 1 stopped heartbeating (crashed) while 2 and 3 go on
    for b in (2, 3):
        h.heartbeat(b, epochs[b])
    h.tick(1)
    resp = h.run(h.registration(1, incarnation=uuid.UUID(int=4242)))
    assert resp.error_code == 0
    p = h.image().topic("t").partitions[0]
    assert 1 not in p.isr and p.leader in (2, 3) and p.last_known_elr == ()


D1, D2, NEW = uuid.UUID(int=7001), uuid.UUID(int=7002), uuid.UUID(int=7003)


def _last_member_fenced_with_dirs(h: Harness) -> dict[int, int]:
    """As `_last_member_fenced`, the brokers registering their log directory ids (KIP-858)."""
    epochs = {1: h.register(1, log_dirs=(D1,)), 2: h.register(2, log_dirs=(D2,))}
    for b, e in epochs.items():
        assert not h.heartbeat(b, e).is_fenced
    h.create("t", assignments={0: [1, 2]})
    h.alter_isr(1, epochs[1], "t", 0, [1])
    h.tick(5_000)
    h.heartbeat(2, epochs[2])
    h.tick(5_000)
    h.heartbeat(2, epochs[2])
    p = h.image().topic("t").partitions[0]
    assert p.leader == -1 and p.isr == () and p.last_known_elr == (1,)
    return epochs


def test_an_unclean_return_on_the_same_directories_leads_again(h: Harness) -> None:
    """A crashed process finds its log where it left it: back on the directories it registered
    before, the last known leader is elected again (Kafka 4.1's balanced recovery), not left offline."""
    epochs = _last_member_fenced_with_dirs(h)
    resp = h.run(h.registration(1, incarnation=uuid.UUID(int=4243), log_dirs=(D1,)))
    assert resp.error_code == 0 and h.image().topic("t").partitions[0].last_known_elr == (1,)
    assert not h.heartbeat(1, resp.broker_epoch).is_fenced
    h.heartbeat(2, epochs[2])
    p = h.image().topic("t").partitions[0]
    assert p.leader == 1 and p.isr == (1,)


def test_an_unclean_return_on_a_new_directory_is_struck(h: Harness) -> None:
    """A lost and reformatted disk has a new directory id: its empty log never leads."""
    epochs = _last_member_fenced_with_dirs(h)
    resp = h.run(h.registration(1, incarnation=uuid.UUID(int=4244), log_dirs=(NEW,)))
    assert resp.error_code == 0 and h.image().topic("t").partitions[0].last_known_elr == ()
    assert not h.heartbeat(1, resp.broker_epoch).is_fenced
    h.heartbeat(2, epochs[2])
    p = h.image().topic("t").partitions[0]
    assert p.leader == -1 and p.isr == ()


def test_a_replica_whose_directory_is_gone_is_placed_anew_and_rejoins_the_isr(h: Harness) -> None:
    """A disk lost and formatted anew (a new directory id): the replica placed on the old one is
    placed on the new one (what Kafka's AssignReplicasToDirs reports), not left offline for good; its
    broker leaves the ISR and leadership (its log there starts empty) and the leader can take it back
    into the ISR once it caught up."""
    epochs = {1: h.register(1, log_dirs=(D1,)), 2: h.register(2, log_dirs=(D2,))}
    for b, e in epochs.items():
        assert not h.heartbeat(b, e).is_fenced
    h.create("t", assignments={0: [1, 2]})
    assert h.image().topic("t").partitions[0].directories == (D1, D2)
    h.tick(10_000)  # broker 1's process is gone: its lease runs out (broker 2 keeps its own)
    assert h.heartbeat(2, epochs[2]).error_code == 0
    resp = h.run(h.registration(1, incarnation=uuid.UUID(int=4245), log_dirs=(NEW,), previous_broker_epoch=epochs[1]))
    assert resp.error_code == 0  # a clean-shutdown marker cannot vouch for a directory that is gone
    p = h.image().topic("t").partitions[0]
    assert p.directories == (NEW, D2) and h.image().replica_online(p, 1)
    assert p.leader == 2 and p.isr == (2,) and p.last_known_elr == ()
    assert not h.heartbeat(1, resp.broker_epoch).is_fenced
    back = h.alter_isr(2, epochs[2], "t", 0, [1, 2])
    assert back.topics[0].partitions[0].error_code == 0
    assert set(h.image().topic("t").partitions[0].isr) == {1, 2}


def test_a_broker_back_on_its_directories_keeps_its_replicas_where_they_are(h: Harness) -> None:
    epochs = {1: h.register(1, log_dirs=(D1,)), 2: h.register(2, log_dirs=(D2,))}
    for b, e in epochs.items():
        assert not h.heartbeat(b, e).is_fenced
    h.create("t", assignments={0: [1, 2]})
    h.tick(10_000)
    assert h.heartbeat(2, epochs[2]).error_code == 0
    before = h.active().committed_offset
    resp = h.run(h.registration(1, incarnation=uuid.UUID(int=4246), log_dirs=(D1,), previous_broker_epoch=epochs[1]))
    assert resp.error_code == 0 and h.image().topic("t").partitions[0].directories == (D1, D2)
    assert h.active().committed_offset == before + 1  # its registration alone, nothing placed anew
