"""Registry agents re-send a registration with the same incarnation, as real brokers do: a new
process after an `info` (the old one is retired), now and then a duplicate after an `ok`.
Against the fake controller: the re-send's outcomes (ok/fail/info), its epoch on a correct
controller and on one with KAFKA-16952 planted (`reregister-bumps-epoch`), and the histories."""

from __future__ import annotations

import io
import json
import random
from collections import Counter
from typing import Any

import pytest
from wl_harness import epoch_bumps, invoke, open_client, run, verdicts

from kraftlab.checker.history import Completion
from kraftlab.workloads.agents import register_op, resend_op
from kraftlab.workloads.client import Invocation
from kraftlab.workloads.fake_kafka import FakeKafka
from kraftlab.workloads.generator import Context
from kraftlab.workloads.history import HistoryWriter
from kraftlab.workloads.registry import P_RESEND, RESEND_BACKOFF, RegistryWorkload

BUG = frozenset({"reregister-bumps-epoch"})


class Dice(random.Random):
    """A seeded random source whose `random()` always rolls `roll` (choices stay seeded)."""

    def __init__(self, roll: float, seed: int = 0) -> None:
        super().__init__(seed)
        self.roll = roll

    def random(self) -> float:
        return self.roll


def ctx(roll: float, time: float = 0.0, process: int = 7) -> Context:
    return Context(time=time, process=process, worker=0, node="n1", nodes=["n1", "n2", "n3"], rng=Dice(roll))


def setup(bugs: frozenset[str] = frozenset()) -> tuple[FakeKafka, RegistryWorkload, Any]:
    fake = FakeKafka(bugs=bugs)
    w = RegistryWorkload(["n1", "n2", "n3"], agents=3, zombies=0)
    return fake, w, open_client(fake, w.handlers())


def lost_registration(fake: FakeKafka, w: RegistryWorkload, c: Any, b: int = 1001) -> tuple[Invocation, int]:
    """A registration the controller applies but whose answer is lost: (its invocation, the epoch)."""
    fake.p_lost = 1.0
    first = register_op(w.book[b], random.Random(b))
    done = invoke(c, first)
    fake.p_lost = 0.0
    assert done.type == "info" and "ConnectionLost" in str(done.error)
    return first, fake.brokers[b].epoch


@pytest.mark.parametrize("bugs", [frozenset(), BUG])
def test_an_in_doubt_registration_is_resent_by_a_new_process_with_the_same_incarnation(bugs: frozenset[str]) -> None:
    fake, w, c = setup(bugs)
    first, applied = lost_registration(fake, w, c)
    assert w.book[1001].resend == (first.value["incarnation"], "in-doubt") and w.book[1001].epoch is None
    held = w.next_op(ctx(P_RESEND["in-doubt"] - 0.01))  # rolled: held for the backoff, no new incarnation
    assert w.book[1001].resend_due == RESEND_BACKOFF["in-doubt"] > 0
    assert held.value.get("incarnation") is None or held.value["broker"] != 1001
    again = w.next_op(ctx(0.99, time=RESEND_BACKOFF["in-doubt"]))
    assert (again.f, again.value) == ("register", {**first.value, "retry": "in-doubt"})
    assert w.book[1001].resend is None  # sent once, then the agent moves on
    done = invoke(open_client(fake, w.handlers(), process=8), again)  # a new process: the old one is retired
    assert done.type == "ok"
    if bugs:
        assert done.value["epoch"] > applied and fake.brokers[1001].fenced  # a new epoch, fenced again
    else:
        assert done.value["epoch"] == applied
    assert w.book[1001].epoch == done.value["epoch"]


def test_a_resend_not_rolled_is_dropped_and_a_new_incarnation_cancels_it() -> None:
    fake, w, c = setup()
    first, _ = lost_registration(fake, w, c)
    nxt = w.next_op(ctx(P_RESEND["in-doubt"] + 0.01))
    assert not (nxt.f == "register" and nxt.value.get("incarnation") == first.value["incarnation"])
    assert w.book[1001].resend is None
    lost_registration(fake, w, c, 1002)
    register_op(w.book[1002], random.Random(5))  # the agent moved on to a new incarnation
    assert w.book[1002].resend is None
    w.book[1002].in_doubt(first.value["incarnation"])  # an old incarnation's late doubt is not re-sent
    assert w.book[1002].resend is None


