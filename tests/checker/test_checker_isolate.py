"""checker.isolate: a checker past its time or memory limit is really stopped (with the workers
it forked), a crash or a silent death is `unknown` with why, and the in-thread seam still works."""

from __future__ import annotations

import functools
import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from kraftlab.checker.compose import InThreads, compose
from kraftlab.checker.isolate import Processes


def spin_forever(pid_file: str) -> dict[str, Any]:
    """Fork a worker that spins too (as the linearizability race does), then spin."""
    child = os.fork()
    if child == 0:
        while True:
            pass
    Path(pid_file).write_text(f"{os.getpid()} {child}")
    while True:
        pass


def hog_memory() -> dict[str, Any]:
    blocks = [bytearray(50_000_000) for _ in range(100)]  # 5 GB: far past the limit
    return {"valid": True, "n": len(blocks)}


def crash() -> dict[str, Any]:
    raise RuntimeError("kaput")


def die() -> dict[str, Any]:
    os._exit(3)


def verdict(v: Any) -> dict[str, Any]:
    return {"valid": v, "pid": os.getpid()}


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie (killed, not yet reaped by its parent) is dead too
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().split(")")[-1].split()[0] != "Z"


def _wait_dead(pids: list[int], seconds: float = 5.0) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if not any(_alive(p) for p in pids):
            return True
        time.sleep(0.05)
    return False


def test_time_limit_kills_the_checker_and_its_workers(tmp_path: Path) -> None:
    pid_file = tmp_path / "pids"
    t0 = time.monotonic()
    res = compose({"spin": functools.partial(spin_forever, str(pid_file)), "ok": functools.partial(verdict, True)},
                  timeout=1.5)
    assert time.monotonic() - t0 < 6
    spin = res["checkers"]["spin"]
    assert spin["valid"] == "unknown"
    assert "'spin'" in spin["explanation"] and "1.5 s" in spin["explanation"]
    assert res["checkers"]["ok"]["valid"] is True and res["checkers"]["ok"]["pid"] != os.getpid()
    assert res["valid"] == "unknown"
    pids = [int(p) for p in pid_file.read_text().split()]
    assert _wait_dead(pids), f"checker processes {pids} still running after the limit"


def test_memory_limit_ends_in_unknown_naming_it() -> None:
    res = compose({"hog": hog_memory}, timeout=60, memory_bytes=800_000_000)
    hog = res["checkers"]["hog"]
    assert hog["valid"] == "unknown"
    assert "'hog'" in hog["explanation"] and "800 MB" in hog["explanation"], hog


def test_crash_and_silent_death_are_unknown_with_why() -> None:
    res = compose({"crash": crash, "die": die, "fine": functools.partial(verdict, True)}, timeout=30)
    assert "RuntimeError: kaput" in res["checkers"]["crash"]["error"]
    assert res["checkers"]["die"]["valid"] == "unknown"
    assert "exit status 3" in res["checkers"]["die"]["explanation"]
    assert res["valid"] == "unknown"
    assert compose({"a": functools.partial(verdict, True), "b": functools.partial(verdict, False)})["valid"] is False


def test_forkserver_when_threads_run_and_unpicklable_checkers_fall_back_to_a_thread() -> None:
    stop = threading.Event()
    other = threading.Thread(target=stop.wait, daemon=True)  # the runner has threads of its own
    other.start()
    try:
        res = compose({"picklable": functools.partial(verdict, True), "lambda": lambda: verdict(True)}, timeout=60)
    finally:
        stop.set()
        other.join()
    assert res["valid"] is True
    assert res["checkers"]["picklable"]["pid"] != os.getpid()
    assert res["checkers"]["lambda"]["pid"] == os.getpid()
    assert "not picklable" in res["checkers"]["lambda"]["notes"][0]


@pytest.mark.parametrize("context", ["fork", "forkserver"])
def test_each_start_method_checks(context: str) -> None:
    res = compose({"a": functools.partial(verdict, True), "b": crash}, timeout=60, runner=Processes(context))
    assert res["checkers"]["a"]["valid"] is True and res["checkers"]["b"]["valid"] == "unknown"


def test_in_threads_seam_runs_in_this_process_and_reports_but_cannot_stop() -> None:
    res = compose({"a": functools.partial(verdict, True)}, runner=InThreads())
    assert res["checkers"]["a"]["pid"] == os.getpid() and res["valid"] is True
    release = threading.Event()
    slow = compose({"slow": lambda: {"valid": release.wait(5)}}, timeout=0.1, runner=InThreads())
    release.set()
    assert slow["valid"] == "unknown" and "not killable" in slow["checkers"]["slow"]["explanation"]


def test_check_command_kills_a_search_past_its_hard_limit(capsys: pytest.CaptureFixture[str]) -> None:
    from test_checker_compose import main

    from kraftlab.checker.reference import DEFAULT_DIR

    c50 = DEFAULT_DIR / "anishathalye__porcupine" / "test_data" / "kv" / "c50-ok.txt"
    if not c50.is_file():
        pytest.skip(f"no {c50}")
    t0 = time.monotonic()
    code = main(["check", str(c50), "--model", "kv-whole", "--time-limit", "600", "--hard-limit", "2", "--json"])
    assert code == 2 and time.monotonic() - t0 < 20
    assert "still running at its time limit of 2 s" in capsys.readouterr().out
