"""The registry workload's ops against the fake controller: registration epochs, heartbeats
(stale epochs refused, unfencing), duplicate incarnations, unregistration, zombies, reads."""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

from wl_harness import completions, invoke, open_client, run, verdicts

from kraftlab.workloads.agents import heartbeat_op, register_op, unregister_op
from kraftlab.workloads.fake_kafka import FakeKafka
from kraftlab.workloads.ops import broker_read
from kraftlab.workloads.registry import RegistryWorkload


def setup() -> tuple[FakeKafka, RegistryWorkload, object]:
    fake = FakeKafka()
    w = RegistryWorkload(["n1", "n2", "n3"], agents=3, zombies=1)
    return fake, w, open_client(fake, w.handlers())


def test_register_heartbeat_unregister() -> None:
    fake, w, c = setup()
    rng = random.Random(1)
    a = w.book[1001]
    first = invoke(c, register_op(a, rng))
    assert first.type == "ok" and first.value["epoch"] == fake.brokers[1001].epoch == a.epoch
    done = invoke(c, heartbeat_op(a, a.epoch))
    assert done.type == "ok" and done.value["fenced"] is False  # caught up, want_fence false: unfenced
    read = invoke(c, broker_read("registry", "read", "n2", api="Metadata"))
    assert read.value == {"unfenced": [1001]}
    read = invoke(c, broker_read("registry", "read", "n3", api="DescribeCluster"))
    assert read.value == {"unfenced": [1001]}
    dup = invoke(c, register_op(a, rng))  # a new incarnation while the old one's lease lives
    assert (dup.type, dup.error) == ("fail", "DUPLICATE_BROKER_REGISTRATION")
    stale = invoke(c, heartbeat_op(a, a.epoch - 1, zombie=True))
    assert (stale.type, stale.error) == ("fail", "STALE_BROKER_EPOCH")
    assert invoke(c, unregister_op(a)).type == "ok"
    assert a.epoch is None and 1001 not in fake.brokers
    gone = invoke(c, heartbeat_op(w.book[1001], first.value["epoch"]))
    assert (gone.type, gone.error) == ("fail", "BROKER_ID_NOT_REGISTERED")
    again = invoke(c, unregister_op(w.book[1001]))
    assert (again.type, again.error) == ("fail", "BROKER_ID_NOT_REGISTERED")


def test_new_incarnation_after_the_lease_expired_gets_a_larger_epoch() -> None:
    now = [0.0]
    fake = FakeKafka(clock=lambda: now[0], session_timeout_s=5.0)
    w = RegistryWorkload(["n1", "n2", "n3"], agents=1, zombies=1)
    c = open_client(fake, w.handlers())
    rng = random.Random(2)
    a = w.book[1000]
    old = invoke(c, register_op(a, rng)).value["epoch"]
    now[0] = 6.0
    new = invoke(c, register_op(a, rng)).value["epoch"]
    assert new > old and a.epochs == [old, new]
    # the old incarnation, a zombie now, is refused
    assert invoke(c, heartbeat_op(a, old, zombie=True)).error == "STALE_BROKER_EPOCH"


def test_controlled_shutdown_is_acknowledged_and_the_agent_stays_silent() -> None:
    fake, w, c = setup()
    a = w.book[1002]
    invoke(c, register_op(a, random.Random(3)))
    invoke(c, heartbeat_op(a, a.epoch))
    done = invoke(c, heartbeat_op(a, a.epoch, want_shut_down=True))
    assert done.type == "ok" and done.value["should_shut_down"] is True
    assert fake.brokers[1002].shutting_down


def test_generated_history_has_zombies_duplicates_and_checks_valid() -> None:
    fake = FakeKafka(session_timeout_s=0.4, rng=random.Random(5), p_timeout=0.02, p_lost=0.02,
                     p_not_controller=0.02)
    lines, w = run("registry", fake, seconds=2.0, seed=5)
    errors = Counter(x["error"] for x in completions(lines, "heartbeat", "fail"))
    assert errors["STALE_BROKER_EPOCH"] > 0
    assert Counter(x["error"] for x in completions(lines, "register", "fail"))["DUPLICATE_BROKER_REGISTRATION"] > 0
    zombie = [x for x in lines if x["type"] == "invoke" and x["f"] == "heartbeat" and x["value"].get("zombie")]
    assert zombie
    assert completions(lines, "register", "info") or completions(lines, "heartbeat", "info")
    assert len(completions(lines, "unregister", "ok")) > 0
    reads = [x for x in lines if x["f"] == "read" and x["type"] == "ok"]
    assert any(r["value"]["unfenced"] for r in reads)
    assert verdicts(lines, w.models) == {"registry": True}