def test_a_duplicate_send_after_an_ok_gets_the_same_epoch() -> None:
    fake, w, c = setup()
    a = w.book[1000]
    first = invoke(c, register_op(a, random.Random(1)))
    assert first.type == "ok" and a.resend == (a.incarnation, "duplicate")
    dup = w.next_op(ctx(P_RESEND["duplicate"] - 0.01))
    assert dup.value == {"broker": 1000, "incarnation": a.incarnation, "retry": "duplicate"}
    done = invoke(c, dup)
    assert done.type == "ok" and done.value["epoch"] == first.value["epoch"] == fake.brokers[1000].epoch


def test_resend_outcomes_map_to_ok_fail_info() -> None:
    fake, w, c = setup()
    a = w.book[1001]
    assert invoke(c, register_op(a, random.Random(1))).type == "ok"
    # a new incarnation while the old one's lease lives: refused, but the answer is lost
    second, _ = lost_registration(fake, w, c)
    assert fake.brokers[1001].incarnation != second.value["incarnation"]
    fake.p_not_controller, fake.rng = 1.0, Dice(0.0)  # NOT_CONTROLLER: not definite
    done = invoke(c, resend_op(a))
    assert (done.type, done.error) == ("info", "NOT_CONTROLLER") and a.resend == (second.value["incarnation"],
                                                                                   "in-doubt")
    fake.p_not_controller, fake.p_timeout = 0.0, 1.0
    done = invoke(open_client(fake, w.handlers(), process=2), resend_op(a))
    assert done.type == "info" and "RequestTimedOut" in str(done.error) and a.resend is not None
    fake.p_timeout = 0.0
    done = invoke(open_client(fake, w.handlers(), process=3), resend_op(a))
    assert (done.type, done.error) == ("fail", "DUPLICATE_BROKER_REGISTRATION")  # definite: another one is live
    assert a.resend is None


def test_a_registration_that_could_not_be_sent_is_kept_for_a_resend() -> None:
    fake, w, _c = setup()
    fake.down = {f"n{i}:9093" for i in (1, 2, 3)}  # no controller reachable
    first = register_op(w.book[1002], random.Random(4))
    done = invoke(open_client(fake, w.handlers(), process=4), first)
    assert done.type == "fail" and str(done.error).startswith("not-sent")
    assert w.book[1002].resend == (first.value["incarnation"], "in-doubt")
    fake.down = set()
    w.next_op(ctx(0.1))
    again = w.next_op(ctx(0.1, time=1.0))
    assert invoke(open_client(fake, w.handlers(), process=5), again).type == "ok"
    assert fake.brokers[1002].incarnation.hex == first.value["incarnation"].replace("-", "")


class Script:
    """A hand-made history of client calls against the fake, written as the runner writes it."""

    def __init__(self) -> None:
        self.out = io.StringIO()
        self.h = HistoryWriter(stream=self.out)

    def call(self, process: int, inv: Invocation) -> None:
        self.h.record(process, "invoke", inv.f, inv.value, node="n1", **(inv.extra or {}))

    def done(self, process: int, inv: Invocation, c: Completion) -> None:
        self.h.record(process, c.type, inv.f, c.value, node="n1", error=c.error, **(inv.extra or {}))

    def lines(self) -> list[dict[str, Any]]:
        return [json.loads(x) for x in self.out.getvalue().splitlines()]


def lost_then_retried(bugs: frozenset[str]) -> list[dict[str, Any]]:
    """Agent 1001's registration is applied but its answer lost while 1002 registers (a later
    epoch, acknowledged first); a new process re-sends 1001's incarnation; 1000 registers and
    re-sends after its ok."""
    fake, w, c = setup(bugs)
    s = Script()
    lost = register_op(w.book[1001], random.Random(1))
    other = register_op(w.book[1002], random.Random(2))
    s.call(0, lost)
    s.call(1, other)
    fake.p_lost = 1.0
    s.done(0, lost, invoke(c, lost))
    fake.p_lost = 0.0
    s.done(1, other, invoke(c, other))
    again = resend_op(w.book[1001])
    s.call(2, again)
    s.done(2, again, invoke(c, again))
    first = register_op(w.book[1000], random.Random(3))
    s.call(1, first)
    s.done(1, first, invoke(c, first))
    dup = resend_op(w.book[1000])
    s.call(1, dup)
    s.done(1, dup, invoke(c, dup))
    return s.lines()


