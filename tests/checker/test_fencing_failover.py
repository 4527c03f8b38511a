"""SessionNotFenced across a controller failover (KAFKA-18138): the new active controller must
lease every broker its committed image holds unfenced, dead ones included, from activation."""

from __future__ import annotations

from typing import Any, ClassVar

from checker_journals import HB, JB, line_of

from kraftlab.checker.fencing import check_fencing
from kraftlab.checker.journal import journals_from

S = 1_000_000_000  # one second in journal `mono` units (ns)


class Clocks(JB):
    """JB with each node on its own monotonic clock (nodes' clocks are unrelated) and explicit times."""

    BASE: ClassVar[dict[int, int]] = {1: 5_000 * S, 2: 70 * S, 3: 123_456 * S}

    def at(self, node: int, sec: float, ev: str, **fields: Any) -> dict[str, Any]:
        e = self.add(node, ev, **fields)
        e["mono"] = self.BASE[node] + int(sec * S)
        e["ts"] = 1_000_000 + node * 3_600_000 + int(sec * 1000)  # wall clocks skewed by hours
        return e


def _check(j: JB) -> dict[str, Any]:
    return check_fencing(journals_from(j.entries, "journal.jsonl"), session_timeout_ms=9000.0, slack_ms=3000.0)


def _failover(broker_fenced_before: bool = False) -> tuple[Clocks, dict[str, Any]]:
    """Controller 1 unfences broker 4 (committed, applied by 1 and 2), then controller 2 takes
    over: its first high-water mark as leader (returned) is its activation."""
    j = Clocks()
    j.at(1, 0, "role", role="leader", epoch=1, leader=1, voted_for=1)
    j.at(1, 1, "fence", broker=4, action="unfence", reason="heartbeat", epoch=5, offset=3)
    for n in (1, 2):
        j.at(n, 1.1, "apply", offset=2, type="RegisterBrokerRecord", crc=1, batch_end=3, broker=4, fenced=True)
        j.at(n, 1.2, "apply", offset=3, type="UnfenceBrokerRecord", crc=2, batch_end=4, broker=4)
    if broker_fenced_before:
        j.at(2, 1.5, "apply", offset=4, type="RegisterBrokerRecord", crc=3, batch_end=5, broker=4, fenced=True)
    j.at(1, 2, "role", role="resigned", epoch=1, leader=1, voted_for=None)
    j.at(2, 3, "role", role="leader", epoch=2, leader=2, voted_for=2)
    active = j.at(2, 3.1, "hw", hw=6, epoch=2)
    return j, active


def _steps(j: Clocks, node: int, start: float, end: float) -> list[dict[str, Any]]:
    """The active controller keeps stepping (quorum samples every second)."""
    return [j.at(node, float(t), "quorum", epoch=2, fetch_age_ms={}, check_quorum_ms=3000)
            for t in range(int(start), int(end) + 1)]


def _session_alarms(res: dict[str, Any]) -> list[dict[str, Any]]:
    return [a for a in res["anomalies"] if a["type"] == "SessionNotFenced"]



def test_inherited_dead_broker_never_fenced_is_reported() -> None:
    j, active = _failover()
    _steps(j, 2, 4, 20)
    alarms = _session_alarms(_check(j))
    assert len(alarms) == 1
    assert "broker 4" in alarms[0]["explanation"] and "became active" in alarms[0]["explanation"]
    assert alarms[0]["entries"][0]["where"] == line_of(j, active)


def test_inherited_dead_broker_fenced_after_the_session_is_clean() -> None:
    j, _ = _failover()
    _steps(j, 2, 4, 11)
    j.at(2, 12.2, "fence", broker=4, action="fence", reason="session timeout", epoch=5, offset=7)
    _steps(j, 2, 13, 30)
    assert _session_alarms(_check(j)) == []


def test_inherited_broker_heartbeating_to_the_new_controller_is_clean() -> None:
    j, _ = _failover()
    for t in range(4, 30, 2):
        j.at(2, t, "decision", api="BrokerHeartbeat", broker=4, broker_epoch=5, **HB, error="NONE")
    assert _session_alarms(_check(j)) == []


def test_heartbeats_that_stop_after_activation_are_judged_from_the_last_one() -> None:
    j, _ = _failover()
    last = j.at(2, 5, "decision", api="BrokerHeartbeat", broker=4, broker_epoch=5, **HB, error="NONE")
    _steps(j, 2, 6, 16)
    assert _session_alarms(_check(j)) == []  # 11 s after the heartbeat: within 9 + 3 s
    _steps(j, 2, 17, 19)
    alarms = _session_alarms(_check(j))
    assert len(alarms) == 1 and alarms[0]["entries"][0]["where"] == line_of(j, last)


