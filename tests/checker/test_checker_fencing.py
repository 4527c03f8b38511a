"""Fencing invariants: a healthy journal passes; each hand-built violation is reported once,
with the offending entries."""

from __future__ import annotations

from typing import Any

from checker_journals import HB, JB, healthy_fencing, line_of, only_anomaly

from kraftlab.checker.fencing import check_fencing
from kraftlab.checker.history import Event, History
from kraftlab.checker.journal import journals_from


def _check(j: JB, history: History | None = None) -> dict[str, Any]:
    return check_fencing(journals_from(j.entries, "journal.jsonl"), history, session_timeout_ms=9000, slack_ms=1000)



def _line(j: JB, e: dict[str, Any]) -> str:
    return f"journal.jsonl:{j.entries.index(e) + 1}"


def test_healthy_run_passes() -> None:
    res = _check(healthy_fencing())
    assert res["valid"] is True, res["anomalies"]
    assert "SelfFencing" in res["checked"] and "not_checked" not in res


def test_stale_epoch_heartbeat_accepted() -> None:
    j = healthy_fencing()
    j.add(1, "decision", api="BrokerRegistration", broker=4, broker_epoch=9, incarnation="inc-b", error="NONE")
    bad = j.add(1, "decision", api="BrokerHeartbeat", broker=4, broker_epoch=5, **HB, error="NONE")
    a = only_anomaly(_check(j), "StaleEpochAccepted")
    assert a["entries"][-1]["where"] == _line(j, bad)
    # the state before and after, in the rule's terms, for the report
    assert (a["before"], a["after"]) == ("broker 4 registered at broker epoch 9",
                                         "a heartbeat at broker epoch 5 accepted (Kafka answers STALE_BROKER_EPOCH)")


def test_a_heartbeat_decided_before_a_registration_it_is_journalled_after_is_fine() -> None:
    # decisions are journalled when answered (their records committed), but taken on the state as of
    # their `offset`: a heartbeat decided at offset 8 is answered after registration 9 was applied
    j = healthy_fencing()
    j.add(1, "apply", offset=9, type="RegisterBrokerRecord", broker=4, batch_end=10)
    j.add(1, "decision", api="BrokerHeartbeat", broker=4, broker_epoch=5, **HB, error="NONE", offset=8)
    j.add(1, "decision", api="BrokerRegistration", broker=4, broker_epoch=9, incarnation="inc-b", error="NONE",
          offset=9)
    assert _check(j)["valid"] is True
    # decided on a state holding the new registration, it is stale
    bad = j.add(1, "decision", api="BrokerHeartbeat", broker=4, broker_epoch=5, **HB, error="NONE",
                offset=10)
    a = only_anomaly(_check(j), "StaleEpochAccepted")
    assert a["entries"][-1]["where"] == _line(j, bad)


def test_stale_epoch_rejected_is_fine() -> None:
    j = healthy_fencing()
    j.add(1, "decision", api="BrokerRegistration", broker=4, broker_epoch=9, incarnation="inc-b", error="NONE")
    j.add(1, "decision", api="BrokerHeartbeat", broker=4, broker_epoch=5, **HB,
          error="STALE_BROKER_EPOCH")
    assert _check(j)["valid"] is True


def test_old_incarnation_accepted() -> None:
    j = healthy_fencing()
    j.add(1, "decision", api="BrokerRegistration", broker=4, broker_epoch=9, incarnation="inc-b", error="NONE")
    bad = j.add(1, "decision", api="BrokerRegistration", broker=4, broker_epoch=12, incarnation="inc-a",
                error="NONE")
    a = only_anomaly(_check(j), "OldIncarnationAccepted")
    assert a["entries"][-1]["where"] == _line(j, bad)
    assert a["before"] == "broker 4 registered as incarnation inc-b, which replaced inc-a"
    assert a["after"] == "the replaced incarnation inc-a registered again"


