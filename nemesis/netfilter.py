"""iptables commands for one lab: its dedicated chains on INPUT, partition and loss rules.

Each lab owns two chains on every host, jumped to from INPUT: `KRAFTLAB-<tag>` (partition drops)
and `KRAFTLAB-<tag>-LOSS` (random loss). Healing flushes a chain; `removal_script` deletes both,
jumps included, which is what `clean` runs. Rules are loaded with one `iptables-restore --noflush`
per host so a partition costs one process per host. Every call waits for the xtables lock (`-w`),
which legacy iptables shares between namespaces.
"""

from __future__ import annotations

import hashlib
import re
import shlex
from collections.abc import Iterable

MAX_CHAIN = 28  # iptables' limit on chain names
_PREFIX = "KRAFTLAB-"
IPT = "iptables -w 10"
LOSS_SUFFIX = "-LOSS"


def lab_tag(lab: str) -> str:
    """A chain-safe tag for the lab, short enough for the longest chain name."""
    room = MAX_CHAIN - len(_PREFIX) - len(LOSS_SUFFIX)
    clean = re.sub(r"[^A-Za-z0-9_.]", "_", lab)
    if len(clean) <= room and clean == lab:
        return clean
    digest = hashlib.sha1(lab.encode()).hexdigest()[:6]
    return f"{clean[: room - 7]}~{digest}"


def partition_chain(lab: str) -> str:
    return f"{_PREFIX}{lab_tag(lab)}"


def loss_chain(lab: str) -> str:
    return f"{_PREFIX}{lab_tag(lab)}{LOSS_SUFFIX}"


def hook_script(chain: str) -> str:
    """Jump from INPUT to `chain` unless that jump exists (the chain must exist)."""
    c = shlex.quote(chain)
    return f"{{ {IPT} -C INPUT -j {c} 2>/dev/null || {IPT} -I INPUT 1 -j {c}; }}"


def load_script(chain: str, rules: Iterable[str], *, hook: bool) -> str:
    """Create-or-flush `chain` and load `rules` (each the tail of an `-A chain …` line) atomically."""
    lines = ["*filter", f":{chain} - [0:0]"]
    lines += [f"-A {chain} {rule}" for rule in rules]
    lines.append("COMMIT")
    body = "\n".join(lines)
    script = f"printf '%s\\n' {shlex.quote(body)} | iptables-restore -w 10 --noflush"
    return f"{script} && {hook_script(chain)}" if hook else script


DROP_MODES: tuple[str, ...] = ("all", "new-connections")


def drop_rules(addresses: Iterable[str], *, mode: str = "all") -> list[str]:
    """DROP rules for traffic from `addresses`: all of it, or (`new-connections`) only the TCP SYNs
    that open a connection, so the receiver refuses to be connected to by those senders while the
    connections it opens to them (their SYN-ACKs and data) still work: an asymmetric cut for
    connection-oriented protocols, where a plain one-way drop cuts both directions."""
    if mode not in DROP_MODES:
        raise ValueError(f"unknown drop mode {mode!r}; known: {', '.join(DROP_MODES)}")
    match = "-p tcp --syn " if mode == "new-connections" else ""
    return [f"-s {addr}/32 {match}-j DROP" for addr in sorted(set(addresses))]


def loss_rules(probability: float) -> list[str]:
    if not 0.0 < probability <= 1.0:
        raise ValueError(f"loss probability must be in (0, 1], got {probability}")
    return [f"! -i lo -m statistic --mode random --probability {probability:.6f} -j DROP"]


def flush_script(chain: str) -> str:
    """Empty the chain if it exists (idempotent, never fails)."""
    return f"{IPT} -F {shlex.quote(chain)} 2>/dev/null || true"


def removal_script(lab: str) -> str:
    """Remove the lab's chains and every INPUT jump to them (idempotent, never fails)."""
    parts = []
    for chain in (partition_chain(lab), loss_chain(lab)):
        c = shlex.quote(chain)
        parts.append(f"while {IPT} -D INPUT -j {c} 2>/dev/null; do :; done; "
                     f"{IPT} -F {c} 2>/dev/null; {IPT} -X {c} 2>/dev/null")
    return "; ".join(parts) + "; true"


def listing_script(lab: str) -> str:
    """Print the rules of the lab's chains (empty if none): what `status` and `clean` look at."""
    return "; ".join(f"{IPT} -S {shlex.quote(c)} 2>/dev/null"
                     for c in (partition_chain(lab), loss_chain(lab))) + "; true"
