"""The isr workload: agents' AlterPartition requests against the fake controller (a CAS on the
partition epoch; stale leaders, stale epochs and old incarnations refused), and its histories
checked by the `isr`, `registry` and `topics` models."""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

from wl_harness import completions, invoke, open_client, run, stale_alters, verdicts

from kraftlab.workloads.agents import heartbeat_op, register_op
from kraftlab.workloads.fake_kafka import FakeKafka
from kraftlab.workloads.isr import IsrWorkload
from kraftlab.workloads.ops import broker_read, op


def alter(w: IsrWorkload, sender: int, isr: list[int], *, le: int, pe: int, epoch: int | None = None) -> Any:
    b = w.beliefs["isr-0"]
    a = w.book[sender]
    return op("isr", "alter", {"topic": "isr-0", "topic_id": b.topic_id, "partition": 0, "leader": sender,
                               "broker_epoch": a.epoch if epoch is None else epoch, "leader_epoch": le,
                               "partition_epoch": pe, "isr": sorted(isr),
                               "isr_epochs": [[x, w.book.agents[x].epoch if x in w.book.agents else -1]
                                              for x in sorted(isr)]})


def setup() -> tuple[FakeKafka, IsrWorkload, Any]:
    fake = FakeKafka()
    w = IsrWorkload(["n1", "n2", "n3"], agents=3, topics=1)
    c = open_client(fake, w.handlers())
    rng = random.Random(1)
    for b in w.book.ids:
        assert invoke(c, register_op(w.book[b], rng)).type == "ok"
        assert invoke(c, heartbeat_op(w.book[b], w.book[b].epoch)).value["fenced"] is False
    create = op("topics", "create", {"topic": "isr-0", "assignment": [list(w.beliefs["isr-0"].replicas)]})
    assert invoke(c, create).type == "ok"
    read = invoke(c, broker_read("isr", "read", "n2", topic="isr-0", partition=0))
    assert read.value == {"exists": True, "leader": 2000, "leader_epoch": 0, "isr": [2000, 2001, 2002],
                          "replicas": [2000, 2001, 2002]}
    assert w.beliefs["isr-0"].topic_id == str(fake.topics["isr-0"].id)
    return fake, w, c


def test_alter_is_a_compare_and_set_on_the_partition_epoch() -> None:
    fake, w, c = setup()
    done = invoke(c, alter(w, 2000, [2000, 2001], le=0, pe=0))
    assert done.type == "ok"
    assert done.value == {"leader": 2000, "leader_epoch": 0, "partition_epoch": 1, "isr": [2000, 2001]}
    assert w.beliefs["isr-0"].partition_epoch == 1
    again = invoke(c, alter(w, 2000, [2000], le=0, pe=0))  # the same expected epoch: lost the race
    assert (again.type, again.error) == ("fail", "INVALID_UPDATE_VERSION")
    assert fake.topics["isr-0"].parts[0].isr == (2000, 2001)
    assert invoke(c, alter(w, 2001, [2001], le=0, pe=1)).error == "INVALID_REQUEST"  # not the leader
    old = invoke(c, alter(w, 2000, [2000], le=0, pe=1, epoch=w.book[2000].epoch - 1))
    assert old.error == "STALE_BROKER_EPOCH"  # an old incarnation speaks
    assert invoke(c, alter(w, 2000, [2000, 2001, 2005], le=0, pe=1)).error == "INVALID_REQUEST"  # not a replica
    invoke(c, heartbeat_op(w.book[2002], w.book[2002].epoch, want_fence=True))
    assert invoke(c, alter(w, 2000, [2000, 2001, 2002], le=0, pe=1)).error == "INELIGIBLE_REPLICA"


