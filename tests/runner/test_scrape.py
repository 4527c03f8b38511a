"""Metrics scraping: Prometheus text parsed, samples written per node, dead nodes skipped."""

from __future__ import annotations

import http.server
import json
import threading
import time
from pathlib import Path

import pytest

from kraftlab.scrape import HW, LAG, MetricsScraper, parse_prometheus, wait_caught_up

TEXT = """# HELP raft_high_watermark The high-water mark
# TYPE raft_high_watermark gauge
raft_high_watermark 42
raft_role{role="leader"} 1
metadata_lag 0.5
garbage line
"""


def test_parse() -> None:
    assert parse_prometheus(TEXT) == {"raft_high_watermark": 42.0, "raft_role{role=leader}": 1.0,
                                      "metadata_lag": 0.5}


def test_scraper_writes_samples_and_skips_dead_nodes(tmp_path: Path) -> None:
    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = TEXT.encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    dead = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
    dead_port = dead.server_address[1]
    dead.server_close()  # nothing listens there now
    out = tmp_path / "metrics.jsonl"
    t0 = time.monotonic_ns()
    s = MetricsScraper({"n1": f"127.0.0.1:{server.server_address[1]}", "n2": f"127.0.0.1:{dead_port}"}, out,
                       lambda: time.monotonic_ns() - t0, interval=0.05).start()
    time.sleep(0.4)
    s.stop()
    server.shutdown()
    server.server_close()
    samples = [json.loads(x) for x in out.read_text().splitlines()]
    assert len(samples) >= 3
    assert {x["node"] for x in samples} == {"n1"}
    assert all(x["metrics"]["raft_high_watermark"] == 42.0 for x in samples)
    assert [x["time"] for x in samples] == sorted(x["time"] for x in samples)


class ScriptedScraper(MetricsScraper):
    """Answers scrape_once from a script of (hw, lag) per node, one step per call."""

    def __init__(self, steps: list[dict[str, tuple[float, float]]]) -> None:
        super().__init__({n: "unused:0" for n in steps[0]}, Path("/dev/null"), lambda: 0)
        self.steps = steps
        self.calls = 0

    def scrape_once(self) -> list[dict]:
        step = self.steps[min(self.calls, len(self.steps) - 1)]
        self.calls += 1
        return [{"time": 0, "node": n, "metrics": {HW: hw, LAG: lag}} for n, (hw, lag) in step.items()]


def test_wait_caught_up_waits_for_the_goal_not_later_writes() -> None:
    s = ScriptedScraper([
        {"n1": (10, 0), "n2": (8, 3)},  # goal: 10
        {"n1": (12, 0), "n2": (9, 1)},  # n2 applied 8
        {"n1": (14, 0), "n2": (11, 1)},  # n2 applied 10: done, though n1 has moved on
    ])
    assert wait_caught_up(s, timeout=5, poll=0.0) == {"n1": 14, "n2": 10}
    assert s.calls == 3


def test_wait_caught_up_names_the_laggard() -> None:
    s = ScriptedScraper([{"n1": (10, 0), "n2": (3, 3)}])
    with pytest.raises(TimeoutError, match="n2"):
        wait_caught_up(s, timeout=0.05, poll=0.01)