def test_silent_broker_not_fenced() -> None:
    j = JB()
    j.add(1, "role", role="leader", epoch=1, leader=1, voted_for=1)
    j.add(1, "decision", api="BrokerRegistration", broker=4, broker_epoch=5, incarnation="a", error="NONE")
    last = j.add(1, "fence", broker=4, action="unfence", reason="heartbeat", epoch=5)
    late = j.add(1, "lease", broker=7, expires_ms=0)
    late["mono"] = last["mono"] + 11_000_000_000  # 11 s later, nothing fenced broker 4
    still = j.add(1, "lease", broker=7, expires_ms=0)
    still["mono"] = late["mono"] + 1_000_000_000  # and the controller is still active a second later
    a = only_anomaly(_check(j), "SessionNotFenced")
    assert a["entries"][0]["where"] == _line(j, last)
    assert a["entries"][-1]["where"] == _line(j, still)


def test_a_registration_retry_of_the_live_incarnation_renews_the_session() -> None:
    """A clean run (seed 629): a registration request of the live incarnation, delayed in a lossy
    network past its process's death, reached a new controller, which answered it with the same epoch
    and renewed the session from then, as Kafka does — not a silence."""
    j = JB()
    j.add(1, "role", role="leader", epoch=1, leader=1, voted_for=1)
    j.add(1, "decision", api="BrokerRegistration", broker=4, broker_epoch=5, incarnation="a", error="NONE")
    last = j.add(1, "fence", broker=4, action="unfence", reason="heartbeat", epoch=5)
    retry = j.add(1, "decision", api="BrokerRegistration", broker=4, broker_epoch=5, incarnation="a", error="NONE")
    retry["mono"] = last["mono"] + 6_000_000_000
    late = j.add(1, "lease", broker=7, expires_ms=0)
    late["mono"] = last["mono"] + 11_000_000_000  # 11 s after the unfence, 5 s after the retry
    still = j.add(1, "lease", broker=7, expires_ms=0)
    still["mono"] = late["mono"] + 1_000_000_000
    assert _check(j)["valid"] is True
    retry["error"] = "DUPLICATE_BROKER_REGISTRATION"  # a refused one is no sign of this broker's life
    only_anomaly(_check(j), "SessionNotFenced")


def test_controller_resuming_from_a_pause_and_resigning_is_fine() -> None:
    j = JB()
    j.add(1, "role", role="leader", epoch=1, leader=1, voted_for=1)
    last = j.add(1, "fence", broker=4, action="unfence", reason="heartbeat", epoch=5)
    resumed = j.add(1, "role", role="resigned", epoch=1, leader=1, voted_for=None)
    resumed["mono"] = last["mono"] + 15_000_000_000  # paused 15 s; its first step resigns
    assert _check(j)["valid"] is True


def test_controller_whose_clock_jumped_and_that_stalled_until_it_resigned_is_fine() -> None:
    # the clock nemesis moves the controller's clock 17 s at once: a queued heartbeat is handled at
    # the new time (the first step that shows broker 4 overdue), then the process stalls 8 s and its
    # next step is its resignation — it never had a step while active in which to fence
    j = JB()
    j.add(1, "role", role="leader", epoch=1, leader=1, voted_for=1)
    last = j.add(1, "fence", broker=4, action="unfence", reason="heartbeat", epoch=5)
    jumped = j.add(1, "lease", broker=7, expires_ms=0)
    jumped["mono"] = last["mono"] + 17_000_000_000
    resigned = j.add(1, "role", role="resigned", epoch=1, leader=1, voted_for=None)
    resigned["mono"] = jumped["mono"] + 8_000_000_000
    assert _check(j)["valid"] is True