def test_leadership_moves_and_stale_leaders_are_fenced() -> None:
    fake, w, c = setup()
    invoke(c, heartbeat_op(w.book[2000], w.book[2000].epoch, want_fence=True))  # the leader is fenced
    p = fake.topics["isr-0"].parts[0]
    assert p.leader == 2001 and p.leader_epoch == 1
    stale = invoke(c, alter(w, 2000, [2000, 2001], le=0, pe=0))
    assert (stale.type, stale.error) == ("fail", "FENCED_LEADER_EPOCH")
    invoke(c, broker_read("isr", "read", "n1", topic="isr-0", partition=0))
    b = w.beliefs["isr-0"]
    assert (b.leader, b.leader_epoch) == (2001, 1) and b.partition_epoch >= 1
    # the belief's partition epoch is learnt by trying: INVALID_UPDATE_VERSION moves it up
    for _ in range(5):
        done = invoke(c, alter(w, 2001, [2001, 2002], le=1, pe=b.partition_epoch))
        if done.type == "ok":
            break
        assert done.error == "INVALID_UPDATE_VERSION"
    assert done.type == "ok" and done.value["isr"] == [2001, 2002]


def test_an_unchanged_isr_is_acknowledged_with_the_same_epoch() -> None:
    fake, w, c = setup()
    done = invoke(c, alter(w, 2000, [2000, 2001, 2002], le=0, pe=0))  # the ISR it already has
    assert done.type == "ok" and done.value["partition_epoch"] == 0  # as Kafka: no record, same epoch
    assert fake.topics["isr-0"].parts[0].partition_epoch == 0


def correct_run(seed: int) -> tuple[list[dict[str, Any]], Any]:
    fake = FakeKafka(session_timeout_s=0.4, rng=random.Random(seed), p_timeout=0.02, p_lost=0.02,
                     p_not_controller=0.02)
    return run("isr", fake, seconds=2.5, seed=seed)


def test_generated_history_on_a_correct_cluster() -> None:
    lines, _w = correct_run(4)
    alters = completions(lines, "alter")
    assert Counter(x["type"] for x in alters)["ok"] >= 3
    errors = Counter(x["error"] for x in alters if x["type"] == "fail")
    assert len(errors) >= 3, errors  # stale leaders, stale versions, old incarnations...
    assert {x["workload"] for x in lines} == {"isr", "registry", "topics"}
    assert stale_alters(lines) == []
    v = verdicts(lines, ("registry", "topics"))
    assert v == {"registry": True, "topics": True}


def test_isr_model_accepts_a_correct_cluster() -> None:
    lines, _w = correct_run(4)
    assert verdicts(lines, ("isr",)) == {"isr": True}


def test_a_controller_ignoring_the_partition_epoch_is_caught() -> None:
    # The run is timed by the event loop, so whether a stale alter is sent and accepted in a way
    # the history can contradict varies; the bug must show and be caught within a few seeds.
    for seed in range(5, 10):
        fake = FakeKafka(session_timeout_s=0.4, rng=random.Random(seed), bugs=frozenset({"alter-ignores-epoch"}))
        lines, w = run("isr", fake, seconds=2.5, seed=seed)
        if stale_alters(lines) and verdicts(lines, w.models)["isr"] is False:
            return
    raise AssertionError("a controller accepting stale partition epochs went unnoticed in 5 runs")


def test_agents_rotate_and_their_topics_move_to_new_topics_on_the_fresh_ids() -> None:
    """An hour-long soak stays checkable: agents retire after their lifetime (unregistered, a fresh
    broker id in their place), each topic placed on a retired agent is deleted and a topic under a
    new name is placed on the current agents; every model still accepts the history."""
    fake = FakeKafka(session_timeout_s=0.12, rng=random.Random(3))
    lines, _w = run("isr", fake, seconds=6, seed=3)
    invokes = [x for x in lines if x["type"] == "invoke"]
    retired = {x["value"]["broker"] for x in invokes if x["f"] == "unregister"}
    assert len(retired) >= 2, retired
    pool = set(range(2000, 2004))
    creates = [x["value"] for x in invokes if x["f"] == "create" and x["value"]["topic"].startswith("isr-")]
    fresh = [c for c in creates if set(c["assignment"][0]) - pool]
    assert fresh, "no topic was placed on a fresh agent id"
    assert not {c["topic"] for c in fresh} & {"isr-0", "isr-1"}  # new names: new keys of the isr model
    deleted = {x["value"]["topic"] for x in lines if x["f"] == "delete" and x["type"] == "ok"}
    assert deleted & {"isr-0", "isr-1"}, deleted  # the first topics sat on the first agents
    finals = {x["value"]["topic"] for x in invokes if x["f"] == "read" and x["value"].get("final")}
    assert finals and not finals & deleted  # the final reads are of the topics in use at the end
    assert verdicts(lines, ("registry", "topics", "isr")) == {"registry": True, "topics": True, "isr": True}


