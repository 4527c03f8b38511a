"""Running a schedule against a nemesis, and healing on every exit path.

`guarded(nemesis)` turns SIGTERM (and SIGINT) into an exception in the main thread and heals
everything on the way out, whatever the way out is. `ScheduleRunner` fires the steps of a schedule
at their times in a background thread; `stop()` ends it early; its final phase heals everything.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any

from kraftlab.checker.history import Completion
from kraftlab.nemesis.core import Nemesis
from kraftlab.nemesis.packages import PACKAGES
from kraftlab.nemesis.schedule import Schedule, Step


class Terminated(KeyboardInterrupt):
    """Raised in the main thread when the process receives SIGTERM: an interrupt like Ctrl-C, so
    whatever unwinds on Ctrl-C (heal, stop nodes, remove the lab, write the verdict) does here too."""


def interrupt_on(signals: tuple[signal.Signals, ...]) -> dict[signal.Signals, object]:
    """Make `signals` raise Terminated in this process's main thread; returns the handlers replaced
    (empty off the main thread, where handlers cannot be set). A child forked without exec
    (pyroute2's namespace helpers, isolated checkers) inherits the handler, and its parent stops it
    with SIGTERM: there the signal keeps its default action (raising would hang the parent)."""
    if threading.current_thread() is not threading.main_thread():
        return {}
    owner = os.getpid()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        if os.getpid() != owner:
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return
        raise Terminated(f"stopped by signal {signal.Signals(signum).name}")

    return {sig: signal.signal(sig, on_signal) for sig in signals}


def restore_handlers(previous: dict[signal.Signals, object]) -> None:
    for sig, handler in previous.items():
        signal.signal(sig, handler)  # type: ignore[arg-type]  # each is what signal.signal returned


@contextlib.contextmanager
def guarded(nemesis: Nemesis, *, signals: tuple[signal.Signals, ...] = (signal.SIGTERM,)) -> Iterator[Nemesis]:
    """Heal everything when the block ends: normally, by exception, by SIGINT or by SIGTERM."""
    previous = interrupt_on(signals)
    try:
        yield nemesis
    finally:
        try:
            nemesis.close()
            nemesis.heal_all()
        finally:
            restore_handlers(previous)


class ScheduleRunner:
    def __init__(self, nemesis: Nemesis, schedule: Schedule, *,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.nemesis = nemesis
        self.schedule = schedule
        self.monotonic = monotonic
        self.done: list[Completion] = []
        self.healed: list[Completion] = []
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def run(self) -> list[Completion]:
        """Fire every step at its time, hold what is in force until the schedule's duration has
        passed (or `stop()`), then heal everything; returns all completions."""
        start = self.monotonic()
        opened: dict[int, Completion] = {}
        try:
            for step in self.schedule.steps:
                delay = start + step.at - self.monotonic()
                if self._stop.wait(max(0.0, delay)):
                    break
                value = self._value(step, opened)
                if value is None:
                    continue
                done = self.nemesis.invoke(step.f, value)
                self.done.append(done)
                if step.window is not None and step.opens:
                    opened[step.window] = done
            else:  # the last windows stay in force until the end of the run (the final heal)
                self._stop.wait(max(0.0, start + self.schedule.duration - self.monotonic()))
        except BaseException as exc:
            self.error = exc
            raise
        finally:
            self.nemesis.close()
            self.healed = self.nemesis.heal_all()
        return self.done + self.healed

    @staticmethod
    def _value(step: Step, opened: dict[int, Completion]) -> dict[str, Any] | None:
        """The value to invoke `step` with: a window's stop is given what its start did (the nodes
        it resolved); None when the start was not applied at all (nothing to undo)."""
        if step.window is None or step.opens:
            return step.value
        started = opened.pop(step.window, None)
        if started is None:
            return step.value  # a schedule cut short or edited by hand: undo by the step alone
        if started.type == "fail":
            return None
        package = PACKAGES.get(step.package)
        done = started.value if isinstance(started.value, dict) else {}
        return {**(package.stop_value(done) if package is not None else {}), **step.value}

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run_quietly, name="nemesis", daemon=True)
        self._thread.start()

    def _run_quietly(self) -> None:
        with contextlib.suppress(BaseException):
            self.run()

    def stop(self, timeout: float = 120.0) -> None:
        """Stop firing steps and wait for the final heal."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
