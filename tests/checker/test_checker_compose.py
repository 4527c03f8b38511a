"""checker.compose and `kraftlab check`: merging, crashes, exit codes, results.json, pictures."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from checker_journals import healthy_raft

from kraftlab.checker.compose import compose, merge
from kraftlab.checker.history import Event, History, write_jsonl
from kraftlab.cli import _Parser
from kraftlab.commands import check


def main(argv: list[str]) -> int:
    """`kraftlab check …` with only this command registered (other commands are not under test)."""
    parser = _Parser(prog="kraftlab")
    check.register(parser.add_subparsers(dest="command", parser_class=_Parser))
    args = parser.parse_args(argv)
    return int(args.func(args))


def test_merge_order() -> None:
    assert merge([True, True]) is True
    assert merge([True, "unknown"]) == "unknown"
    assert merge(["unknown", False, True]) is False
    assert merge([True, None]) == "unknown"  # not a verdict: never valid


def test_compose_runs_in_parallel_and_turns_crashes_into_unknown() -> None:
    def slow(v: Any) -> Any:
        def fn() -> dict[str, Any]:
            time.sleep(0.5)
            return {"valid": v}
        return fn

    def boom() -> dict[str, Any]:
        raise RuntimeError("kaput")

    t0 = time.monotonic()
    res = compose({"a": slow(True), "b": slow(True), "c": boom})
    assert time.monotonic() - t0 < 1.3  # one after another: 1.5 s
    assert res["valid"] == "unknown"
    assert res["checkers"]["c"]["valid"] == "unknown" and "RuntimeError: kaput" in res["checkers"]["c"]["error"]
    assert compose({"a": slow(True), "b": slow(False), "c": boom})["valid"] is False
    assert compose({"a": slow(True)})["valid"] is True
    assert compose({"x": lambda: {"nope": 1}})["valid"] == "unknown"
    assert compose({"a": slow(True)}, timeout=0.05)["checkers"]["a"]["valid"] == "unknown"


def _register_history(path: Path, last_read: int) -> Path:
    rows = [(0, "invoke", "write", 1), (0, "ok", "write", 1), (1, "invoke", "read", None), (1, "ok", "read", 1),
            (0, "invoke", "write", 2), (0, "ok", "write", 2), (1, "invoke", "read", None),
            (1, "ok", "read", last_read), (2, "invoke", "read", None), (2, "ok", "read", 2)]
    events = [Event(i, p, t, f, v, i * 10) for i, (p, t, f, v) in enumerate(rows)]
    write_jsonl(History(events), path)
    return path


def test_check_command_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = _register_history(tmp_path / "good.jsonl", 2)
    bad = _register_history(tmp_path / "bad.jsonl", 1)
    assert main(["check", str(good), "--model", "cas-register"]) == 0
    out = tmp_path / "out"
    assert main(["check", str(bad), "--model", "cas-register", "--out", str(out)]) == 1
    results = json.loads((out / "results.json").read_text())
    lin = results["checkers"]["linearizable"]
    assert results["valid"] is False and "history line 8" in lin["explanation"]
    assert any(a["type"] == "stale-read" for a in lin["anomalies"])
    pics = [p for a in lin["anomalies"] for p in a.get("pictures", [])]
    assert any(p.endswith(".png") for p in pics) and any(p.endswith(".svg") for p in pics)
    assert all(Path(p).stat().st_size > 1000 for p in pics)
    assert main(["check", str(bad), "--model", "cas-register", "--time-limit", "0"]) in (1, 2)
    assert main(["check", str(tmp_path / "missing.jsonl"), "--model", "register"]) == 254
    (tmp_path / "torn.jsonl").write_text('{"process": 0, "type": "invoke", "f": "read"}\n{"process": 0, "ty')
    assert main(["check", str(tmp_path / "torn.jsonl"), "--model", "register"]) == 254
    assert "torn.jsonl:2" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        main(["check", str(good), "--model", "no-such-model"])
    assert exc.value.code == 254
    assert main(["check"]) == 254


def test_check_command_with_journals(tmp_path: Path) -> None:
    j = healthy_raft()
    path = tmp_path / "journal.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in j.entries))
    assert main(["check", "--journal", str(path)]) == 0
    assert main(["check", "--journal", str(tmp_path)]) == 0  # a directory: its journal*.jsonl
    assert main(["check", "--journal", str(tmp_path / "nothing-here")]) == 254
    j.add(3, "role", role="leader", epoch=2, leader=3, voted_for=3)
    path.write_text("".join(json.dumps(e) + "\n" for e in j.entries))
    out = tmp_path / "o"
    assert main(["check", "--journal", str(path), "--out", str(out)]) == 1
    res = json.loads((out / "results.json").read_text())
    assert res["checkers"]["raft"]["valid"] is False and res["checkers"]["fencing"]["valid"] is True