def _ctx(seed: int, time: float = 0.0) -> Any:
    from kraftlab.workloads.generator import Context

    return Context(time=time, process=0, worker=0, node="n1", nodes=["n1"], rng=random.Random(seed))


def test_alters_propose_joiners_the_controller_must_refuse() -> None:
    """A leader's view lags: an expansion draws its joiner from the whole replica set — fenced,
    stalled, unregistered — and a re-registered member is sometimes named at an older broker
    epoch, or a broker holding no replica joins; the controller must refuse each (rule reach of
    IsrJoinersEligible and IsrWithinReplicas)."""
    w = IsrWorkload(["n1"], agents=5, topics=1)
    b = w.beliefs["isr-0"]
    b.topic_id, b.leader, b.isr = "00000000-0000-0000-0000-000000000001", 2000, (2000,)
    leader, fenced, gone = (w.book[x] for x in b.replicas)
    leader.registered("i0", 10)
    fenced.registered("i1", 11)  # fenced (never unfenced)
    fenced.registered("i1b", 15)  # re-registered: epoch 11 is an older registration's
    gone.forget()  # unregistered
    seen: Counter[str] = Counter()
    for seed in range(400):
        v = w._alter_op(_ctx(seed), "isr-0", b).value
        joiners = set(v["isr"]) - {2000}
        epochs = dict(map(tuple, v["isr_epochs"]))
        seen["fenced"] += fenced.id in joiners and epochs[fenced.id] == 15
        seen["old_epoch"] += fenced.id in joiners and epochs[fenced.id] == 11
        seen["unregistered"] += gone.id in joiners and epochs[gone.id] == -1
        seen["non_replica"] += bool(joiners - set(b.replicas))
    assert all(seen[k] >= 3 for k in ("fenced", "old_epoch", "unregistered", "non_replica")), seen


def test_stalled_agents_fall_silent_past_the_session_then_heartbeat_on_as_the_same_registration() -> None:
    from kraftlab.workloads.registry import due_for_heartbeat, stall, stalled

    w = IsrWorkload(["n1"], agents=2, topics=1)
    a = w.book[2000]
    a.registered("i0", 7)
    inv = stall(a, 0.0, 12.0, random.Random(1))
    assert inv.f == "heartbeat" and inv.value["epoch"] == 7
    assert stalled(w.book, 5.0) and due_for_heartbeat(w.book, 5.0, 1.5) is None
    assert not stalled(w.book, 12.0) and due_for_heartbeat(w.book, 12.0, 1.5) is a  # same epoch, past the session


def test_a_replaced_incarnation_speaks_as_a_zombie() -> None:
    from kraftlab.workloads.registry import zombie_op

    w = IsrWorkload(["n1"], agents=1, topics=1)
    a = w.book[2000]
    a.registered("old", 3)
    assert zombie_op(a, random.Random(1)) is None  # nothing replaced yet
    a.registered("new", 9)
    sent = [zombie_op(a, random.Random(s)) for s in range(100)]
    beats = [x.value for x in sent if x is not None and x.f == "heartbeat"]
    regs = [x.value for x in sent if x is not None and x.f == "register"]
    assert beats and all(v["epoch"] == 3 and v["zombie"] for v in beats)
    assert regs and all(v["incarnation"] == "old" and v["zombie"] for v in regs)


