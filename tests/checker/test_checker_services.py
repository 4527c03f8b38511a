"""Property tests of the project's own models: histories of correct simulated services are
linearizable; one acknowledged create that is later missing is not."""

from __future__ import annotations

from checker_services import registry_apply, registry_request, simulate, topics_apply, topics_request
from hypothesis import given
from hypothesis import strategies as st

from kraftlab.checker.history import Event, History
from kraftlab.checker.linear.budget import Budget
from kraftlab.checker.linearizable import check_linearizable
from kraftlab.checker.models import build_model

RUNS = {"seed": st.integers(0, 2**32), "steps": st.integers(0, 90), "procs": st.integers(1, 4),
        "crash": st.sampled_from([0.0, 0.1, 0.3])}


def _valid(h: History, model: str) -> object:
    return check_linearizable(h, build_model(model), Budget(seconds=30), explain_seconds=0)


@given(**RUNS)
def test_correct_topic_service_is_linearizable(seed: int, steps: int, procs: int, crash: float) -> None:
    res = _valid(simulate(seed, steps, procs, topics_apply, topics_request, frozenset(), crash), "topics")
    assert res["valid"] is True, res["explanation"]  # type: ignore[index]


@given(**RUNS)
def test_correct_registry_is_linearizable(seed: int, steps: int, procs: int, crash: float) -> None:
    res = _valid(simulate(seed, steps, procs, registry_apply, registry_request, (0, {}), crash), "registry")
    assert res["valid"] is True, res["explanation"]  # type: ignore[index]


@given(seed=st.integers(0, 2**32), steps=st.integers(0, 60), procs=st.integers(1, 3))
def test_lost_create_is_not_linearizable(seed: int, steps: int, procs: int) -> None:
    h = simulate(seed, steps, procs, topics_apply, topics_request, frozenset(), 0.0)
    assert _valid(h, "topics")["valid"] is True  # type: ignore[index]
    # a fresh topic is created, acknowledged, and then listed as absent
    tail = [(90, "invoke", "create", {"topic": "zz"}), (90, "ok", "create", {"topic": "zz"}),
            (91, "invoke", "describe", {"topic": "zz"}), (91, "ok", "describe", {"topic": "zz", "exists": False})]
    h.events += [Event(len(h.events) + i, *row) for i, row in enumerate(tail)]
    res = _valid(h, "topics")
    assert res["valid"] is False  # type: ignore[index]
