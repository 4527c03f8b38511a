"""The committed broker registrations read from `apply` lines (checker.registrations): one record
per offset in log order across nodes, and one node's fold of its own applies."""

from __future__ import annotations

from checker_journals import JB

from kraftlab.checker.journal import journals_from
from kraftlab.checker.registrations import Registrations, committed_broker_records


def _applies() -> JB:
    j = JB()
    j.add(2, "apply", offset=7, type="FenceBrokerRecord", broker=4)
    j.add(1, "apply", offset=5, type="RegisterBrokerRecord", broker=4, fenced=True)
    j.add(1, "apply", offset=6, type="UnfenceBrokerRecord", broker=4)
    j.add(1, "apply", offset=7, type="FenceBrokerRecord", broker=4)  # the same record on another node
    j.add(1, "apply", offset=8, type="TopicRecord")
    j.add(1, "apply", offset=9, type="UnregisterBrokerRecord", broker=4)
    return j


def test_broker_records_come_once_per_offset_in_log_order() -> None:
    records = committed_broker_records(journals_from(_applies().entries, "journal.jsonl"))
    assert [(r["offset"], r["type"]) for r in records] == [
        (5, "RegisterBrokerRecord"), (6, "UnfenceBrokerRecord"), (7, "FenceBrokerRecord"),
        (9, "UnregisterBrokerRecord")]
    only = committed_broker_records(journals_from(_applies().entries, "j"), ("UnregisterBrokerRecord",))
    assert [r["offset"] for r in only] == [9]


def test_a_nodes_applies_fold_into_each_brokers_registration() -> None:
    js = journals_from(_applies().entries, "journal.jsonl")
    seen = []
    regs = Registrations()
    for e in js.by_node[1]:
        regs.apply(e)
        seen.append(regs.state.get(4))
    assert seen == [(5, True), (5, False), (5, True), (5, True), None]
    assert regs.evidence[4]["type"] == "UnregisterBrokerRecord"
    regs.apply(js.by_node[2][0])  # a fence of a registration this fold never saw: nothing known
    assert regs.state == {}
    regs.forget()
    assert regs.evidence == {}