def test_a_controller_accepting_stale_epochs_is_caught() -> None:
    fake = FakeKafka(session_timeout_s=0.4, rng=random.Random(6), bugs=frozenset({"accept-stale-epoch"}))
    lines, w = run("registry", fake, seconds=2.0, seed=6)
    assert verdicts(lines, w.models) == {"registry": False}


def test_a_controller_reusing_epochs_is_caught() -> None:
    fake = FakeKafka(session_timeout_s=0.3, rng=random.Random(7), bugs=frozenset({"reuse-epoch"}))
    lines, w = run("registry", fake, seconds=2.0, seed=7)
    assert verdicts(lines, w.models) == {"registry": False}


def test_a_shut_down_agent_stays_silent_long_enough_to_reach_session_not_fenced() -> None:
    import random

    from kraftlab.workloads.registry import silence

    rng = random.Random(7)
    draws = [silence(9.0, rng) for _ in range(200)]
    assert min(draws) >= 9.0 * 1.2  # always past the lease: a correct controller fences it
    # often past session + slack + confirmation (9 + 3 + 1 s): the fencing checker can see a miss
    assert sum(d > 13.0 for d in draws) > 100


def test_agents_rotate_to_fresh_broker_ids_and_each_key_stays_short() -> None:
    from kraftlab.workloads.registry import LIFETIME

    fake = FakeKafka(session_timeout_s=0.4, rng=random.Random(8), p_timeout=0.02, p_lost=0.02)
    # 7 s: agents spend part of the run silent (shut down, stalled), so reaching a lifetime of ops takes longer
    lines, w = run("registry", fake, seconds=7.0, seed=8)
    sent = Counter(x["value"]["broker"] for x in lines if x["type"] == "invoke" and "broker" in x["value"])
    assert len(sent) > 6  # fresh ids took the place of decommissioned agents
    # an agent is retired once quiet after its lifetime: its key never grows far past it
    assert max(sent.values()) <= LIFETIME[1] + 20
    last = {}
    for x in lines:
        if x["type"] == "invoke" and "broker" in (x["value"] or {}):
            last[x["value"]["broker"]] = x["f"]
    # six agents live at any time; every id decommissioned for a fresh one ends with its unregistration
    assert sum(f == "unregister" for f in last.values()) >= len(sent) - 6
    assert verdicts(lines, w.models) == {"registry": True}


def test_rotation_wraps_within_the_books_span_and_skips_live_ids() -> None:
    from kraftlab.workloads.agents import ID_SPAN, AgentBook

    book = AgentBook.pool(1000, 3, zombies=1)
    seen = set()
    for _ in range(2 * ID_SPAN):
        old = book[book.ids[0]]
        fresh = book.rotate(old)
        assert fresh.zombie == old.zombie and fresh.id != old.id
        assert 1000 <= fresh.id < 1000 + ID_SPAN and len(book.agents) == 3
        seen.add(fresh.id)
    assert len(seen) == ID_SPAN


def test_an_agent_whose_registrations_keep_ending_unknown_is_decommissioned_sooner() -> None:
    from kraftlab.workloads.generator import Context
    from kraftlab.workloads.registry import MAX_UNKNOWN

    w = RegistryWorkload(["n1", "n2", "n3"], agents=3, zombies=0)
    ctx = Context(time=10.0, process=0, worker=0, node="n1", nodes=["n1", "n2", "n3"], rng=random.Random(4))
    a = w.book[1001]
    # back from a shutdown (its silence over), its registrations keep timing out: a re-send is pending
    a.down_until, a.unknown, a.resend = 5.0, MAX_UNKNOWN - 1, ("inc", "in-doubt")
    w.next_op(ctx)
    assert 1001 in w.book.agents  # not yet past the bound
    a.unknown, a.resend, a.registering_since = MAX_UNKNOWN, ("inc", "in-doubt"), None
    farewell = w.next_op(ctx)
    assert (farewell.f, farewell.value) == ("unregister", {"broker": 1001})
    assert 1001 not in w.book.agents and len(w.book.agents) == 3 and a.resend is None
    # one still silent after its shutdown, or with a registration in flight, waits
    b = w.book[1002]
    b.unknown, b.down_until = MAX_UNKNOWN, 20.0
    c = w.book[1000]
    c.unknown, c.registering_since = MAX_UNKNOWN, 9.5
    assert all(op.f != "unregister" for op in (w.next_op(ctx) for _ in range(20)))


