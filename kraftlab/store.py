"""The store: one directory per run, `store/<test-name>/<timestamp>/`, and `store/latest`.

A run directory holds `history.jsonl` (streamed), `test.json` (arguments, seed, versions),
`nemesis-schedule.json`, `nodes/<name>/…` (logs and journals collected from the hosts),
`metrics.jsonl` (scraped during the run), `results.json` and `report.html`.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import sys
import time
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

DEFAULT_STORE = Path(os.environ.get("KRAFTLAB_STORE", "store"))


@dataclass(frozen=True)
class RunDir:
    path: Path

    @property
    def history(self) -> Path:
        return self.path / "history.jsonl"

    @property
    def test_json(self) -> Path:
        return self.path / "test.json"

    @property
    def results(self) -> Path:
        return self.path / "results.json"

    @property
    def report(self) -> Path:
        return self.path / "report.html"

    @property
    def nemesis_schedule(self) -> Path:
        return self.path / "nemesis-schedule.json"

    @property
    def metrics(self) -> Path:
        return self.path / "metrics.jsonl"

    @property
    def nodes(self) -> Path:
        return self.path / "nodes"

    def node_dir(self, name: str) -> Path:
        d = self.nodes / name
        d.mkdir(parents=True, exist_ok=True)
        return d

    def journals(self) -> dict[str, Path]:
        """Every collected node journal, by node name."""
        if not self.nodes.is_dir():
            return {}
        return {d.name: d / "journal.jsonl" for d in sorted(self.nodes.iterdir())
                if (d / "journal.jsonl").is_file()}

    def read_test(self) -> dict[str, Any]:
        return json.loads(self.test_json.read_text()) if self.test_json.is_file() else {}

    def update_test(self, **fields: Any) -> None:
        """Add facts learnt during the run (the lab's name, the cluster id) to test.json."""
        write_json(self.test_json, {**self.read_test(), **fields})

    def read_results(self) -> dict[str, Any] | None:
        return json.loads(self.results.read_text()) if self.results.is_file() else None


def versions() -> dict[str, str]:
    out = {"python": sys.version.split()[0], "platform": platform.platform()}
    for dist in ("kraftlab", "kio"):
        with contextlib.suppress(metadata.PackageNotFoundError):
            out[dist] = metadata.version(dist)
    return out


def new_run(test_name: str, test: dict[str, Any], store: Path = DEFAULT_STORE) -> RunDir:
    """Create the run directory, write test.json and point `store/latest` at it."""
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime()) + f".{time.time_ns() % 1_000_000_000 // 1_000_000:03d}"
    path = store / test_name / stamp
    path.mkdir(parents=True, exist_ok=False)
    run = RunDir(path)
    write_json(run.test_json, {"name": test_name, "started": stamp, "versions": versions(), **test})
    latest = store / "latest"
    tmp = store / f".latest.{os.getpid()}"
    with contextlib.suppress(FileNotFoundError):
        tmp.unlink()
    tmp.symlink_to(path.relative_to(store))
    os.replace(tmp, latest)
    return run


def write_json(path: Path, data: Any) -> None:
    """Atomic JSON write (tmp + rename), so a killed runner never leaves half a file."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, default=str) + "\n")
    os.replace(tmp, path)


def list_runs(store: Path = DEFAULT_STORE) -> list[RunDir]:
    """All run directories (those with a test.json), newest first."""
    if not store.is_dir():
        return []
    runs = [RunDir(p.parent) for p in store.glob("*/*/test.json")]
    return sorted(runs, key=lambda r: r.path.name, reverse=True)
