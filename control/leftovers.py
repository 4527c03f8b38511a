"""Finding and removing a namespace lab's kernel objects by name prefix: processes in its
namespaces, iptables rules (host tables) naming its interfaces or tagged `kraftlab:PREFIX`,
host-side veths and the bridge, the namespaces, and their `/etc/netns` directories.

`pattern` is a regular expression for the prefix: a lab's literal prefix, or `ALL` for every lab.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from pyroute2 import IPRoute, netns

ALL = "kl[0-9a-f]{5}"


@dataclass
class Found:
    namespaces: list[str] = field(default_factory=list)
    links: list[str] = field(default_factory=list)
    rules: list[tuple[str, str]] = field(default_factory=list)  # (table, "-A CHAIN …")
    etc_dirs: list[str] = field(default_factory=list)
    pids: list[int] = field(default_factory=list)

    def __bool__(self) -> bool:
        return any((self.namespaces, self.links, self.rules, self.etc_dirs, self.pids))

    def summary(self) -> str:
        parts = [f"{len(v)} {k}" for k, v in vars(self).items() if v]
        return ", ".join(parts) or "nothing"


def _matcher(pattern: str) -> re.Pattern[str]:
    return re.compile(rf"^(?:{pattern})-")


def find(pattern: str) -> Found:
    m = _matcher(pattern)
    tag = re.compile(rf"kraftlab:(?:{pattern})\b|\b(?:{pattern})-")
    found = Found()
    found.namespaces = sorted(n for n in netns.listnetns() if m.match(n))
    with IPRoute() as ipr:
        found.links = sorted(n for n in (link.get("IFLA_IFNAME") for link in ipr.get_links()) if n and m.match(n))
    found.rules = [r for r in _iptables_rules() if tag.search(r[1])]
    etc = Path("/etc/netns")
    if etc.is_dir():
        found.etc_dirs = sorted(str(p) for p in etc.iterdir() if m.match(p.name))
    for ns in found.namespaces:
        found.pids.extend(_netns_pids(ns))
    return found


def remove(pattern: str) -> Found:
    """Remove everything `find` sees (processes first, namespaces last); returns what was found."""
    found = find(pattern)
    for pid in found.pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    for table, rule in found.rules:
        args = shlex.split(rule)
        args[0] = "-D"
        subprocess.run(["iptables", "-w", "10", "-t", table, *args], capture_output=True)
    with IPRoute() as ipr:
        # veths first (deleting one end removes its peer at once), then bridges
        for name in sorted(found.links, key=lambda n: n.endswith("-br")):
            idx = ipr.link_lookup(ifname=name)
            if idx:
                with contextlib.suppress(Exception):
                    ipr.link("del", index=idx[0])
    for ns in found.namespaces:
        _wait_no_pids(ns)
        with contextlib.suppress(FileNotFoundError):
            netns.remove(ns)
    for d in found.etc_dirs:
        shutil.rmtree(d, ignore_errors=True)
    return found


def _wait_no_pids(ns: str, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while _netns_pids(ns) and time.monotonic() < deadline:
        for pid in _netns_pids(ns):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.02)


def _netns_pids(ns: str) -> list[int]:
    out = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True)
    return [int(p) for p in out.stdout.split() if p.isdigit()]


def _iptables_rules() -> list[tuple[str, str]]:
    out = subprocess.run(["iptables-save"], capture_output=True, text=True)
    rules: list[tuple[str, str]] = []
    table = "filter"
    for line in out.stdout.splitlines():
        if line.startswith("*"):
            table = line[1:].strip()
        elif line.startswith("-A "):
            rules.append((table, line))
    return rules
