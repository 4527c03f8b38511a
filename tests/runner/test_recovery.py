"""Recovery after the final heal: the runner's watch (kraftlab.recovery) against a fake cluster, and
the `recovery` checker's verdicts and explanations."""

from __future__ import annotations

from typing import Any

from kraftlab.checker.journal import journals_from
from kraftlab.checker.recovery import check_recovery
from kraftlab.nemesis.package import Timing
from kraftlab.recovery import recovery_bound, wait_recovered
from kraftlab.scrape import HW, LAG


class FakeCluster:
    """Healthy after `healthy_after` polls; node n2 down until started; n3 lags behind forever if `lag`."""

    def __init__(self, healthy_after: int | None, lag: bool = False) -> None:
        self.polls = 0
        self.healthy_after = healthy_after
        self.lag = lag
        self.up = {"n1": True, "n2": False, "n3": True}
        self.started: list[str] = []

    def nodes(self) -> list[str]:
        return list(self.up)

    def running(self, node: str) -> bool:
        return self.up[node]

    def start(self, node: str) -> None:
        self.up[node] = True
        self.started.append(node)

    def health(self) -> tuple[bool, str]:
        self.polls += 1
        if self.healthy_after is not None and self.polls > self.healthy_after:
            return True, "leader 1, brokers [1, 2, 3] unfenced"
        return False, "leader 1, brokers not registered and unfenced: [3]"

    def describe_failure(self, node: str) -> str:
        return f"{node}: last lines of its log"

    def fatal_errors(self, nodes: list[str]) -> dict[str, str]:
        return {}

    def samples(self) -> list[dict[str, Any]]:
        return [{"node": n, "time": 0, "metrics": {HW: 100.0, LAG: 40.0 if (n == "n3" and self.lag) else 0.0}}
                for n in self.nodes()]


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        self.t += 1.0
        return self.t


def test_the_bound_follows_the_timeouts() -> None:
    assert recovery_bound(Timing()) < recovery_bound(Timing(fetch_s=4.0, election_s=2.0, session_s=18.0))
    assert 25 <= recovery_bound(Timing()) <= 45


def test_a_cluster_that_comes_back_is_recovered_and_its_timeline_kept() -> None:
    c = FakeCluster(healthy_after=3)
    rec = wait_recovered(c, c.samples, 30, poll=0, monotonic=Clock())
    assert c.started == ["n2"] and rec.restarted == ["n2"]
    assert rec.recovered and rec.seconds_to_healthy is not None and rec.goal_offset == 100.0
    assert [t["status"] for t in rec.timeline] == ["leader 1, brokers not registered and unfenced: [3]",
                                                   "leader 1, brokers [1, 2, 3] unfenced"]
    assert check_recovery(rec.to_json())["valid"] is True


def test_a_cluster_stuck_past_the_bound_is_invalid_naming_the_node_and_its_last_state() -> None:
    c = FakeCluster(healthy_after=None)
    rec = wait_recovered(c, c.samples, 5, poll=0, monotonic=Clock())
    assert not rec.recovered and "log_tail" not in rec.nodes["n1"]
    journals = journals_from([
        {"ts": 1, "mono": 1, "node": 3, "ev": "start", "roles": ["broker"]},
        {"ts": 2, "mono": 2, "node": 3, "ev": "role", "role": "observer", "epoch": 4, "leader": 1, "voted_for": None},
        {"ts": 3, "mono": 3, "node": 3, "ev": "broker_state", "broker": 3, "state": "RECOVERY"},
    ])
    res = check_recovery(rec.to_json(), journals, {"n1": 1, "n2": 2, "n3": 3})
    assert res["valid"] is False
    (a,) = res["anomalies"]
    assert a["type"] == "Unrecovered"
    assert "n3 (node 3)" in a["explanation"] and "broker state RECOVERY" in a["explanation"]
    assert "never healthy" in a["explanation"] and "n1" not in a["explanation"].split("|")[0].split(":")[-1]
    assert [e["ev"] for e in a["entries"]] == ["start", "role", "broker_state"]


def test_healthy_but_a_node_behind_is_not_recovered() -> None:
    c = FakeCluster(healthy_after=0, lag=True)
    rec = wait_recovered(c, c.samples, 5, poll=0, monotonic=Clock())
    assert rec.healthy and not rec.caught_up and "not caught up" in rec.why
    res = check_recovery(rec.to_json(), None, {"n1": 1, "n2": 2, "n3": 3})
    assert res["valid"] is False and "n3 (node 3): applied the metadata log up to 60.0, short of 100" in \
        res["anomalies"][0]["explanation"]