def test_controller_resuming_from_a_pause_and_fencing_at_once_is_fine() -> None:
    j = JB()
    j.add(1, "role", role="leader", epoch=1, leader=1, voted_for=1)
    last = j.add(1, "fence", broker=4, action="unfence", reason="heartbeat", epoch=5)
    queued = j.add(1, "lease", broker=7, expires_ms=0)
    queued["mono"] = last["mono"] + 15_000_000_000  # a queued request is handled first
    fenced = j.add(1, "fence", broker=4, action="fence", reason="session timeout", epoch=5)
    fenced["mono"] = queued["mono"] + 50_000_000  # then the tick fences
    assert _check(j)["valid"] is True


def test_broker_fenced_in_time_is_fine() -> None:
    j = JB()
    j.add(1, "role", role="leader", epoch=1, leader=1, voted_for=1)
    last = j.add(1, "fence", broker=4, action="unfence", reason="heartbeat", epoch=5)
    f = j.add(1, "fence", broker=4, action="fence", reason="session", epoch=5)
    f["mono"] = last["mono"] + 9_500_000_000
    late = j.add(1, "lease", broker=7, expires_ms=0)
    late["mono"] = last["mono"] + 20_000_000_000
    assert _check(j)["valid"] is True


def test_fenced_broker_put_in_isr() -> None:
    j = healthy_fencing()
    bad = j.add(1, "decision", api="AlterPartition", broker=5, broker_epoch=6, incarnation=None, error="NONE",
                topic="t", partition=0, leader=5, leader_epoch=1, partition_epoch=3, isr=[4, 5])
    a = only_anomaly(_check(j), "FencedInIsr")
    assert a["entries"][-1]["where"] == _line(j, bad)


def test_leader_outside_isr() -> None:
    j = healthy_fencing()
    j.add(1, "decision", api="AlterPartition", broker=5, broker_epoch=6, incarnation=None, error="NONE",
          topic="u", partition=1, leader=5, leader_epoch=1, partition_epoch=1, isr=[6])
    only_anomaly(_check(j), "LeaderOutsideIsr")


def test_partition_epoch_going_back() -> None:
    j = healthy_fencing()
    bad = j.add(1, "decision", api="AlterPartition", broker=5, broker_epoch=6, incarnation=None, error="NONE",
                topic="t", partition=0, leader=5, leader_epoch=2, partition_epoch=2, isr=[5])
    a = only_anomaly(_check(j), "EpochsGoBack")
    assert a["entries"][-1]["where"] == _line(j, bad)


def test_a_recreated_topic_starts_its_partition_epochs_again() -> None:
    """Two controllers accept different states at one partition epoch of one topic name: fine when the
    name was deleted and created again in between (another topic id), EpochsGoBack within one topic id."""
    def two_incarnations(second_id: str) -> JB:
        j = JB()
        j.add(1, "decision", api="AlterPartition", broker=4, broker_epoch=5, error="NONE", topic="t4",
              topic_id="id-1", partition=0, leader=4, leader_epoch=0, partition_epoch=1, isr=[5, 4],
              replicas=[5, 4, 3])
        j.add(2, "decision", api="AlterPartition", broker=4, broker_epoch=9, error="NONE", topic="t4",
              topic_id=second_id, partition=0, leader=4, leader_epoch=0, partition_epoch=1, isr=[4, 2],
              replicas=[4, 2, 5])
        return j

    assert _check(two_incarnations("id-2"))["valid"] is True
    a = only_anomaly(_check(two_incarnations("id-1")), "EpochsGoBack")
    assert "t4-0: two different states accepted with partition epoch 1" in a["explanation"]


def test_repeated_no_op_alter_partition_is_fine() -> None:
    j = healthy_fencing()
    fence = j.entries.pop()  # repeat the last AlterPartition before broker 4 is fenced
    j.add(1, "decision", api="AlterPartition", broker=4, broker_epoch=5, incarnation=None, error="NONE",
          topic="t", partition=0, leader=4, leader_epoch=1, partition_epoch=2, isr=[4, 5], changed=False)
    j.entries.append(fence)
    assert _check(j)["valid"] is True
    j.entries[-2]["changed"] = True  # a change must bring a new partition epoch
    only_anomaly(_check(j), "EpochsGoBack")


