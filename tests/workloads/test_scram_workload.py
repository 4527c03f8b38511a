"""The scram workload's ops against the fake cluster, and checker.scram over its histories: valid on
a correct cluster with faults, LoginAfterDeletion when a broker keeps honouring deleted credentials."""

from __future__ import annotations

import json
import random
from collections import Counter
from typing import Any

from wl_harness import invoke, open_client, run

from kraftlab.checker.history import History, parse_jsonl_line
from kraftlab.checker.scram import check_scram
from kraftlab.workloads.fake_kafka import FakeKafka
from kraftlab.workloads.ops import broker_read, op
from kraftlab.workloads.scram import ScramWorkload

ALICE = {"user": "alice", "mechanism": "SCRAM-SHA-256"}


def _history(lines: list[dict[str, Any]]) -> History:
    return History([parse_jsonl_line(json.dumps(x), "<test>", i + 1, i) for i, x in enumerate(lines)])


def test_op_semantics() -> None:
    fake = FakeKafka()
    c = open_client(fake, ScramWorkload(["n1", "n2", "n3"]).handlers(), node="n2")

    def login(password: str, node: str = "n1", mechanism: str = "SCRAM-SHA-256") -> Any:
        return invoke(c, broker_read("scram", "login", node, user="alice", mechanism=mechanism, password=password))

    assert login("pw1").value == {"authenticated": False}  # no such credential
    assert invoke(c, op("scram", "upsert", {**ALICE, "password": "pw1"})).type == "ok"
    assert login("pw1").value == {"authenticated": True}
    assert login("pw2").value == {"authenticated": False}
    assert login("pw1", mechanism="SCRAM-SHA-512").value == {"authenticated": False}
    assert invoke(c, op("scram", "upsert", {**ALICE, "password": "pw2", "via": "controller"})).type == "ok"
    assert login("pw2", node="n3").value == {"authenticated": True} and login("pw1").value == {"authenticated": False}
    assert invoke(c, op("scram", "delete", ALICE)).type == "ok"
    assert login("pw2").value == {"authenticated": False}
    gone = invoke(c, op("scram", "delete", ALICE))
    assert (gone.type, gone.error) == ("fail", "RESOURCE_NOT_FOUND")


def test_valid_on_a_correct_cluster_with_faults() -> None:
    fake = FakeKafka(rng=random.Random(2), p_timeout=0.05, p_lost=0.05, p_not_controller=0.05)
    lines, w = run("scram", fake, seconds=1.5, seed=2)
    assert w.models == ("scram",) and all(x["workload"] == "scram" for x in lines)
    done = Counter((x["f"], x["type"]) for x in lines if x["type"] != "invoke")
    assert done[("upsert", "ok")] and done[("delete", "ok")] and done[("upsert", "info")]
    logins = [x for x in lines if x["f"] == "login" and x["type"] == "ok"]
    assert {x["value"]["authenticated"] for x in logins} == {True, False}
    r = check_scram(_history(lines), bound_ms=20)
    assert r["valid"] is True and r["checked"] == ["LoginWithUnsetPassword", "LoginAfterDeletion"], r


def test_a_broker_honouring_deleted_credentials_is_caught() -> None:
    lines, _w = run("scram", FakeKafka(rng=random.Random(3), bugs=frozenset({"login-after-delete"})), seconds=1.5,
                    seed=3)
    r = check_scram(_history(lines), bound_ms=20)
    assert r["valid"] is False and r["anomalies"][0]["type"] == "LoginAfterDeletion", r
    assert check_scram(_history(lines))["valid"] is True  # within the real bound (15 s) nothing is late


def test_rules_by_hand() -> None:
    def line(i: int, p: int, type_: str, f: str, value: Any, t: int) -> dict[str, Any]:
        return {"index": i, "time": t * 1_000_000, "process": p, "type": type_, "f": f, "value": value,
                "workload": "scram"}

    login = {**ALICE, "password": "pw1", "node": "n1", "broker_read": True}
    base = [line(0, 0, "invoke", "upsert", {**ALICE, "password": "pw1"}, 0), line(1, 0, "ok", "upsert", {}, 10),
            line(2, 0, "invoke", "delete", ALICE, 20), line(3, 0, "ok", "delete", {}, 30)]
    late = [line(4, 1, "invoke", "login", login, 5_000), line(5, 1, "ok", "login", {"authenticated": True}, 5_010)]
    assert check_scram(_history(base + late), bound_ms=1_000)["anomalies"][0]["type"] == "LoginAfterDeletion"
    assert check_scram(_history(base + late), bound_ms=10_000)["valid"] is True
    reset = [line(4, 2, "invoke", "upsert", {**ALICE, "password": "pw1"}, 25)]  # in doubt, after the delete began
    assert check_scram(_history(base + reset + late), bound_ms=1_000)["valid"] is True
    unset = [line(4, 1, "invoke", "login", {**login, "password": "never"}, 40),
             line(5, 1, "ok", "login", {"authenticated": True}, 45)]
    assert check_scram(_history(base + unset), bound_ms=10_000)["anomalies"][0]["type"] == "LoginWithUnsetPassword"


def test_a_slowed_or_stepped_back_broker_clock_stretches_the_bound() -> None:
    def line(i: int, p: Any, type_: str, f: str, value: Any, t: int, workload: bool = True) -> dict[str, Any]:
        out = {"index": i, "time": t * 1_000_000, "process": p, "type": type_, "f": f, "value": value}
        return {**out, "workload": "scram"} if workload else out

    login = {**ALICE, "password": "pw1", "node": "n1", "broker_read": True}
    base = [line(0, 0, "invoke", "upsert", {**ALICE, "password": "pw1"}, 0), line(1, 0, "ok", "upsert", {}, 10),
            line(2, 0, "invoke", "delete", ALICE, 20), line(3, 0, "ok", "delete", {}, 30)]
    late = [line(8, 1, "invoke", "login", login, 25_000), line(9, 1, "ok", "login", {"authenticated": True}, 25_010)]
    assert check_scram(_history(base + late))["anomalies"][0]["type"] == "LoginAfterDeletion"  # bound 15 s
    slowed = [line(4, "nemesis", "invoke", "clock-rate", {"rate": 0.5}, 1, False),
              line(5, "nemesis", "info", "clock-rate", {"nodes": ["n1"], "rate": 0.5}, 2, False)]
    assert check_scram(_history(base + slowed + late))["valid"] is True  # 13 s of n1's clock: 26 s real
    stepped = [line(4, "nemesis", "invoke", "clock-bump", {}, 1, False),
               line(5, "nemesis", "info", "clock-bump", {"nodes": ["n1"], "delta_ms": -12000.0}, 2, False)]
    assert check_scram(_history(base + stepped + late))["valid"] is True
    elsewhere = [line(4, "nemesis", "invoke", "clock-rate", {}, 1, False),
                 line(5, "nemesis", "info", "clock-rate", {"nodes": ["n2"], "rate": 0.5}, 2, False)]
    assert check_scram(_history(base + elsewhere + late))["valid"] is False