def test_paused_new_controller_resigning_at_its_first_step_is_clean() -> None:
    j, _ = _failover()
    j.at(2, 25, "role", role="resigned", epoch=2, leader=2, voted_for=None)  # SIGSTOP for 22 s, then resigns
    _steps(j, 2, 26, 40)
    assert _session_alarms(_check(j)) == []


def test_a_leader_that_never_commits_is_not_active() -> None:
    j = Clocks()
    j.at(2, 1, "apply", offset=3, type="UnfenceBrokerRecord", crc=2, batch_end=4, broker=4)
    j.at(2, 3, "role", role="leader", epoch=2, leader=2, voted_for=2)  # cut off: no high-water mark
    _steps(j, 2, 4, 20)
    assert _session_alarms(_check(j)) == []


def test_a_broker_registered_again_is_fenced_in_the_image_and_not_inherited() -> None:
    j, _ = _failover(broker_fenced_before=True)
    _steps(j, 2, 4, 20)
    assert _session_alarms(_check(j)) == []


def test_an_older_leaders_fence_committed_at_takeover_is_clean() -> None:
    j, _ = _failover()
    j.at(2, 3.2, "apply", offset=5, type="FenceBrokerRecord", crc=4, batch_end=6, broker=4)
    _steps(j, 2, 4, 20)
    assert _session_alarms(_check(j)) == []


def test_an_older_leaders_unfence_committed_at_takeover_is_inherited() -> None:
    j = Clocks()
    j.at(2, 3, "role", role="leader", epoch=2, leader=2, voted_for=2)
    j.at(2, 3.1, "hw", hw=6, epoch=2)
    taken_over = j.at(2, 3.2, "apply", offset=4, type="UnfenceBrokerRecord", crc=2, batch_end=5, broker=4)
    _steps(j, 2, 4, 20)
    alarms = _session_alarms(_check(j))
    assert len(alarms) == 1 and alarms[0]["entries"][0]["where"] == line_of(j, taken_over)


def test_own_unfence_applied_after_own_fence_is_not_inherited() -> None:
    j, _ = _failover()
    j.at(2, 4, "fence", broker=7, action="unfence", reason="heartbeat", epoch=9, offset=8)
    j.at(2, 4.5, "fence", broker=7, action="fence", reason="unregistered", epoch=9, offset=9)
    j.at(2, 5, "apply", offset=8, type="UnfenceBrokerRecord", crc=5, batch_end=9, broker=7)
    j.at(2, 5.1, "apply", offset=9, type="UnregisterBrokerRecord", crc=6, batch_end=10, broker=7)
    j.at(2, 12.2, "fence", broker=4, action="fence", reason="session timeout", epoch=5, offset=10)
    _steps(j, 2, 13, 30)
    assert _session_alarms(_check(j)) == []


def test_a_restarted_node_forgets_its_old_image() -> None:
    j, _ = _failover()
    j.at(2, 3.5, "start", roles=["controller"], voters=[1, 2, 3], log_start=0, log_end=4, hw=0)
    j.at(2, 4, "snapshot", action="load", offset=4)
    j.at(2, 5, "role", role="leader", epoch=3, leader=2, voted_for=2)
    j.at(2, 5.1, "hw", hw=8, epoch=3)
    _steps(j, 2, 6, 25)
    assert _session_alarms(_check(j)) == []


def test_a_restart_that_finds_damaged_storage_ends_the_term() -> None:
    j, _ = _failover()
    j.at(2, 4, "decision", api="BrokerHeartbeat", broker=4, broker_epoch=5, **HB, error="NONE")
    # killed at 5 s; restarts refuse to start on damaged records (no `start` line, only `corruption`)
    j.at(2, 20, "corruption", path="x.log", offset=2, reason="CRC mismatch", below_hw=True)
    j.at(2, 25, "corruption", path="x.log", offset=2, reason="CRC mismatch", below_hw=True)
    assert _session_alarms(_check(j)) == []


def test_a_new_controller_replaying_a_backlog_is_judged_from_its_replay() -> None:
    """Its replay lags: it applies the entries below its first HW 5 s later, and only then takes
    over (and leases) the image; it fences the dead broker a session after that."""
    j, _ = _failover()
    j.at(2, 8.1, "apply", offset=5, type="TopicRecord", crc=9, batch_end=6)
    _steps(j, 2, 9, 17)
    j.at(2, 17.2, "fence", broker=4, action="fence", reason="session timeout", epoch=5, offset=7)
    _steps(j, 2, 18, 30)
    assert _session_alarms(_check(j)) == []
    j, _ = _failover()
    replayed = j.at(2, 8.1, "apply", offset=5, type="TopicRecord", crc=9, batch_end=6)
    _steps(j, 2, 9, 30)  # never fenced: judged from the replay
    alarms = _session_alarms(_check(j))
    assert len(alarms) == 1 and "became active" in alarms[0]["explanation"]
    assert alarms[0]["entries"][0]["where"] == line_of(j, replayed)
