"""ForwardedOnce: a broker never re-sends a forwarded write after a transmission that reached the
controller; retries of transmissions that never left are fine; a restart starts over."""

from __future__ import annotations

from typing import Any

from checker_journals import JB, only_anomaly

from kraftlab.checker.forwarding import check_forwarding
from kraftlab.checker.journal import journals_from


def _broker(*outcomes: tuple[int, str], restart_after: int | None = None) -> JB:
    j = JB()
    j.add(4, "start", roles=["broker"], voters=[1, 2, 3], log_start=0, log_end=0, hw=0)
    for i, (fwd, outcome) in enumerate(outcomes):
        j.add(4, "forward", fwd=fwd, api="CreateTopicsRequest", outcome=outcome)
        if restart_after == i:
            j.add(4, "start", roles=["broker"], voters=[1, 2, 3], log_start=0, log_end=0, hw=0)
    return j


def test_retries_of_unsent_forwards_and_new_forwards_are_fine() -> None:
    res: dict[str, Any] = check_forwarding(journals_from(_broker(
        (1, "not-sent"), (1, "not-sent"), (1, "answered"), (2, "sent-unanswered"), (3, "answered")).entries))
    assert res["valid"] is True and res["checked"] == ["ForwardedOnce"]
    assert res["stats"]["forward_transmissions"] == 5


def test_a_forward_sent_again_after_it_reached_the_controller_is_a_violation() -> None:
    for first in ("sent-unanswered", "answered"):
        a = only_anomaly(check_forwarding(journals_from(_broker((1, "not-sent"), (1, first), (1, "answered")).entries)),
                         "ForwardedOnce")
        assert f"sent forwarded CreateTopicsRequest #1 to the controller again after a transmission that reached it " \
               f"({first})" in a["explanation"]


def test_forward_numbers_start_over_with_a_new_process() -> None:
    res = check_forwarding(journals_from(_broker((1, "answered"), (1, "answered"), restart_after=0).entries))
    assert res["valid"] is True


def test_journals_without_forward_events_check_nothing_and_say_so() -> None:
    res = check_forwarding(journals_from(JB().entries))
    assert res["valid"] is True and "ForwardedOnce" in res["not_checked"]
