"""External histories with known verdicts (a manifest.json of Knossos and Porcupine files):
which model and semantics to check each file with. Used by the agreement tests and the bench.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kraftlab.checker.models import Model, build_model


def _shared_histories() -> Path:
    """`shared/histories` in the nearest folder above the repository that has one (the workspace
    keeps the external histories beside its checkouts)."""
    root = Path(__file__).resolve().parents[1]
    found = next((d / "shared" / "histories" for d in root.parents if (d / "shared" / "histories").is_dir()), None)
    return found or root.parent / "shared" / "histories"


DEFAULT_DIR = Path(os.environ.get("KRAFTLAB_HISTORIES") or _shared_histories())
"""The external histories with known verdicts: `KRAFTLAB_HISTORIES`, else `shared/histories` above
the repository."""


@dataclass(frozen=True)
class Reference:
    path: Path
    format: str
    model: str
    initial: Any
    expected: bool
    n_ops: int
    porcupine_ms: dict[str, float]

    def build(self, partitioned: bool = True) -> Model:
        """The model with the file's semantics (Knossos EDN: a nil read says nothing)."""
        if self.model.startswith("kv"):
            return build_model("kv" if partitioned else "kv-whole", self.initial)
        return build_model(self.model, self.initial, nil_read_any=self.format == "edn")

    @property
    def reader_format(self) -> str:
        return "etcd-log" if self.format == "jepsen-etcd-log" else "edn"


def load_manifest(directory: str | Path = DEFAULT_DIR) -> list[Reference]:
    base = Path(directory)
    entries = json.loads((base / "manifest.json").read_text())
    out = []
    for e in entries:
        timings = {k: v["median_check_ms"] for k, v in (e.get("porcupine_go_median_ms_here") or {}).items()}
        out.append(Reference(base / e["file"], e["format"], e["model"].split(" ")[0], e["init_state"],
                             bool(e["expected_linearizable"]), int(e["n_ops"]), timings))
    return out