def test_generated_history_refuses_ineligible_joiners_and_stays_valid() -> None:
    lines, _w = correct_run(4)
    errors = Counter(x["error"] for x in completions(lines, "alter") if x["type"] == "fail")
    assert errors["INELIGIBLE_REPLICA"] >= 1, errors
    assert verdicts(lines, ("isr", "registry")) == {"isr": True, "registry": True}


def _led_by_2001() -> IsrWorkload:
    """One topic on three registered, heartbeating agents, believed led by 2001 with all three in its ISR."""
    w = IsrWorkload(["n1"], agents=3, topics=1)
    b = w.beliefs["isr-0"]
    b.topic_id, b.leader, b.isr = "00000000-0000-0000-0000-000000000001", 2001, (2000, 2001, 2002)
    for x in w.book.ids:
        w.book[x].registered(f"i{x}", x)
        w.book[x].last_heartbeat = 0.0
    return w


def test_leaders_shut_down_and_stall_too() -> None:
    """Half the lifecycle ops of a topic's replicas are its believed leader's: a controlled shutdown
    of a partition leader is what ShutDownWhileLeading judges."""
    seen: Counter[str] = Counter()
    for seed in range(3000):
        w = _led_by_2001()
        inv = w.next_op(_ctx(seed, time=0.1))
        if inv.f == "heartbeat" and inv.value["want_shut_down"]:
            seen["leader shuts down" if inv.value["broker"] == 2001 else "follower shuts down"] += 1
    assert seen["leader shuts down"] > seen["follower shuts down"] >= 1, seen


def test_live_replicas_are_decommissioned_leaders_and_followers() -> None:
    """Now and then an operator unregisters a live replica (its topics then retire), the believed leader
    half the time, so the controller must take a leader and an ISR member out at once
    (NoIneligibleLeader and FencedLeavesIsr reached by unregistration) — leaders and followers both."""
    seen: Counter[str] = Counter()
    for seed in range(3000):
        w = _led_by_2001()
        inv = w.next_op(_ctx(seed, time=0.1))
        if inv.f == "unregister":
            seen["leader" if inv.value["broker"] == 2001 else "follower"] += 1
            assert "isr-0" not in w.beliefs and inv.value["broker"] not in w.book.ids  # retired, replaced
    assert seen["leader"] >= 1 and seen["follower"] >= 1 and sum(seen.values()) >= 10, seen


def test_a_led_topics_ops_are_alters_and_now_and_then_every_kind_of_replica_lifecycle() -> None:
    """Of the ops on a topic with a believed leader, most are AlterPartitions and about P_LIFECYCLE
    are a replica's lifecycle event — a shutdown, a stall, an offline spell (WantFence, held), a
    live decommission, a new incarnation — so that alters keep meeting ineligible replicas."""
    from kraftlab.workloads.isr import P_LIFECYCLE

    seen: Counter[str] = Counter()
    runs = 4000
    for seed in range(runs):
        w = _led_by_2001()
        inv = w.next_op(_ctx(seed, time=0.1))
        v = inv.value
        kind = ("alter" if inv.f == "alter" else "read" if inv.f == "read" else
                "shut-down" if inv.f == "heartbeat" and v["want_shut_down"] else
                "offline" if inv.f == "heartbeat" and v["want_fence"] else
                "stall" if inv.f == "heartbeat" else inv.f)
        seen[kind] += 1
        if kind == "offline":
            assert w.book[v["broker"]].offline_until is not None and w.book[v["broker"]].offline_until > 0.1
    lifecycle = runs - seen["alter"] - seen["read"]
    assert 0.5 * P_LIFECYCLE * runs < lifecycle < 1.5 * P_LIFECYCLE * runs, seen
    assert all(seen[k] >= 10 for k in ("shut-down", "offline", "stall", "unregister", "register")), seen
