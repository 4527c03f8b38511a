"""The queue checker partition by partition (the way Spark runs it) agrees with the whole-history
checker: the same verdict and the same broken rules on planted histories — healthy, lost, duplicated,
skipped, gone back, unexpected, Jepsen-shaped, unknown — with polls spanning partitions cut per
partition and counted once."""

from __future__ import annotations

from typing import Any

import pytest
from queue_histories import QH, healthy

from kraftlab.checker.history import Event, History, pair_ops
from kraftlab.checker.queue import check_queue
from kraftlab.checker.queue.partitioned import check_partitioned, split


def two_partitions() -> QH:
    """Sends to q-0 and q-1, polls that read both at once, final reads of both in one op."""
    h = QH()
    for i in range(4):
        h.send(1, "q-0", f"a{i}", i).send(2, "q-1", f"b{i}", i)
    h.poll(5, {"q-0": 0, "q-1": 0}, {"q-0": [(0, "a0"), (1, "a1")], "q-1": [(0, "b0")]})
    h.poll(5, {"q-0": 2, "q-1": 1}, {"q-0": [(2, "a2"), (3, "a3")], "q-1": [(1, "b1"), (2, "b2"), (3, "b3")]})
    return h.poll(9, {"q-0": 0, "q-1": 0}, {"q-0": [(i, f"a{i}") for i in range(4)],
                                            "q-1": [(i, f"b{i}") for i in range(4)]},
                  final=True, hws={"q-0": 4, "q-1": 4})


def lost() -> QH:
    h = two_partitions()
    h.send(3, "q-1", "lost", 4).send(3, "q-1", "after", 5)
    return h.poll(6, {"q-1": 4}, {"q-1": [(5, "after")]})


def duplicate() -> QH:
    h = two_partitions()
    return h.poll(7, {"q-0": 0}, {"q-0": [(0, "a0"), (1, "a1"), (2, "a2"), (3, "a3"), (4, "a1")]})


def skip() -> QH:
    h = two_partitions()
    return h.poll(7, {"q-1": 0}, {"q-1": [(0, "b0"), (2, "b2")]})


def back() -> QH:
    h = two_partitions()
    return h.poll(7, {"q-0": 3}, {"q-0": [(3, "a3"), (1, "a1")]})


def unexpected() -> QH:
    h = two_partitions()
    return h.poll(7, {"q-0": 0}, {"q-0": [(0, "b0")]})


def unknown() -> QH:
    return QH().send(1, "q-0", "x", 0).send(1, "q-1", "y", 0).poll(5, {"q-0": 0}, {"q-0": [(0, "x")]})


def jepsen() -> History:
    def ev(i: int, p: int, t: str, f: str, v: Any) -> Event:
        return Event(i, p, t, f, v, time=i, line=i + 1)

    return History([ev(0, 0, "invoke", "send", [["send", 1, "a"], ["send", 2, "b"]]),
                    ev(1, 0, "ok", "send", [["send", 1, [0, "a"]], ["send", 2, [0, "b"]]]),
                    ev(2, 0, "invoke", "send", [["send", 1, "c"]]),
                    ev(3, 0, "ok", "send", [["send", 1, [1, "c"]]]),
                    ev(4, 1, "invoke", "assign", [1, 2]), ev(5, 1, "ok", "assign", [1, 2]),
                    ev(6, 1, "invoke", "poll", [["poll"]]),
                    ev(7, 1, "ok", "poll", [["poll", {"1": [[0, "a"]], "2": [[0, "b"]]}]]),
                    ev(8, 1, "invoke", "assign", [1]), ev(9, 1, "ok", "assign", [1]),
                    ev(10, 1, "invoke", "poll", [["poll"]]), ev(11, 1, "ok", "poll", [["poll", {"1": [[1, "c"]]}]])])


def types(res: dict[str, Any]) -> set[str]:
    return {a["type"] for a in res["anomalies"]}


@pytest.mark.parametrize(("make", "unseen_split"), [
    (healthy, set()), (two_partitions, set()), (lost, set()), (duplicate, set()), (skip, set()), (back, set()),
    (unexpected, {"Duplicate"}),  # b0 read from q-0 too: split, only q-0's UnexpectedValue shows it
    (unknown, set())])
def test_same_verdict_as_the_whole_history(make: Any, unseen_split: set[str]) -> None:
    h = make().history()
    whole, parts = check_queue(h), check_partitioned(h)
    assert parts["valid"] == whole["valid"], (parts["explanation"], whole["explanation"])
    assert types(parts) == types(whole) - unseen_split
    assert parts["stats"]["sends"] == whole["stats"]["sends"]
    assert parts["stats"]["polls"] == whole["stats"]["polls"]
    assert set(parts["checked"]) == set(whole["checked"])


def test_jepsen_histories_split_by_micro_op() -> None:
    whole, parts = check_queue(jepsen()), check_partitioned(jepsen())
    assert whole["valid"] is parts["valid"] is not False
    assert set(split(pair_ops(jepsen()))) == {"1", "2"}


def test_polls_across_partitions_are_cut_per_partition() -> None:
    parts = split(pair_ops(two_partitions().history()))
    assert sorted(parts) == ["q-0", "q-1"]
    polls = [op for op in parts["q-1"] if op.f == "poll"]
    assert [op.value["positions"] for op in polls] == [{"q-1": 0}, {"q-1": 1}, {"q-1": 0}]
    assert all(set(op.output["records"]) == {"q-1"} for op in polls)
    assert polls[-1].output["high_water_marks"] == {"q-1": 4} and polls[-1].value["final"] is True


def test_the_parts_run_where_the_caller_says() -> None:
    seen: list[str] = []

    def mapper(fn: Any, items: list[Any]) -> Any:
        seen.extend(k for k, _ in items)
        return [fn(x) for x in items]

    assert check_partitioned(lost().history(), mapper)["valid"] is False
    assert seen == ["q-0", "q-1"]
