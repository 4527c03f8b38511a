"""Scrapes every node's Prometheus `/metrics` during a run into `metrics.jsonl`.

One line per node per scrape: `{"time": ns since test start, "node": name, "metrics": {...}}`,
where a labelled series is keyed `name{label=value,…}`. A node that does not answer (killed,
paused, partitioned from the runner) simply has no sample at that time.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.request
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any


def parse_prometheus(text: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        try:
            series, value = line.rsplit(" ", 1)
            v = float(value)
        except ValueError:
            continue
        if "{" in series:
            name, labels = series.split("{", 1)
            labels = labels.rstrip("}").replace('"', "")
            series = f"{name}{{{labels}}}" if labels else name
        out[series] = v
    return out


class MetricsScraper:
    def __init__(self, targets: Mapping[str, str], path: Path, now_ns: Callable[[], int], *,
                 interval: float = 1.0, timeout: float = 0.5) -> None:
        """`targets`: node name → `host:port` of its metrics endpoint."""
        self.targets = dict(targets)
        self.path = path
        self.now_ns = now_ns
        self.interval = interval
        self.timeout = timeout
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="metrics-scraper", daemon=True)

    def scrape_once(self) -> list[dict[str, Any]]:
        """One sample per node that answered: {"time", "node", "metrics": {series: value}}."""
        lines = []
        for node, target in self.targets.items():
            try:
                with urllib.request.urlopen(f"http://{target}/metrics", timeout=self.timeout) as resp:
                    metrics = parse_prometheus(resp.read().decode("utf-8", "replace"))
            except (OSError, ValueError):
                continue
            lines.append({"time": self.now_ns(), "node": node, "metrics": metrics})
        return lines

    def _loop(self) -> None:
        with self.path.open("a", encoding="utf-8") as f:
            while not self._stop.is_set():
                for sample in self.scrape_once():
                    f.write(json.dumps(sample, separators=(",", ":")) + "\n")
                    self.samples += 1
                f.flush()
                self._stop.wait(self.interval)

    def start(self) -> MetricsScraper:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=self.timeout * len(self.targets) + 2)


HW = "kraft_raft_high_watermark"
LAG = "kraft_metadata_lag"


def applied_offsets(samples: list[dict[str, Any]]) -> dict[str, float]:
    """Each node's applied metadata offset (its high-water mark less its metadata lag)."""
    return {s["node"]: s["metrics"][HW] - s["metrics"][LAG] for s in samples
            if HW in s["metrics"] and LAG in s["metrics"]}


def wait_caught_up(scraper: MetricsScraper, timeout: float, poll: float = 0.25) -> dict[str, float]:
    """Wait until every node has applied the metadata log up to the highest high-water mark any
    node reported when the wait began (later writes, such as periodic no-op records, do not
    move the goal). Returns the applied offsets; raises TimeoutError naming the laggards."""
    goal = max((s["metrics"][HW] for s in scraper.scrape_once() if HW in s["metrics"]), default=0.0)
    deadline = time.monotonic() + timeout
    applied: dict[str, float] = {}
    while True:
        applied = applied_offsets(scraper.scrape_once())
        behind = {n: applied.get(n) for n in scraper.targets if applied.get(n, -1.0) < goal}
        if not behind:
            return applied
        if time.monotonic() > deadline:
            raise TimeoutError(f"nodes not caught up to offset {goal:.0f} after {timeout:g}s: {behind}")
        time.sleep(poll)
