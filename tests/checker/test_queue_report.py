"""The report explains queue anomalies from results.json alone: the rule in Kafka's words, the
explanation, and the ops that show it with their history lines."""

from __future__ import annotations

from queue_histories import QH

from kraftlab.checker.queue import RULES, check_queue
from kraftlab.report_anomalies import anomaly_sections, rule_words


def test_a_lost_write_is_explained_with_its_ops() -> None:
    h = QH().send(1, "q-0", "a", 0).send(2, "q-0", "b", 1).send(2, "q-0", "c", 2)
    h.final(9, "q-0", [(0, "a"), (2, "c")], hw=3)
    res = check_queue(h.history())
    html = "".join(anomaly_sections({"checkers": {"queue": res}}))
    assert "LostWrite — broken 1 time" in html
    assert RULES["LostWrite"] in html
    assert "p2 send b to q-0 → offset 1" in html  # the op in Kafka's words, with its history line
    assert "final read q-0 from 0 → offsets 0..2 (2 records)" in html


def test_queue_rules_read_in_one_sentence() -> None:
    assert rule_words("PollSkip") == f"The rule: {RULES['PollSkip']}"
