"""Scrapes every node's Prometheus `/metrics` during a run into `metrics.jsonl`.

One line per node per scrape: `{"time": ns since test start, "node": name, "metrics": {...}}`,
where a labelled series is keyed `name{label=value,…}`. A node that does not answer (killed,
paused, partitioned from the runner) simply has no sample at that time.
"""

from __future__ import annotations

import json
import threading
import urllib.request
from collections.abc import Callable, Mapping
from pathlib import Path


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

    def scrape_once(self) -> list[dict[str, object]]:
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
