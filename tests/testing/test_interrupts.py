"""A benchmark stopped with SIGTERM runs its clean-up (kraftlab.testing.interrupts)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

SCRIPT = """
import sys, time
from pathlib import Path
from kraftlab.testing.interrupts import interrupt_on_sigterm
interrupt_on_sigterm()
done = Path(sys.argv[1])
try:
    Path(sys.argv[2]).write_text("started")
    time.sleep(60)
finally:
    done.write_text("cleaned up")
"""


def test_sigterm_runs_the_finally_blocks(tmp_path: Path) -> None:
    done, started = tmp_path / "done", tmp_path / "started"
    proc = subprocess.Popen([sys.executable, "-c", SCRIPT, str(done), str(started)], stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 30
        while not started.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert started.exists(), "the script never started"
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert done.read_text() == "cleaned up"
    assert b"KeyboardInterrupt" in err


def test_without_it_sigterm_skips_them(tmp_path: Path) -> None:
    """The control: Python's default SIGTERM ends the process without running `finally`."""
    done, started = tmp_path / "done", tmp_path / "started"
    script = SCRIPT.replace("interrupt_on_sigterm()\n", "")
    proc = subprocess.Popen([sys.executable, "-c", script, str(done), str(started)])
    try:
        deadline = time.monotonic() + 30
        while not started.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    finally:
        proc.kill()
    assert not done.exists()