def test_metadata_view_going_back() -> None:
    j = healthy_fencing()
    j.add(2, "apply", offset=3, type="TopicRecord", crc=1)
    bad = j.add(2, "apply", offset=2, type="TopicRecord", crc=1)
    a = only_anomaly(_check(j), "MetadataGoesBack")
    assert a["entries"][-1]["where"] == _line(j, bad)


def _ev(i: int, p: int, typ: str, f: str, value: Any) -> Event:
    return Event(i, p, typ, f, value, line=i + 1)


def test_acknowledged_create_lost() -> None:
    h = History([
        _ev(0, 0, "invoke", "create", {"topic": "a"}), _ev(1, 0, "ok", "create", {"topic": "a"}),
        _ev(2, 1, "invoke", "create", {"topic": "b"}), _ev(3, 1, "ok", "create", {"topic": "b"}),
        _ev(4, 0, "invoke", "list", None), _ev(5, 0, "ok", "list", {"topics": ["a"]}),
    ])
    a = only_anomaly(_check(healthy_fencing(), h), "AckedLost")
    assert "topic b" in a["explanation"] and "line 4" in a["explanation"]


def test_another_workloads_list_is_not_the_final_topic_list() -> None:
    """The acl workload lists ACLs (and creates them): neither is a topic list or a topic creation."""
    h = History([
        _ev(0, 0, "invoke", "create", {"topic": "a"}), _ev(1, 0, "ok", "create", {"topic": "a"}),
        _ev(2, 0, "invoke", "list", None), _ev(3, 0, "ok", "list", {"topics": ["a"]}),
        _ev(4, 1, "invoke", "create", {"acl": ["TOPIC", "x"]}), _ev(5, 1, "ok", "create", {"acl": ["TOPIC", "x"]}),
        _ev(6, 1, "invoke", "list", None), _ev(7, 1, "ok", "list", {"acls": []}),
    ])
    assert _check(healthy_fencing(), h)["valid"] is True


def test_fence_journalled_before_an_earlier_logged_decision_is_fine() -> None:
    """A fence is journalled when decided, a decision when its records commit: with offsets, the
    checker orders them by log position, and only a decision later in the log is a violation."""
    j = JB()
    fence = j.add(1, "fence", broker=5, action="shutdown", reason="controlled shutdown", epoch=6, offset=232)
    decision = j.add(1, "decision", api="AlterPartition", broker=5, broker_epoch=6, incarnation=None, error="NONE",
                     topic="t", partition=0, leader=5, leader_epoch=1, partition_epoch=3, isr=[4, 5], offset=231)
    assert check_fencing(journals_from(j.entries), None)["valid"] is True
    decision["offset"] = 233  # now it took effect after the shutdown
    a = only_anomaly(check_fencing(journals_from(j.entries), None), "FencedInIsr")
    assert [e["offset"] for e in a["entries"]] == [fence["offset"], 233]


def test_a_fence_does_not_outlive_the_controllers_term() -> None:
    """Controller 1 shut broker 5 down, lost leadership (another controller unfenced 5 meanwhile),
    and later, leader again, accepted an ISR with 5: no violation. In one term it is one."""
    j = JB()
    j.add(1, "fence", broker=5, action="shutdown", reason="controlled shutdown", epoch=6, offset=10)
    j.add(1, "role", role="follower", epoch=2, leader=2, voted_for=None)
    j.add(1, "role", role="leader", epoch=3, leader=1, voted_for=1)
    j.add(1, "decision", api="AlterPartition", broker=4, broker_epoch=7, incarnation=None, error="NONE", topic="t",
          partition=0, leader=4, leader_epoch=2, partition_epoch=5, isr=[4, 5], offset=40)
    assert check_fencing(journals_from(j.entries), None)["valid"] is True
    del j.entries[1:3]  # no leadership change between the fence and the decision
    only_anomaly(check_fencing(journals_from(j.entries), None), "FencedInIsr")


