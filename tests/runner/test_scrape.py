"""Metrics scraping: Prometheus text parsed, samples written per node, dead nodes skipped."""

from __future__ import annotations

import http.server
import json
import threading
import time
from pathlib import Path

from kraftlab.scrape import MetricsScraper, parse_prometheus

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
