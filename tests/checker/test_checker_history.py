"""History I/O: the project's JSONL, EDN, etcd logs; malformed input names file, line, reason."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kraftlab.checker.edn import read_all
from kraftlab.checker.formats import detect_format, read_history
from kraftlab.checker.history import Event, History, HistoryError, pair_ops, read_jsonl, write_jsonl


def _write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def test_jsonl_round_trip(tmp_path: Path) -> None:
    events = [Event(0, 0, "invoke", "create", {"topic": "t"}, 10, "n1"),
              Event(1, 0, "ok", "create", {"topic": "t"}, 20, "n1"),
              Event(2, "nemesis", "info", "start-partition", {"grudge": {"n1": ["n2"]}}, 25)]
    p = tmp_path / "h.jsonl"
    write_jsonl(History(events), p)
    h = read_jsonl(p)
    assert [(e.process, e.type, e.f, e.value, e.time, e.line) for e in h.events] == [
        (0, "invoke", "create", {"topic": "t"}, 10, 1), (0, "ok", "create", {"topic": "t"}, 20, 2),
        ("nemesis", "info", "start-partition", {"grudge": {"n1": ["n2"]}}, 25, 3)]
    ops = pair_ops(h)
    assert len(ops) == 1 and ops[0].status == "ok" and ops[0].ret == 1


@pytest.mark.parametrize(("line", "reason"), [
    ('{"process": 0, "type": "invoke", "f": "read"', "not JSON"),
    ('{"process": 0, "type": "begin", "f": "read"}', "type must be one of"),
    ('{"type": "invoke", "f": "read"}', "missing field 'process'"),
    ('{"process": "x", "type": "invoke", "f": "read"}', "process must be"),
    ('[1, 2]', "must be a JSON object"),
])
def test_malformed_jsonl_names_file_line_and_reason(tmp_path: Path, line: str, reason: str) -> None:
    good = json.dumps({"process": 0, "type": "invoke", "f": "read", "value": None})
    p = _write(tmp_path, "bad.jsonl", good + "\n" + line + "\n")
    with pytest.raises(HistoryError) as exc:
        read_history(p)
    assert exc.value.line == 2 and exc.value.path == str(p)
    assert reason in str(exc.value) and str(exc.value).startswith(f"{p}:2:")


def test_unpaired_completion_is_an_error(tmp_path: Path) -> None:
    p = _write(tmp_path, "h.jsonl", json.dumps({"process": 3, "type": "ok", "f": "read", "value": 1}) + "\n")
    with pytest.raises(HistoryError, match=r"h.jsonl:1: ok completion of process 3 with no open invocation"):
        pair_ops(read_history(p))


def test_double_invoke_is_an_error() -> None:
    h = History([Event(0, 1, "invoke", "read", line=1), Event(1, 1, "invoke", "read", line=2)], "x.jsonl")
    with pytest.raises(HistoryError, match=r"x\.jsonl:2: process 1 invokes while its op is still open"):
        pair_ops(h)


def test_info_and_missing_completions_are_crashed_ops() -> None:
    h = History([Event(0, 1, "invoke", "write", 1), Event(1, 2, "invoke", "write", 2), Event(2, 1, "info", "write", 1)])
    ops = pair_ops(h)
    assert [(o.status, o.ret) for o in ops] == [("info", None), ("info", None)]


def test_edn_reader_values_and_lines() -> None:
    forms = read_all('; a comment\n{:a 1, :b [1 2.5 "x\\"y"], :c nil, :d #{:k}}\n(:kw true)', "f.edn")
    assert forms[0] == (2, {"a": 1, "b": [1, 2.5, 'x"y'], "c": None, "d": frozenset({"k"})})
    assert forms[1] == (3, ["kw", True])


def test_knossos_edn_and_kv_lines(tmp_path: Path) -> None:
    p = _write(tmp_path, "h.edn", "[{:process 0, :type :invoke, :f :cas, :value [1 2]}\n"
                                  " {:process 0, :type :fail, :f :cas, :value [1 2]}\n"
                                  " {:process :nemesis, :type :info, :f :start}]")
    h = read_history(p)
    assert [(e.process, e.type, e.value, e.line) for e in h.events] == [
        (0, "invoke", [1, 2], 1), (0, "fail", [1, 2], 2), ("nemesis", "info", None, 3)]
    kv = _write(tmp_path, "c.txt", '{:process 1, :type :invoke, :f :get, :key "k", :value nil}\n'
                                   '{:process 1, :type :ok, :f :get, :key "k", :value "x"}\n')
    assert detect_format(kv) == "edn"
    assert [e.value for e in read_history(kv).events] == [{"key": "k", "value": None}, {"key": "k", "value": "x"}]


@pytest.mark.parametrize(("text", "line", "reason"), [
    ("[{:process 0, :type :invoke, :f :read}\n {:process 0 :type :ok :f :read", 2, "unclosed"),
    ("[{:process 0, :type :invoke}]", 1, "missing :f"),
    ("[{:process 0, :type :invoke, :f :read}\n {:process 0, :type :done, :f :read}]", 2, ":type must be"),
])
def test_malformed_edn(tmp_path: Path, text: str, line: int, reason: str) -> None:
    p = _write(tmp_path, "bad.edn", text)
    with pytest.raises(HistoryError) as exc:
        read_history(p)
    assert exc.value.line == line and reason in exc.value.reason


def test_etcd_log_semantics(tmp_path: Path) -> None:
    p = _write(tmp_path, "etcd.log", "INFO  jepsen.util - 1\t:invoke\t:cas\t[1 2]\n"
                                     "INFO  jepsen.util - 1\t:fail\t:cas\t[1 2]\n"
                                     "INFO jepsen.util - 2 :invoke :read nil\n"
                                     "INFO  jepsen.util - 2\t:fail\t:read\t:timed-out\n"
                                     "WARN some.other.logger - noise\n")
    h = read_history(p)
    assert [(e.type, e.f, e.value, e.error) for e in h.events] == [
        ("invoke", "cas", [1, 2], None), ("fail", "cas", [1, 2], "compare-mismatch"),
        ("invoke", "read", None, None), ("fail", "read", None, "timed-out")]
    bad = _write(tmp_path, "bad.log", "INFO  jepsen.util - 1\t:invoke\t:cas\t[1 2\n")
    with pytest.raises(HistoryError, match=r"bad\.log:1: cannot read value"):
        read_history(bad)
