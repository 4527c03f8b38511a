"""The progress display degrades to plain, rate-limited lines when not on a terminal."""

from __future__ import annotations

import io

from kraftlab.progress import ProgressDisplay, Snapshot


def test_plain_lines_when_not_a_tty() -> None:
    out = io.StringIO()
    n = [0]

    def source() -> Snapshot:
        n[0] += 1
        return Snapshot("run", 1.5 * n[0], 60, ok=n[0], fail=0, info=1, faults=["partition"])

    with ProgressDisplay(source, stream=out, plain_interval=3600) as p:
        for _ in range(50):
            p.refresh()
    lines = out.getvalue().splitlines()
    # one line at the first refresh (rate limit), one forced at exit
    assert len(lines) == 2
    assert "ok 1" in lines[0] and "faults: partition" in lines[0] and "/60s" in lines[0]
    assert "ok 2" in lines[1]
