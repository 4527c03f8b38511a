"""The acl workload's ops against the fake cluster, and its histories judged by the checker's `acl`
model: valid on a correct cluster with faults, invalid when a DeleteAcls is acknowledged but not done."""

from __future__ import annotations

import json
import random
from collections import Counter
from typing import Any

from wl_harness import invoke, open_client, run, select, verdicts

from kraftlab.checker.history import History, parse_jsonl_line
from kraftlab.checker.linearizable import check_linearizable
from kraftlab.checker.models import build_model
from kraftlab.workloads.acl import AclWorkload
from kraftlab.workloads.fake_kafka import FakeKafka
from kraftlab.workloads.ops import broker_read, op

READ_CONFIGS = {"resource_type": "TOPIC", "resource_name": "acl-0", "pattern_type": "LITERAL",
                "principal": "User:ANONYMOUS", "host": "*", "operation": "DESCRIBE_CONFIGS", "permission": "ALLOW"}


def test_op_semantics() -> None:
    fake = FakeKafka()
    w = AclWorkload(["n1", "n2", "n3"])
    c = open_client(fake, w.handlers(), node="n2")
    assert invoke(c, broker_read("acl", "authorize", "n1", topic="acl-0")).value == {"allowed": True}  # no ACL
    alice = {**READ_CONFIGS, "principal": "User:acl-alice"}
    assert invoke(c, op("acl", "create", alice)).type == "ok"
    assert invoke(c, broker_read("acl", "authorize", "n1", topic="acl-0")).value == {"allowed": False}
    assert invoke(c, op("acl", "create", {**READ_CONFIGS, "via": "controller"})).type == "ok"
    assert invoke(c, op("acl", "create", READ_CONFIGS)).type == "ok"  # stored already: acknowledged, one copy
    assert len(fake.acls.acls) == 2
    assert invoke(c, broker_read("acl", "authorize", "n3", topic="acl-0")).value == {"allowed": True}
    pattern = {k: READ_CONFIGS[k] for k in ("resource_type", "resource_name", "pattern_type")}
    described = invoke(c, broker_read("acl", "describe", "n1", **pattern)).value
    assert described == {"acls": [READ_CONFIGS, alice]}
    assert invoke(c, broker_read("acl", "list", "n2")).value == {"acls": [READ_CONFIGS, alice]}
    assert invoke(c, op("acl", "delete", READ_CONFIGS)).value == {"deleted": [READ_CONFIGS]}
    assert invoke(c, op("acl", "delete", READ_CONFIGS)).value == {"deleted": []}
    bad = invoke(c, op("acl", "create", {**READ_CONFIGS, "operation": "ANY"}))
    assert (bad.type, bad.error) == ("fail", "INVALID_REQUEST")


def test_history_marks_and_selection() -> None:
    lines, w = run("acl", FakeKafka(rng=random.Random(1)), seconds=1.0, seed=1)
    assert w.models == ("acl",) and all(x["workload"] == "acl" for x in lines)
    fs = Counter(x["f"] for x in lines if x["type"] == "ok")
    assert all(fs[f] > 0 for f in ("create", "delete", "describe", "authorize", "list"))
    assert {x["f"] for x in select(lines)} == {"create", "delete", "list"}  # final lists only, of the reads


def test_valid_on_a_correct_cluster_with_faults() -> None:
    fake = FakeKafka(rng=random.Random(2), p_timeout=0.05, p_lost=0.05, p_not_controller=0.05)
    lines, w = run("acl", fake, seconds=1.5, seed=2)
    types = Counter(x["type"] for x in lines if x["f"] in ("create", "delete"))
    assert types["info"] > 0 and types["ok"] > 0
    assert verdicts(lines, w.models) == {"acl": True}


def test_an_acknowledged_delete_that_kept_the_acl_is_caught() -> None:
    lines, w = run("acl", FakeKafka(rng=random.Random(3), bugs=frozenset({"keep-deleted-acl"})), seconds=1.0, seed=3)
    assert verdicts(lines, w.models) == {"acl": False}


def _ops(lines: list[dict[str, Any]]) -> History:
    return History([parse_jsonl_line(json.dumps(x), "<test>", i + 1, i) for i, x in enumerate(lines)])


def test_model_rules() -> None:
    pattern = {k: READ_CONFIGS[k] for k in ("resource_type", "resource_name", "pattern_type")}

    def h(*ops: tuple[str, str, Any, Any]) -> bool | str:
        lines = []
        for i, (f, type_, value, out) in enumerate(ops):
            lines.append({"index": 2 * i, "time": 2 * i, "process": 0, "type": "invoke", "f": f, "value": value,
                          "workload": "acl"})
            lines.append({"index": 2 * i + 1, "time": 2 * i + 1, "process": 0, "type": type_, "f": f, "value": out,
                          "workload": "acl"})
        return check_linearizable(_ops(lines), build_model("acl"))["valid"]  # type: ignore[no-any-return]

    assert h(("create", "ok", READ_CONFIGS, {}), ("delete", "ok", READ_CONFIGS, {"deleted": [READ_CONFIGS]})) is True
    assert h(("delete", "ok", READ_CONFIGS, {"deleted": [READ_CONFIGS]})) is False  # removed what was never there
    assert h(("create", "ok", READ_CONFIGS, {}), ("delete", "ok", READ_CONFIGS, {"deleted": []})) is False
    assert h(("create", "info", READ_CONFIGS, None), ("describe", "ok", pattern, {"acls": [READ_CONFIGS]})) is True
    assert h(("create", "fail", READ_CONFIGS, None), ("describe", "ok", pattern, {"acls": [READ_CONFIGS]})) is False
    assert h(("create", "ok", READ_CONFIGS, {}), ("list", "ok", {"final": True}, {"acls": []})) is False
    assert h(("create", "ok", READ_CONFIGS, {}), ("list", "ok", {"final": True}, {"acls": [READ_CONFIGS]})) is True
    assert build_model("acl-whole").name == "acl"
