"""Choosing a /24 for a new namespace lab that no interface, route or other lab on this machine uses.

Candidates are 10.200.0.0/24 … 10.239.255.0/24, probed from a start that depends on the lab name.
`allocation_lock` serialises choosing-and-claiming between concurrent `lab up` runs.
"""

from __future__ import annotations

import fcntl
import hashlib
import ipaddress
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pyroute2 import IPRoute

from kraftlab.control.state import list_states

BASE = ipaddress.IPv4Network("10.200.0.0/13")
LOCK_PATH = Path("/run/kraftlab/subnet.lock")  # machine-wide, whatever the state directory


@contextmanager
def allocation_lock() -> Iterator[None]:
    LOCK_PATH.parent.mkdir(parents=True, exist_ok=True)
    with LOCK_PATH.open("a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def used_networks() -> list[ipaddress.IPv4Network]:
    """Every IPv4 network this machine's root namespace has an address or a route in, plus the
    subnets recorded by existing labs."""
    nets: list[ipaddress.IPv4Network] = []
    with IPRoute() as ipr:
        for a in ipr.get_addr(family=2):
            nets.append(ipaddress.IPv4Network(f"{a.get('IFA_ADDRESS')}/{a['prefixlen']}", strict=False))
        for r in ipr.get_routes(family=2):
            dst = r.get("RTA_DST")
            if dst is not None:
                nets.append(ipaddress.IPv4Network(f"{dst}/{r['dst_len']}", strict=False))
    for s in list_states():
        sub = s.info.get("subnet")
        if isinstance(sub, str):
            nets.append(ipaddress.IPv4Network(sub))
    return nets


def pick_free(name: str, used: list[ipaddress.IPv4Network] | None = None) -> ipaddress.IPv4Network:
    used = used_networks() if used is None else used
    candidates = list(BASE.subnets(new_prefix=24))
    start = int(hashlib.sha1(name.encode()).hexdigest(), 16) % len(candidates)
    for i in range(len(candidates)):
        net = candidates[(start + i) % len(candidates)]
        if not any(net.overlaps(u) for u in used):
            return net
    raise RuntimeError(f"no free /24 in {BASE}")
