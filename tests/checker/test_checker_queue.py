"""The queue checker on planted histories: each anomaly class found by its own rule (and named in
Kafka's words), the healthy histories valid, unknown when nothing could be judged."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from queue_histories import QH, healthy

from kraftlab.checker.history import Event, History
from kraftlab.checker.queue import RULES, check_queue
from kraftlab.checker.queue.observe import QueueShapeError


def broken(res: dict[str, Any]) -> set[str]:
    return {a["type"] for a in res["anomalies"]}


def only(res: dict[str, Any], rule: str) -> dict[str, Any]:
    found = [a for a in res["anomalies"] if a["type"] == rule]
    assert found, (rule, res["explanation"])
    return found[0]


def test_healthy_history_is_valid() -> None:
    res = check_queue(healthy().history())
    assert res["valid"] is True, res["explanation"]
    assert set(res["checked"]) == set(RULES)
    assert res["stats"]["sends"] == {"acknowledged": 6, "failed": 0, "unknown": 0}
    assert res["stats"]["polls"] == {"completed": 3, "final_reads": 1, "records": 12}
    assert res["stats"]["partitions"]["q-0"]["final_read"] is True


def test_unknown_sends_read_or_not_are_fine() -> None:
    h = QH().send(1, "q-0", "a", 0).send(2, "q-0", "b", None, status="info").send(3, "q-0", "c", None, "fail")
    h.send(4, "q-0", "d", None, status="info")
    h.final(9, "q-0", [(0, "a"), (1, "d")])  # b never landed, d did: both allowed for an unknown outcome
    assert check_queue(h.history())["valid"] is True


def test_lost_write_acknowledged_record_read_past_but_never_returned() -> None:
    h = QH().send(1, "q-0", "a", 0).send(1, "q-0", "b", 1).send(2, "q-0", "c", 2)
    h.poll(5, {"q-0": 0}, {"q-0": [(0, "a")]})
    h.final(9, "q-0", [(0, "a"), (2, "c")], hw=3)
    res = check_queue(h.history())
    assert res["valid"] is False
    a = only(res, "LostWrite")
    assert a["key"] == "q-0" and a["offsets"][0] == 1 and a["values"] == ["b"]
    assert "acknowledged at offset 1" in a["explanation"] and "no poll ever returned b" in a["explanation"]
    assert "final read of q-0" in a["explanation"]
    assert [o["f"] for o in a["ops"]][:2] == ["send", "poll"]
    assert a["rule"] == RULES["LostWrite"]


def test_unseen_acknowledged_above_the_final_high_water_mark() -> None:
    h = QH().send(1, "q-0", "a", 0).send(1, "q-0", "b", 1).send(2, "q-0", "c", 2)
    h.final(9, "q-0", [(0, "a")], hw=1)  # the partition ended at offset 1: b and c acknowledged above it
    res = check_queue(h.history())
    a = only(res, "Unseen")
    assert a["offsets"] == [1, 2] and "high-water mark 1" in a["explanation"]
    assert "LostWrite" not in broken(res)


def test_unseen_without_final_read_is_not_judged_and_unknown() -> None:
    h = QH().send(1, "q-0", "a", 0).send(1, "q-0", "b", 1)
    h.poll(5, {"q-0": 0}, {"q-0": [(0, "a")]})
    res = check_queue(h.history())
    assert res["valid"] == "unknown"
    assert "unseen not judged" in res["explanation"] and "q-0: 1 acknowledged record" in res["explanation"]


def test_nothing_read_back_is_unknown_not_valid() -> None:
    res = check_queue(QH().send(1, "q-0", "a", 0).history())
    assert res["valid"] == "unknown"
    assert "no poll completed" in res["explanation"]


def test_duplicate_one_value_at_two_offsets() -> None:
    h = QH().send(1, "q-0", "a", 0).send(1, "q-0", "b", 1)
    h.final(9, "q-0", [(0, "a"), (1, "b"), (2, "a")])
    res = check_queue(h.history())
    a = only(res, "Duplicate")
    assert a["offsets"] == [0, 2] and "sent once (p1, to q-0)" in a["explanation"]
    assert broken(res) == {"Duplicate"}


def test_inconsistent_offset_two_values_at_one_offset() -> None:
    h = QH().send(1, "q-0", "a", 0).send(2, "q-0", "b", 1)
    h.poll(5, {"q-0": 0}, {"q-0": [(0, "a"), (1, "b")]})
    h.final(9, "q-0", [(0, "a"), (1, "x")])  # offset 1 rewritten with a value nobody sent
    res = check_queue(h.history())
    a = only(res, "InconsistentOffset")
    assert a["offsets"] == [1] and set(a["values"]) == {"b", "x"}
    assert "offset 1 of partition q-0 holds 2 different values" in a["explanation"]
    assert "UnexpectedValue" in broken(res)


def test_offset_reused_by_two_acknowledged_sends() -> None:
    h = QH().send(1, "q-0", "a", 0).send(2, "q-0", "b", 0)
    h.final(9, "q-0", [(0, "a")])
    res = check_queue(h.history())
    assert {"InconsistentOffset", "LostWrite"} <= broken(res)


def test_poll_skip_consumer_jumps_over_records_others_saw() -> None:
    h = QH()
    for i in range(5):
        h.send(1, "q-0", i, i)
    h.poll(5, {"q-0": 0}, {"q-0": [(0, 0), (1, 1)]})
    h.poll(5, {"q-0": 2}, {"q-0": [(4, 4)]})  # fetched from 2, got 4 first: 2 and 3 skipped
    h.final(9, "q-0", [(i, i) for i in range(5)])
    res = check_queue(h.history())
    a = only(res, "PollSkip")
    assert a["offsets"] == [2, 2, 3, 4]
    assert "fetched q-0 from offset 2 and got offset 4 next" in a["explanation"]
    assert broken(res) == {"PollSkip"}


def test_poll_skip_inside_one_poll() -> None:
    h = QH()
    for i in range(4):
        h.send(1, "q-0", i, i)
    h.poll(5, {"q-0": 0}, {"q-0": [(0, 0), (2, 2), (3, 3)]})
    h.final(9, "q-0", [(i, i) for i in range(4)])
    a = only(check_queue(h.history()), "PollSkip")
    assert "read q-0 offset 0 and got offset 2 next" in a["explanation"]


def test_gaps_nobody_saw_are_not_skips() -> None:
    """Offsets may have gaps (transaction markers): a jump over offsets no op saw is no skip."""
    h = QH().send(1, "q-0", "a", 0).send(1, "q-0", "b", 5)
    h.poll(5, {"q-0": 0}, {"q-0": [(0, "a"), (5, "b")]})
    h.final(9, "q-0", [(0, "a"), (5, "b")])
    assert check_queue(h.history())["valid"] is True


def test_nonmonotonic_poll_goes_back() -> None:
    h = QH()
    for i in range(4):
        h.send(1, "q-0", i, i)
    h.poll(5, {"q-0": 0}, {"q-0": [(0, 0), (1, 1), (3, 3), (2, 2)]})
    h.poll(6, {"q-0": 3}, {"q-0": [(1, 1)]})
    h.final(9, "q-0", [(i, i) for i in range(4)])
    res = check_queue(h.history())
    found = [a for a in res["anomalies"] if a["type"] == "NonmonotonicPoll"]
    assert len(found) == 2
    assert "read q-0 offset 3 and then offset 2" in found[0]["explanation"]
    assert "fetched q-0 from offset 3 and got offset 1, below it" in found[1]["explanation"]


def test_nonmonotonic_send_one_producer() -> None:
    h = QH().send(1, "q-0", "a", 1).send(1, "q-0", "b", 0)
    h.final(9, "q-0", [(0, "b"), (1, "a")])
    res = check_queue(h.history())
    a = only(res, "NonmonotonicSend")
    assert a["offsets"] == [1, 0]
    assert "ReorderedSend" not in broken(res)


def test_reordered_send_across_producers_in_real_time() -> None:
    h = QH().send(1, "q-0", "a", 1).send(2, "q-0", "b", 0)
    h.final(9, "q-0", [(0, "b"), (1, "a")])
    a = only(check_queue(h.history()), "ReorderedSend")
    assert "acknowledged at offset 1" in a["explanation"] and "at offset 0, below it" in a["explanation"]


def test_concurrent_sends_may_land_in_either_order() -> None:
    h = QH()
    h.invoke_send(1, "q-0", "a")
    h.invoke_send(2, "q-0", "b")
    h.ack_send(1, "q-0", "a", 1)
    h.ack_send(2, "q-0", "b", 0)
    h.final(9, "q-0", [(0, "b"), (1, "a")])
    assert check_queue(h.history())["valid"] is True


def test_aborted_read_value_of_a_failed_send() -> None:
    h = QH().send(1, "q-0", "a", 0).send(2, "q-0", "b", None, status="fail")
    h.final(9, "q-0", [(0, "a"), (1, "b")])
    a = only(check_queue(h.history()), "AbortedRead")
    assert "failed definitely (NOT_ENOUGH_REPLICAS" in a["explanation"]


def test_unexpected_value_in_the_wrong_partition() -> None:
    h = QH().send(1, "q-0", "a", 0).send(1, "q-1", "b", 0)
    h.final(9, "q-0", [(0, "a"), (1, "b")])
    h.final(9, "q-1", [(0, "b")])
    res = check_queue(h.history())
    a = only(res, "UnexpectedValue")
    assert "it was sent to q-1" in a["explanation"]


def test_only_runs_the_named_rules_and_rejects_unknown_names() -> None:
    h = QH().send(1, "q-0", "a", 1).send(1, "q-0", "b", 0)
    h.final(9, "q-0", [(0, "b"), (1, "a")])
    assert check_queue(h.history(), only=["LostWrite"])["valid"] is True  # the rule is what finds it
    with pytest.raises(ValueError, match="no such rule"):
        check_queue(h.history(), only=["Lost"])


def test_jepsen_shaped_history() -> None:
    """Jepsen's Kafka workload histories (micro-op vectors) are read too; positions follow the process."""
    def ev(i: int, p: int, t: str, f: str, v: Any) -> Event:
        return Event(i, p, t, f, v, time=i, line=i + 1)

    evs = [ev(0, 0, "invoke", "send", [["send", 1, "a"], ["send", 1, "b"]]),
           ev(1, 0, "ok", "send", [["send", 1, [0, "a"]], ["send", 1, [1, "b"]]]),
           ev(2, 0, "invoke", "send", [["send", 1, "c"]]),
           ev(3, 0, "ok", "send", [["send", 1, [2, "c"]]]),
           ev(4, 1, "invoke", "assign", [1]), ev(5, 1, "ok", "assign", [1]),
           ev(6, 1, "invoke", "poll", [["poll"]]), ev(7, 1, "ok", "poll", [["poll", {"1": [[0, "a"]]}]]),
           ev(8, 1, "invoke", "poll", [["poll"]]), ev(9, 1, "ok", "poll", [["poll", {"1": [[2, "c"]]}]])]
    res = check_queue(History(evs))
    assert broken(res) == {"PollSkip", "LostWrite"}
    assert only(res, "PollSkip")["key"] == "1"