def test_the_scripted_history_carries_the_bug_and_only_with_it() -> None:
    good, bad = lost_then_retried(frozenset()), lost_then_retried(BUG)
    assert [x["type"] for x in good] == [x["type"] for x in bad] == ["invoke"] * 2 + ["info"] + ["ok"] + [
        "invoke", "ok"] * 3
    assert epoch_bumps(good) == []
    assert len(epoch_bumps(bad)) == 1  # 1000's duplicate (1001's first answer was never seen)


def test_the_registry_model_judges_the_scripted_histories() -> None:
    assert verdicts(lost_then_retried(frozenset()), ("registry",)) == {"registry": True}
    assert verdicts(lost_then_retried(BUG), ("registry",)) == {"registry": False}


def resend_counts(lines: list[dict[str, Any]]) -> Counter[tuple[str, str]]:
    """(why, completion type) of every re-sent registration."""
    calls: dict[Any, dict[str, Any]] = {}
    out: Counter[tuple[str, str]] = Counter()
    for x in lines:
        if x["type"] == "invoke":
            calls[x["process"]] = x
        elif x["f"] == "register" and (why := calls[x["process"]]["value"].get("retry")):
            out[(why, x["type"])] += 1
    return out


def generated(seed: int, bugs: frozenset[str]) -> list[dict[str, Any]]:
    fake = FakeKafka(session_timeout_s=0.4, rng=random.Random(seed), p_timeout=0.05, p_lost=0.08, bugs=bugs)
    return run("registry", fake, seconds=2.0, seed=seed)[0]


def test_generated_histories_resend_and_a_correct_controller_keeps_epochs() -> None:
    lines = generated(1, frozenset())
    counts = resend_counts(lines)
    assert sum(n for (why, _), n in counts.items() if why == "in-doubt") > 0
    assert counts[("in-doubt", "ok")] + counts[("duplicate", "ok")] > 0
    assert epoch_bumps(lines) == []
    assert verdicts(lines, ("registry",)) == {"registry": True}


def test_generated_histories_expose_the_planted_bug() -> None:
    """Whether a bump is seen depends on timing (a re-send must follow a seen ok): a few runs."""
    runs = [generated(seed, BUG) for seed in range(1, 4)]
    bumps = [len(epoch_bumps(lines)) for lines in runs]
    valid = [verdicts(lines, ("registry",))["registry"] for lines in runs]
    assert any(bumps) and not all(valid), (bumps, valid)


def test_an_agent_registers_once_at_a_time() -> None:
    fake = FakeKafka()
    w = RegistryWorkload(["n1", "n2", "n3"], agents=1, zombies=0)
    first = w.next_op(ctx(0.1))
    assert first.f == "register" and w.book[1000].registering(1.0, w.session_timeout)
    assert w.next_op(ctx(0.1)).f == "read"  # in flight: no second incarnation meanwhile
    fake.p_timeout, fake.rng = 1.0, Dice(0.9)  # not applied, no answer
    assert invoke(open_client(fake, w.handlers()), first).type == "info"
    assert not w.book[1000].registering(1.0, w.session_timeout)
    assert w.next_op(ctx(0.1)).f == "read"  # the re-send waits for its backoff; nothing new meanwhile
    again = w.next_op(ctx(0.1, time=1.0))
    assert again.value == {**first.value, "retry": "in-doubt"}
    stuck = Context(time=w.session_timeout + 2, process=9, worker=0, node="n1", nodes=["n1"], rng=Dice(0.1, seed=1))
    new = w.next_op(stuck)  # the re-send was never answered: given up after a session timeout
    assert new.f == "register" and new.value["incarnation"] != first.value["incarnation"]