def test_unknown_registrations_per_key_stay_bounded_in_a_generated_history() -> None:
    from kraftlab.workloads.registry import MAX_UNKNOWN

    fake = FakeKafka(session_timeout_s=0.4, rng=random.Random(9), p_timeout=0.3)
    lines, w = run("registry", fake, seconds=4.0, seed=9)
    unknown: Counter[int] = Counter()
    by_process = {}
    for x in lines:
        if x["type"] == "invoke":
            by_process[x["process"]] = x
        elif x["type"] == "info" and by_process[x["process"]]["f"] == "register":
            unknown[by_process[x["process"]]["value"]["broker"]] += 1
    # a key's unknown registrations stay near the bound (those still in flight when it retires)
    assert unknown and max(unknown.values()) <= MAX_UNKNOWN + 6
    assert verdicts(lines, w.models) == {"registry": True}


def test_fenced_agents_sometimes_report_a_metadata_offset_short_of_their_registration() -> None:
    """As a broker still replaying the log does: such a heartbeat is answered not caught up and does not
    unfence the agent (the fake controller keeps KIP-631's rule; an agent that a concurrent heartbeat
    unfenced meanwhile stays unfenced) — so a controller unfencing too early (UnfencedBeforeCaughtUp)
    can be seen."""
    fake = FakeKafka(session_timeout_s=0.4, rng=random.Random(7))
    lines, w = run("registry", fake, seconds=2.0, seed=7)
    open_ops: dict[int, dict[str, Any]] = {}
    short = []
    for x in lines:
        if x["type"] == "invoke":
            open_ops[x["process"]] = x
            continue
        inv = open_ops.pop(x["process"])
        v = inv["value"]
        if inv["f"] == "heartbeat" and x["type"] == "ok" and v["offset"] < v["epoch"]:
            short.append((v, x["value"]))
    assert len(short) >= 3, short
    assert all(not out["caught_up"] for _, out in short)  # never counted as caught up
    # and they leave a fenced agent fenced (one another of its heartbeats unfenced meanwhile stays so)
    assert any(out["fenced"] for _, out in short)
    assert all(0 <= v["offset"] < v["epoch"] and not v["want_fence"] for v, _ in short)
    reads = [x for x in lines if x["f"] == "read" and x["type"] == "ok"]
    assert any(r["value"]["unfenced"] for r in reads)  # agents still get unfenced once caught up
    assert verdicts(lines, w.models) == {"registry": True}


def test_a_stalled_agent_replaced_meanwhile_wakes_as_a_revenant() -> None:
    """A stall past the session may end in a replacement: a new incarnation registers while the
    old process sleeps; when it wakes it speaks with its old epoch or registers its old incarnation
    again (STALE_BROKER_EPOCH / DUPLICATE_BROKER_REGISTRATION: StaleEpochAccepted's and
    ZombieRegistered's reach)."""
    from kraftlab.workloads.agents import AgentBook
    from kraftlab.workloads.generator import Context
    from kraftlab.workloads.registry import lifecycle_op, stall

    def ctx(t: float, seed: int) -> Context:
        return Context(time=t, process=0, worker=0, node="n1", nodes=["n1"], rng=random.Random(seed))

    seen: Counter[str] = Counter()
    for seed in range(40):
        book = AgentBook.pool(1000, 1)
        a = book[1000]
        a.registered("old", 5)
        rng = random.Random(seed)
        stall(a, 0.0, 12.0, rng)
        if a.replace_at is None:
            seen["not replaced"] += 1
            continue
        assert lifecycle_op(book, ctx(a.replace_at - 0.1, seed), 9.0) is None  # silent until then
        inv = lifecycle_op(book, ctx(a.replace_at, seed), 9.0)
        assert inv is not None and inv.f == "register" and inv.value["incarnation"] != "old"
        a.registered(inv.value["incarnation"], 40)  # the replacement is accepted
        woke = lifecycle_op(book, ctx(12.0, seed), 9.0)
        assert woke is not None and woke.value.get("zombie")
        seen["stale heartbeat" if woke.f == "heartbeat" and woke.value["epoch"] == 5 else
             "old incarnation" if woke.f == "register" and woke.value["incarnation"] == "old" else "other"] += 1
    assert seen["not replaced"] >= 5 and seen["stale heartbeat"] >= 5 and seen["old incarnation"] >= 2, seen
    assert seen["other"] == 0


