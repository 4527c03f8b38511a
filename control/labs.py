"""Labs by name: bring one up with a backend, reopen it later (`load_lab`), take it down, list,
and clean leftovers of killed runs. Backends are modules with `up`, `open_hosts` and `down`.
"""

from __future__ import annotations

import contextlib
import importlib
import shutil
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from kraftlab.control import containerfs, leftovers, mounts
from kraftlab.control.host import Host
from kraftlab.control.lab import Lab
from kraftlab.control.preflight import SetupError
from kraftlab.control.state import LabState, list_states, load_state, remove_state

BACKENDS = {"netns": "kraftlab.control.netns", "ssh": "kraftlab.control.ssh", "docker": "kraftlab.control.containers",
            "vagrant": "kraftlab.control.vagrant"}


def backend_module(backend: str) -> ModuleType:
    try:
        return importlib.import_module(BACKENDS[backend])
    except KeyError:
        raise ValueError(f"unknown backend {backend!r} (one of {', '.join(BACKENDS)})") from None


def open_hosts(state: LabState) -> list[Host]:
    return list(backend_module(state.backend).open_hosts(state))


def lab_from_state(state: LabState) -> Lab:
    return Lab(state.name, state.backend, open_hosts(state), state.info)


def load_lab(name: str) -> Lab:
    """Reopen a lab that `lab up` created (in this process or an earlier one)."""
    return lab_from_state(load_state(name))


def lab_up(name: str, backend: str = "netns", nodes: int = 5, **options: Any) -> Lab:
    state = backend_module(backend).up(name, nodes, **options)
    return lab_from_state(state)


def lab_down(name: str) -> None:
    try:
        backend = load_state(name).backend
    except LookupError:
        backend = "netns"
    backend_module(backend).down(name)


@dataclass
class CleanReport:
    labs: list[str] = field(default_factory=list)
    found: leftovers.Found = field(default_factory=leftovers.Found)


def clean(name: str | None = None, everything: bool = False) -> CleanReport:
    """Remove a lab (or all labs) and, for namespace labs, every kernel object left by its prefix,
    whether or not its state file survived."""
    if (name is None) == (not everything):
        raise ValueError("clean needs exactly one of a lab name or --all")
    netns = backend_module("netns")
    report = CleanReport(found=leftovers.find(leftovers.ALL if everything else netns.lab_prefix(str(name))))
    states = list_states() if everything else [s for s in list_states() if s.name == name]
    for s in states:
        backend_module(s.backend).down(s.name)
        report.labs.append(s.name)
    with contextlib.suppress(SetupError):  # containers, when a Docker engine answers
        backend_module("docker").remove_lab_objects(None if everything else name)
    containerfs.release(None if everything else name)  # a Docker lab's diskfs mounts, engine or not
    if everything:
        leftovers.remove(leftovers.ALL)
        mounts.unmount_under(netns.WORK_ROOT)
        shutil.rmtree(netns.WORK_ROOT, ignore_errors=True)
    else:
        leftovers.remove(netns.lab_prefix(str(name)))
        mounts.unmount_under(netns.WORK_ROOT / str(name))
        shutil.rmtree(netns.WORK_ROOT / str(name), ignore_errors=True)
        remove_state(str(name))
    return report