def test_malformed_queue_op_names_its_line() -> None:
    h = QH()
    h._ev(1, "invoke", "send", {"value": 1})
    h._ev(1, "ok", "send", {"value": 1, "offset": 0})
    with pytest.raises(QueueShapeError, match="history line 1"):
        check_queue(h.history())


def test_pictures_of_broken_partitions(tmp_path: Path) -> None:
    h = QH()
    for i in range(6):
        h.send(1, "q-0", i, i)
    h.poll(5, {"q-0": 0}, {"q-0": [(0, 0), (1, 1), (3, 3)]})
    h.final(9, "q-0", [(0, 0), (1, 1), (3, 3), (4, 4), (5, 5), (6, 1)])
    res = check_queue(h.history(), out_dir=tmp_path)
    assert {"LostWrite", "PollSkip", "Duplicate"} <= broken(res)
    assert res["pictures"] == [str(tmp_path / "queue-q-0.png")]
    assert (tmp_path / "queue-q-0.png").stat().st_size > 1000 and (tmp_path / "queue-q-0.svg").is_file()
    json.dumps(res)


def test_a_run_history_gets_the_queue_checker_beside_the_models(tmp_path: Path) -> None:
    from kraftlab.checker.history import write_jsonl
    from kraftlab.checker.run import check_run

    h = QH().send(1, "q-0", "a", 0).send(1, "q-0", "b", 1)
    h.final(9, "q-0", [(0, "a")], hw=2)
    n = len(h.events)
    h.events += [Event(n, 3, "invoke", "create", {"topic": "t1"}, time=n * 1000, line=n + 1,
                       extra={"workload": "topics"}),
                 Event(n + 1, 3, "ok", "create", {"topic": "t1"}, time=n * 1000 + 1, line=n + 2,
                       extra={"workload": "topics"})]
    write_jsonl(h.history(), tmp_path / "history.jsonl")
    res = check_run(tmp_path / "history.jsonl", out_dir=tmp_path / "out")
    assert set(res["checkers"]) == {"queue", "linearizable-topics"}
    assert res["checkers"]["queue"]["valid"] is False and res["valid"] is False
    assert (tmp_path / "out" / "queue" / "queue-q-0.png").is_file()


def test_kraftlab_check_model_queue_reads_a_whole_external_history(tmp_path: Path) -> None:
    from kraftlab.checker.history import write_jsonl
    from kraftlab.cli import main

    h = healthy()
    for e in h.events:
        e.extra = {}
    write_jsonl(h.history(), tmp_path / "h.jsonl")
    assert main(["check", str(tmp_path / "h.jsonl"), "--model", "queue"]) == 0
    h.send(1, "q-0", "z", 3)  # offset 3 already holds 3
    for e in h.events:
        e.extra = {}
    write_jsonl(h.history(), tmp_path / "h.jsonl")
    assert main(["check", str(tmp_path / "h.jsonl"), "--model", "queue"]) == 1