def test_a_due_keepalive_is_now_and_then_the_last_before_a_stall_one_agent_at_a_time() -> None:
    from kraftlab.workloads.agents import AgentBook
    from kraftlab.workloads.generator import Context
    from kraftlab.workloads.registry import lifecycle_op, stalled

    stalls = 0
    for seed in range(300):
        book = AgentBook.pool(1000, 2)
        for a in book.agents.values():
            a.registered(f"i{a.id}", a.id)
        op_ = lifecycle_op(book, Context(time=10.0, process=0, worker=0, node="n1", nodes=["n1"],
                                         rng=random.Random(seed)), 9.0)
        if op_ is not None and stalled(book, 10.0):
            stalls += 1
            quiet = [a for a in book.agents.values() if a.quiet_until]
            assert len(quiet) == 1 and op_.value["broker"] == quiet[0].id and quiet[0].quiet_until >= 10.0 + 9.0 * 1.2
            again = lifecycle_op(book, Context(time=10.0, process=0, worker=0, node="n1", nodes=["n1"],
                                               rng=random.Random(seed)), 9.0)
            assert again is None or again.value["broker"] != quiet[0].id
    assert 1 <= stalls <= 20, stalls


def test_zombies_register_only_incarnations_still_replaced() -> None:
    """An unregistration frees the id (Kafka then accepts an older incarnation as a new one): a
    zombie's registration is only a refusal to test while its incarnation stays replaced."""
    from kraftlab.workloads.agents import AgentBook
    from kraftlab.workloads.registry import zombie_op

    a = AgentBook.pool(1000, 1)[1000]
    a.registered("first", 3)
    a.registered("second", 9)
    sent = [zombie_op(a, random.Random(s)) for s in range(50)]
    assert any(x is not None and x.f == "register" and x.value["incarnation"] == "first" for x in sent)
    a.unregistered()
    a.registered("third", 20)
    sent = [zombie_op(a, random.Random(s)) for s in range(50)]
    assert not any(x is not None and x.f == "register" for x in sent)
    assert any(x is not None and x.f == "heartbeat" and x.value["epoch"] in (3, 9) for x in sent)


def test_a_refused_replacement_is_tried_again_while_the_stall_lasts() -> None:
    """A failover grants every broker a fresh lease, so a replacement may be refused: it is sent again
    every REPLACE_RETRY s while the old process sleeps, and the revenant stays the first one."""
    from kraftlab.workloads.agents import AgentBook
    from kraftlab.workloads.generator import Context
    from kraftlab.workloads.registry import REPLACE_RETRY, lifecycle_op, replace

    book = AgentBook.pool(1000, 1)
    a = book[1000]
    a.registered("old", 5)
    a.last_heartbeat, a.quiet_until = 0.0, 20.0
    first = replace(a, 10.0, random.Random(1))
    a.registering_since = None  # refused: DUPLICATE_BROKER_REGISTRATION
    ctx = Context(time=10.0 + REPLACE_RETRY, process=0, worker=0, node="n1", nodes=["n1"], rng=random.Random(2))
    again = lifecycle_op(book, ctx, 9.0)
    assert again is not None and again.f == "register" and again.value["incarnation"] != first.value["incarnation"]
    assert a.revenant == (5, "old", 20.0) and a.silent(10.0 + REPLACE_RETRY)
    a.registered(again.value["incarnation"], 30)  # accepted: the new process is live, the stall over for it
    assert not a.silent(10.0 + REPLACE_RETRY) and a.revenant == (5, "old", 20.0)


def test_an_agent_gone_offline_keeps_asking_to_be_fenced_until_its_spell_ends() -> None:
    """A broker that asks to be fenced stays offline for a drawn 0.3-1 session timeouts: each of its
    keepalives in that spell asks again (WantFence), the first one after it asks to be unfenced, so
    its fenced window spans its peers' ISR changes rather than one heartbeat interval."""
    from kraftlab.workloads.agents import AgentBook
    from kraftlab.workloads.registry import OFFLINE, go_offline, keepalive

    spells = []
    for seed in range(30):
        rng = random.Random(seed)
        a = AgentBook.pool(1000, 1)[1000]
        a.registered("i", 7)
        first = go_offline(a, 100.0, 9.0, rng)
        assert first.value["want_fence"] and a.offline_until is not None
        spell = a.offline_until - 100.0
        assert 9.0 * OFFLINE[0] <= spell <= 9.0 * OFFLINE[1]
        spells.append(spell)
        t = 100.0
        while t + 1.5 < a.offline_until:
            t += 1.5
            assert keepalive(a, t, 9.0, rng).value["want_fence"], (seed, t)
        back = keepalive(a, 100.0 + spell + 0.01, 9.0, rng)
        assert a.offline_until is None or a.offline_until > 100.0 + spell  # over (or, rarely, a new spell)
        if a.offline_until is None:
            assert not back.value["want_fence"]
    assert max(spells) - min(spells) > 2.0  # drawn, not fixed
    a = AgentBook.pool(1000, 1)[1000]
    a.registered("i", 7)
    go_offline(a, 0.0, 9.0, random.Random(1))
    a.registered("j", 9)  # a new registration: the process is live again
    assert a.offline_until is None
