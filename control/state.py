"""Lab state files: what `lab up` created, so later commands (`lab down`, `kraftlab nemesis`,
`kraftlab test --lab NAME`, `kraftlab clean`) can reopen or remove the lab.

One JSON file per lab in `$KRAFTLAB_STATE_DIR` (default `/var/lib/kraftlab/labs`), written
atomically (tmp + rename). Other parts keep their per-lab files in subdirectories
(`deployments/NAME.json`, `nemesis/NAME.json`); they are removed with the lab.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,39}$")


def state_dir() -> Path:
    return Path(os.environ.get("KRAFTLAB_STATE_DIR", "/var/lib/kraftlab/labs"))


@dataclass
class HostRecord:
    name: str
    address: str
    workdir: str
    extra: dict[str, object] = field(default_factory=dict)


@dataclass
class LabState:
    name: str
    backend: str
    hosts: list[HostRecord]
    info: dict[str, object] = field(default_factory=dict)
    created: float = 0.0

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, sort_keys=True)

    @staticmethod
    def from_json(text: str) -> LabState:
        raw = json.loads(text)
        hosts = [HostRecord(**h) for h in raw.pop("hosts")]
        return LabState(hosts=hosts, **raw)


def check_name(name: str) -> str:
    if not NAME_RE.match(name):
        raise ValueError(f"bad lab name {name!r}: letters, digits, '_', '.', '-' (at most 40)")
    return name


def state_path(name: str) -> Path:
    return state_dir() / f"{check_name(name)}.json"


def save_state(state: LabState) -> Path:
    path = state_path(state.name)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(state.to_json())
    os.replace(tmp, path)
    return path


def load_state(name: str) -> LabState:
    path = state_path(name)
    try:
        return LabState.from_json(path.read_text())
    except FileNotFoundError:
        raise LookupError(f"no lab named {name!r} (no {path}); `kraftlab lab list` shows the labs") from None


def list_states() -> list[LabState]:
    out = []
    for p in sorted(state_dir().glob("*.json")):
        try:
            out.append(LabState.from_json(p.read_text()))
        except (OSError, ValueError, TypeError, KeyError):
            continue
    return out


def remove_state(name: str) -> bool:
    """Remove the lab's state file and its companions that other parts keep beside it
    (`<state dir>/<part>/<name>.json`: the deployment, the nemesis ledger); True if the lab had one."""
    path = state_path(name)
    if path.parent.is_dir():
        for companion in path.parent.glob(f"*/{name}.json"):
            companion.unlink(missing_ok=True)
    try:
        path.unlink()
        return True
    except FileNotFoundError:
        return False