def _beat(j: JB, node: int, offset: int, fenced: bool, broker: int = 4, epoch: int = 5) -> dict[str, Any]:
    return j.add(node, "decision", api="BrokerHeartbeat", broker=broker, broker_epoch=epoch, error="NONE",
                 fenced=fenced, shut_down=False, metadata_offset=offset)


def test_unfenced_before_caught_up_is_found_and_a_caught_up_unfence_is_not() -> None:
    j = healthy_fencing(beats=0)  # no heartbeat has shown it caught up yet
    _beat(j, 1, 3, True)  # behind its registration (offset 5): stays fenced
    _beat(j, 1, 5, False)  # caught up: unfenced
    _beat(j, 1, 7, False)
    assert check_fencing(journals_from(j.entries))["valid"] is True

    j = healthy_fencing(beats=0)  # no heartbeat has shown it caught up yet
    bad = _beat(j, 1, 2, False)  # unfenced at offset 2, registered at 5
    _beat(j, 1, 6, False)
    a = only_anomaly(check_fencing(journals_from(j.entries, file="journal.jsonl")), "UnfencedBeforeCaughtUp")
    assert "metadata offset 2, below its registration at offset 5" in a["explanation"]
    assert a["entries"][0]["where"] == line_of(j, bad)


def test_a_caught_up_heartbeat_on_one_controller_does_not_excuse_another_without_a_shared_clock() -> None:
    j = healthy_fencing(beats=0)  # no heartbeat has shown it caught up yet
    _beat(j, 1, 9, False)
    _beat(j, 2, 1, False)  # controller 2 never saw it caught up (no shared clock to order the two)
    assert only_anomaly(check_fencing(journals_from(j.entries)), "UnfencedBeforeCaughtUp")


def test_an_unfence_whose_answer_was_never_sent_shows_the_broker_caught_up() -> None:
    """Controller 1 unfenced the broker on a caught-up heartbeat and lost its leadership before
    answering (no decision journalled); controller 2, inheriting the unfenced broker, answers a
    lagging heartbeat "unfenced": the unfence's own offset is the evidence. An unfence at an offset
    short of the registration is a violation by itself."""
    j = healthy_fencing(beats=0)  # no heartbeat has shown it caught up yet
    j.add(1, "fence", broker=4, action="unfence", reason="heartbeat", epoch=5, metadata_offset=6)
    _beat(j, 1, 1, False)
    assert check_fencing(journals_from(j.entries))["valid"] is True

    j = healthy_fencing(beats=0)  # no heartbeat has shown it caught up yet
    bad = j.add(1, "fence", broker=4, action="unfence", reason="heartbeat", epoch=5, metadata_offset=2)
    a = only_anomaly(check_fencing(journals_from(j.entries, file="journal.jsonl")), "UnfencedBeforeCaughtUp")
    assert "unfenced broker 4 (broker epoch 5)" in a["explanation"] and a["entries"][0]["where"] == line_of(j, bad)


def _timed_beat(j: JB, at_ms: int, node: int = 1) -> dict[str, Any]:
    return j.add(node, "decision", api="BrokerHeartbeat", broker=4, broker_epoch=5, error="NONE", fenced=False,
                 shut_down=False, metadata_offset=9, at_ms=at_ms)


def _session_fence(j: JB, at_ms: int, node: int = 1) -> dict[str, Any]:
    """Broker 4 unfenced again (a caught-up heartbeat), then fenced for its session."""
    j.add(node, "fence", broker=4, action="unfence", reason="heartbeat", epoch=5)
    return j.add(node, "fence", broker=4, action="fence", reason="session timeout", epoch=5, at_ms=at_ms)


