"""The opt-in availability checker: a majority-side client must succeed within N s of a fault."""

from __future__ import annotations

from typing import Any

from kraftlab.checker.availability import check_availability, majority_side
from kraftlab.checker.history import FaultWindow, History, parse_jsonl_line

NODES = ["n1", "n2", "n3", "n4", "n5"]
CONTROLLERS = ["n1", "n2", "n3"]
OPENERS = {"kill": "restart", "start-partition": "stop-partition", "pause": "resume"}
S = 1_000_000_000


def history(*ops: dict[str, Any]) -> History:
    import json

    lines = [json.dumps({"index": i, "node": None, "error": None, "value": None, **op}) for i, op in enumerate(ops)]
    return History([parse_jsonl_line(line, "h", i + 1, i) for i, line in enumerate(lines)])


def nemesis(t: float, type_: str, f: str, value: Any = None) -> dict[str, Any]:
    return {"time": int(t * S), "process": "nemesis", "type": type_, "f": f, "value": value}


def client(t: float, p: int, type_: str, node: str) -> dict[str, Any]:
    return {"time": int(t * S), "process": p, "type": type_, "f": "read", "node": node}


def kill(t0: float, t1: float, nodes: list[str]) -> list[dict[str, Any]]:
    return [nemesis(t0, "invoke", "kill", {"nodes": nodes}), nemesis(t0, "ok", "kill", {"nodes": nodes}),
            nemesis(t1, "invoke", "restart", {"nodes": nodes}), nemesis(t1, "ok", "restart", {"nodes": nodes})]


def test_majority_side_of_partitions_and_kills() -> None:
    halves = FaultWindow("partition", 0, 1, {"grudge": {"n1": ["n3", "n4", "n5"], "n2": ["n3", "n4", "n5"],
                                                        "n3": ["n1", "n2"], "n4": ["n1", "n2"], "n5": ["n1", "n2"]}})
    assert majority_side(NODES, CONTROLLERS, [halves]) == ["n1", "n2"]
    two_down = FaultWindow("kill", 0, 1, {"nodes": ["n1", "n2"]})
    assert majority_side(NODES, CONTROLLERS, [two_down]) is None
    assert majority_side(NODES, CONTROLLERS, [FaultWindow("kill", 0, 1, {"nodes": ["n3"]}), halves]) == ["n1", "n2"]
    assert majority_side(NODES, CONTROLLERS, [FaultWindow("kill", 0, 1, {"nodes": ["n2"]}), halves]) is None


def test_served_within_the_bound_is_valid_and_silence_is_unavailable() -> None:
    fault = kill(1.0, 6.0, ["n1"])
    served = history(*fault[:2], client(2.0, 0, "invoke", "n2"), client(3.0, 0, "ok", "n2"), *fault[2:])
    assert check_availability(served, OPENERS, 5.0, NODES, CONTROLLERS)["valid"] is True
    too_late = history(*fault[:2], client(2.0, 0, "invoke", "n2"), client(6.5, 0, "ok", "n2"), *fault[2:])
    res = check_availability(too_late, OPENERS, 5.0, NODES, CONTROLLERS)
    assert res["valid"] is False and res["anomalies"][0]["type"] == "Unavailable"
    assert "kill at 1.0 s" in res["anomalies"][0]["explanation"] and "n2" in res["anomalies"][0]["explanation"]
    only_minority = history(*fault[:2], client(2.0, 0, "invoke", "n1"), client(3.0, 0, "ok", "n1"), *fault[2:])
    assert check_availability(only_minority, OPENERS, 5.0, NODES, CONTROLLERS)["valid"] is False


def test_a_fault_that_takes_the_quorum_is_not_judged() -> None:
    h = history(*kill(1.0, 3.0, ["n1", "n2"]))
    res = check_availability(h, OPENERS, 5.0, NODES, CONTROLLERS)
    assert res["valid"] is True and res["stats"]["not_judged_no_majority"] == 1
