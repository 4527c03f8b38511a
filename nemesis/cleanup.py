"""Undo what a killed run left on a lab's hosts, from the persisted fault state (and, for
iptables, by chain name even without it): no lab chains, no qdiscs we set, no clock skew, no
stepped clock, no SIGSTOPped node. `control`'s clean calls `clean_lab(lab)`.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any

from kraftlab.control.lab import Lab
from kraftlab.control.state import state_dir
from kraftlab.nemesis import clockfile, netfilter
from kraftlab.nemesis.clock import step_back_command
from kraftlab.nemesis.fanout import fan_out
from kraftlab.nemesis.packet import qdisc_clear_command
from kraftlab.nemesis.ports import FileLedger


def ledger_path(lab: str) -> Path:
    """Where a lab's faults in force are persisted (next to control's lab state files)."""
    return state_dir() / "nemesis" / f"{lab}.json"


def ledger_for(lab: str) -> FileLedger:
    return FileLedger(ledger_path(lab))


def cleanup_scripts(lab: str, state: dict[str, Any], hosts: list[str]) -> dict[str, list[str]]:
    """Per host, the commands that restore it (paused processes first, then network, then clocks)."""
    scripts: dict[str, list[str]] = {h: [] for h in hosts}

    def add(host: str, command: str) -> None:
        scripts.setdefault(host, []).append(command)

    for entry in state.get("process", {}).values():
        if entry.get("state") == "paused" and entry.get("pid"):
            add(entry["host"], f"kill -CONT -- -{int(entry['pid'])} 2>/dev/null || kill -CONT {int(entry['pid'])}"
                               " 2>/dev/null; true")
    for host in hosts:
        add(host, netfilter.removal_script(lab))
    for entry in state.get("qdisc", {}).values():
        add(entry["host"], qdisc_clear_command(entry["address"]))
    for entry in state.get("clock", {}).values():
        add(entry["host"], clockfile.write_command(entry["path"], clockfile.ClockSetting()))
    for entry in state.get("clock_step", {}).values():
        add(entry["host"], step_back_command(float(entry["delta_s"]), list(entry.get("services", []))))
    return scripts


def clean_lab(lab: Lab) -> dict[str, Any]:
    """Restore every host of the lab; returns what was done and what failed (never raises for a
    host that fails; the ledger is kept when something failed so a later clean can retry)."""
    ledger = ledger_for(lab.name)
    state = ledger.load()
    scripts = cleanup_scripts(lab.name, state, lab.names)
    known = set(lab.names)

    def run_all(host: str, commands: list[str]) -> list[str]:
        h = lab.host(host)
        return [h.run(c, timeout=60).stderr.strip() for c in commands]

    outcomes = fan_out({h: partial(run_all, h, c) for h, c in scripts.items() if h in known})
    failed = {h: o.error for h, o in outcomes.items() if o.error}
    missing = sorted(set(scripts) - known)
    if not failed and not missing:
        ledger.path.unlink(missing_ok=True)
    down = sorted(n for n, e in state.get("process", {}).items() if e.get("state") in ("killed", "stopped"))
    down += sorted(state.get("disk", {}))
    return {"hosts": sorted(outcomes), "failed": failed, "unknown_hosts": missing,
            "was_in_force": {k: v for k, v in state.items() if k != "lab" and v}, "nodes_left_down": down}
