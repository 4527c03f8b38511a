"""The nemesis against real kraft-node processes on a five-namespace lab (3 combined controllers,
2 brokers): isolating the active controller moves leadership, a clock bump changes the active
controller's view of broker leases, kill/pause/disk faults act on the node, and the cluster is
healthy again after each heal."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from nemesis_labs import namespace_lab

from kraftlab.control.lab import Lab
from kraftlab.nemesis.cleanup import ledger_for
from kraftlab.nemesis.core import Nemesis

pytestmark = [pytest.mark.netns, pytest.mark.e2e,
              pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root")]


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    from kraftlab.deploy import Deployment

    with namespace_lab(tmp_path_factory.mktemp("labs"), "nee", 5) as lab:
        d = Deployment.create(lab)
        d.deploy(wait=60)
        yield d


@pytest.fixture
def nemesis(deployment: object) -> Iterator[Nemesis]:
    lab: Lab = deployment.lab  # type: ignore[attr-defined]
    n = Nemesis(lab.name, deployment, ledger=ledger_for(lab.name), seed=5)  # type: ignore[arg-type]
    try:
        yield n
    finally:
        n.close()
        n.heal_all()
        assert n.status() == {}
        deployment.wait_healthy(60)  # type: ignore[attr-defined]


def journal_after(deployment: object, node: str, start: int) -> list[dict]:
    path = Path(deployment.paths(node).journal)  # type: ignore[attr-defined]
    return [json.loads(line) for line in path.read_text().splitlines()[start:] if line.strip()]


def journal_len(deployment: object, node: str) -> int:
    return len(Path(deployment.paths(node).journal).read_text().splitlines())  # type: ignore[attr-defined]


def wait_for(pred: object, timeout: float) -> object:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = pred()  # type: ignore[operator]
        if got:
            return got
        time.sleep(0.25)
    pytest.fail(f"timed out after {timeout}s")


def test_isolating_the_active_controller_moves_leadership(deployment: object, nemesis: Nemesis) -> None:
    old = deployment.active_controller()  # type: ignore[attr-defined]
    done = nemesis.invoke("start-partition", {"topology": "isolate-controller"})
    assert done.type == "ok" and done.value["grudge"][old] == sorted(set(deployment.nodes()) - {old})  # type: ignore[attr-defined]
    new = wait_for(lambda: (lambda a: a if a not in (None, old) else None)(deployment.active_controller()), 20)  # type: ignore[attr-defined]
    assert new in deployment.controllers()  # type: ignore[attr-defined]


def test_clock_bump_on_the_active_controller_expires_broker_leases(deployment: object, nemesis: Nemesis) -> None:
    # A 30-s jump on the active controller expires every broker session in its view, and also its own
    # check-quorum timer (no fetch "for 30 s"): whichever of the two the node acts on first wins. When
    # it resigns first, the fence never happens there, so the bump is tried on the next leader.
    for _attempt in range(3):
        leader = deployment.active_controller()  # type: ignore[attr-defined]
        start = journal_len(deployment, leader)
        real_before = time.time() * 1000
        assert nemesis.invoke("clock-bump", {"nodes": [leader], "delta_ms": 30_000}).type == "ok"

        def outcome() -> tuple[str, list[dict]] | None:
            events = journal_after(deployment, leader, start)  # noqa: B023 — evaluated within this attempt
            fences = [e for e in events if e["ev"] == "fence" and e["action"] == "fence" and "session" in e["reason"]]
            if fences:
                return "fenced", fences
            if any(e["ev"] == "role" and e["role"] != "leader" for e in events):
                return "resigned", []
            return None

        kind, events = wait_for(outcome, 10)  # type: ignore[misc]
        if kind == "fenced":
            assert all(e["ts"] >= real_before + 29_000 for e in events)  # the node's own clock jumped
            assert {e["broker"] for e in events} & {4, 5}
            return
        wait_for(lambda: deployment.active_controller() not in (None, leader), 20)  # type: ignore[attr-defined]  # noqa: B023
    pytest.fail("the bumped active controller resigned (check quorum) before fencing any broker, three times")


def test_kill_and_pause_act_on_the_node(deployment: object, nemesis: Nemesis) -> None:
    assert nemesis.invoke("kill", {"nodes": ["n4"]}).type == "ok"
    assert not deployment.running("n4")  # type: ignore[attr-defined]
    assert nemesis.invoke("pause", {"nodes": ["n5"]}).type == "ok"
    pid = deployment.pid("n5")  # type: ignore[attr-defined]
    assert Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "T"
    healed = nemesis.heal_all()
    assert [(c.f, c.type) for c in healed] == [("resume", "ok"), ("restart", "ok")]
    assert deployment.running("n4")  # type: ignore[attr-defined]


def test_damaged_committed_log_is_refused_then_a_wiped_broker_recovers(deployment: object,
                                                                         nemesis: Nemesis) -> None:
    start = journal_len(deployment, "n5")
    done = nemesis.invoke("start-disk", {"nodes": ["n5"], "damage": "truncate-tail", "amount": 7})
    assert done.type == "ok", done
    assert not deployment.running("n5")  # type: ignore[attr-defined]
    healed = nemesis.invoke("stop-disk").value
    assert healed["restarted"] == ["n5"] and healed["refused"] == []
    # Whether the cut reached committed records depends on where the once-a-second high-water
    # mark checkpoint stood at the kill; the node must act on which it was: refuse committed
    # damage (stop; stop-disk then rebuilds the broker-only node, as `wipe` does: a new journal
    # too), or cut an uncommitted torn tail and go on (the storage tests pin each case).
    if healed["rebuilt"] == ["n5"]:
        assert healed["formatted"] == ["n5"] and deployment.running("n5")  # type: ignore[attr-defined]
        deployment.kill("n5")  # type: ignore[attr-defined]
        _wipe_and_recover(nemesis)
        return
    events = wait_for(lambda: [e for e in journal_after(deployment, "n5", start) if e["ev"] == "corruption"], 20)
    assert events and events[0]["path"].endswith(".log"), events
    if events[0]["below_hw"]:  # it refused after stop-disk's watch (a loaded machine): still down
        wait_for(lambda: not deployment.running("n5"), 20)  # type: ignore[attr-defined]
    else:
        truncs = wait_for(lambda: [e for e in journal_after(deployment, "n5", start)
                                   if e["ev"] == "truncate" and e.get("reason") == "corrupt-tail"], 20)
        assert truncs, "an uncommitted torn tail must be cut with a journal line"
        assert healed["rebuilt"] == [] and deployment.running("n5")  # type: ignore[attr-defined]
    if deployment.running("n5"):  # type: ignore[attr-defined]
        deployment.kill("n5")  # type: ignore[attr-defined]
    _wipe_and_recover(nemesis)


def _wipe_and_recover(nemesis: Nemesis) -> None:
    """An operator's way back for a broker: wipe, format again, start; it refetches the metadata log."""
    assert nemesis.invoke("start-disk", {"nodes": ["n5"], "damage": "wipe"}).type == "ok"
    assert nemesis.invoke("stop-disk").value == {
        "restarted": ["n5"], "formatted": ["n5"], "rebuilt": [], "refused": [],
        "outcomes": {"n5": {"damage": "wipe", "zone": None, "outcome": "formatted"}}}
