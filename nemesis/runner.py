"""Running a schedule against a nemesis, and healing on every exit path.

`guarded(nemesis)` turns SIGTERM (and SIGINT) into an exception in the main thread and heals
everything on the way out, whatever the way out is. `ScheduleRunner` fires the steps of a schedule
at their times in a background thread; `stop()` ends it early; its final phase heals everything.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Callable, Iterator
from types import FrameType

from nemesis.core import Completion, Nemesis
from nemesis.schedule import Schedule


class Terminated(BaseException):
    """Raised in the main thread when the process receives SIGTERM."""


@contextlib.contextmanager
def guarded(nemesis: Nemesis, *, signals: tuple[signal.Signals, ...] = (signal.SIGTERM,)) -> Iterator[Nemesis]:
    """Heal everything when the block ends: normally, by exception, by SIGINT or by SIGTERM."""
    previous: dict[signal.Signals, object] = {}
    if threading.current_thread() is threading.main_thread():
        def on_signal(signum: int, frame: FrameType | None) -> None:
            raise Terminated(f"signal {signal.Signals(signum).name}")

        for sig in signals:
            previous[sig] = signal.signal(sig, on_signal)
    try:
        yield nemesis
    finally:
        try:
            nemesis.close()
            nemesis.heal_all()
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)  # type: ignore[arg-type]


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
        """Fire every step at its time (until stopped), then heal everything; returns all completions."""
        start = self.monotonic()
        try:
            for step in self.schedule.steps:
                delay = start + step.at - self.monotonic()
                if self._stop.wait(max(0.0, delay)):
                    break
                self.done.append(self.nemesis.invoke(step.f, step.value))
        except BaseException as exc:
            self.error = exc
            raise
        finally:
            self.nemesis.close()
            self.healed = self.nemesis.heal_all()
        return self.done + self.healed

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