def test_a_fence_within_the_session_of_an_accepted_heartbeat_is_found() -> None:
    j = healthy_fencing()
    _timed_beat(j, 1_000)
    _timed_beat(j, 4_000)
    bad = _session_fence(j, 9_500)  # 5.5 s after the last accepted heartbeat: the lease (9 s) was live
    a = only_anomaly(check_fencing(journals_from(j.entries, file="journal.jsonl"), session_timeout_ms=9000),
                     "FencedWithLiveSession")
    assert "broker 4 (broker epoch 5) for session timeout 5500 ms after accepting its heartbeat" in a["explanation"]
    assert a["entries"][0]["where"] == line_of(j, bad)


def test_a_fence_after_the_session_or_in_another_life_or_by_request_is_not() -> None:
    j = healthy_fencing()
    _timed_beat(j, 1_000)
    _session_fence(j, 10_000)  # 9 s of silence: due
    j.add(1, "fence", broker=4, action="unfence", reason="heartbeat", epoch=5)
    j.add(1, "fence", broker=4, action="fence", reason="requested", epoch=5, at_ms=10_500)  # want_fence
    _timed_beat(j, 20_000, node=2)  # another controller's clock
    _session_fence(j, 21_000)
    j.add(1, "start", roles=["controller"], voters=[1], log_start=0, log_end=0, hw=0)
    _session_fence(j, 22_000)  # a new process life: its clock starts over
    _timed_beat(j, 23_000)  # journalled after the fence below (answers wait for commit) — still counted
    res = check_fencing(journals_from(j.entries), session_timeout_ms=9000)
    assert [a for a in res["anomalies"] if a["type"] == "FencedWithLiveSession"] == []
    late = healthy_fencing()
    _session_fence(late, 30_000)
    _timed_beat(late, 25_000)  # accepted before the fence, journalled after it
    assert only_anomaly(check_fencing(journals_from(late.entries), session_timeout_ms=9000), "FencedWithLiveSession")


def _registration(j: JB, incarnation: str, epoch: int, at_ms: int) -> dict[str, Any]:
    return j.add(1, "decision", api="BrokerRegistration", broker=4, broker_epoch=epoch, incarnation=incarnation,
                 error="NONE", at_ms=at_ms)


def test_a_new_incarnation_registered_over_a_live_session_is_found() -> None:
    j = healthy_fencing()
    _registration(j, "inc-a", 5, 500)
    _timed_beat(j, 2_000)
    bad = _registration(j, "inc-b", 12, 6_000)  # 4 s after inc-a's heartbeat: its session (9 s) is live
    a = only_anomaly(check_fencing(journals_from(j.entries, file="journal.jsonl"), session_timeout_ms=9000),
                     "RegisteredOverLiveSession")
    assert "new incarnation of broker 4 (inc-b) 4000 ms after accepting a heartbeat of incarnation inc-a" in a[
        "explanation"]
    assert a["entries"][0]["where"] == line_of(j, bad)


def test_a_new_incarnation_after_the_session_a_shutdown_an_unregistration_or_a_new_term_is_not() -> None:
    for between in ("expired", "shutdown", "unregistered", "new term", "retry"):
        j = healthy_fencing()
        _registration(j, "inc-a", 5, 500)
        _timed_beat(j, 2_000)
        at = 6_000
        if between == "expired":
            at = 11_500
        elif between == "shutdown":
            j.add(1, "fence", broker=4, action="shutdown", reason="controlled shutdown", epoch=5, at_ms=3_000)
        elif between == "unregistered":
            j.add(1, "decision", api="UnregisterBroker", broker=4, broker_epoch=5, error="NONE", at_ms=3_000)
        elif between == "new term":
            j.add(1, "role", role="resigned", epoch=1, leader=1, voted_for=1)
            j.add(1, "role", role="leader", epoch=3, leader=1, voted_for=1)
        _registration(j, "inc-a" if between == "retry" else "inc-b", 5 if between == "retry" else 12, at)
        res = check_fencing(journals_from(j.entries), session_timeout_ms=9000)
        assert [a for a in res["anomalies"] if a["type"] == "RegisteredOverLiveSession"] == [], between
