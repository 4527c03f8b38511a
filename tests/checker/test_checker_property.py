"""Property tests: histories of a correct simulated register are linearizable; with an injected
lost write, stale read or duplicate apply they are not, and the anomaly is named."""

from __future__ import annotations

from checker_sim import ANOMALIES, SimRegister, inject
from hypothesis import given
from hypothesis import strategies as st

from kraftlab.checker.linear.budget import Budget
from kraftlab.checker.linearizable import check_linearizable
from kraftlab.checker.models import build_model
from kraftlab.checker.run import linearizable_with_anomalies


@given(seed=st.integers(0, 2**32), steps=st.integers(0, 120), procs=st.integers(1, 5),
       crash=st.sampled_from([0.0, 0.05, 0.3]))
def test_correct_register_is_linearizable(seed: int, steps: int, procs: int, crash: float) -> None:
    h = SimRegister(seed, procs, crash).run(steps).history()
    res = check_linearizable(h, build_model("register"), Budget(seconds=30), explain_seconds=0)
    assert res["valid"] is True, res["explanation"]


@given(seed=st.integers(0, 2**32), steps=st.integers(0, 60), procs=st.integers(1, 4),
       anomaly=st.sampled_from(ANOMALIES))
def test_injected_anomaly_is_found_and_named(seed: int, steps: int, procs: int, anomaly: str) -> None:
    h = inject(SimRegister(seed, procs, 0.05).run(steps), anomaly).history()
    res = linearizable_with_anomalies(h, "register", None, False, Budget(seconds=30), None, "t")
    assert res["valid"] is False
    named = [a["type"] for a in res["anomalies"] if a["type"] != "nonlinearizable"]
    assert named and named[0] == anomaly, (named, res["explanation"])
