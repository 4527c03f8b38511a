"""Packet faults: random loss (iptables statistic, on the lab's LOSS chain) and bandwidth limits
(tc tbf) everywhere; delay, duplication and reordering (tc netem) where the kernel has netem —
otherwise the op fails with "unsupported here: …" and the kernel's own message."""

from __future__ import annotations

import random
import re
import shlex
from collections.abc import Sequence
from typing import Any

from kraftlab.nemesis import netfilter
from kraftlab.nemesis.context import FaultContext
from kraftlab.nemesis.errors import FaultError, PartialFault, Unsupported
from kraftlab.nemesis.fault import Handler
from kraftlab.nemesis.package import Cluster, Draw, FaultKind, Package, Timing, pick, span
from kraftlab.nemesis.process import resolve_nodes

PACKET_KINDS: tuple[str, ...] = ("loss", "bandwidth", "delay", "duplicate", "reorder")
_NETEM_MISSING = re.compile(r"qdisc kind is unknown|Unknown qdisc|not found|No such file", re.I)
_RATE = re.compile(r"^\d+(\.\d+)?(bit|kbit|mbit|gbit|bps|kbps|mbps)$")


def iface_script(address: str) -> str:
    """Sets $IF to the interface holding `address`, or fails."""
    a = shlex.quote(address)
    return (f"IF=$(ip -o -4 addr show | awk -v a={a} '{{split($4,p,\"/\"); if (p[1]==a) {{print $2; exit}}}}'); "
            f"[ -n \"$IF\" ] || {{ echo 'no interface holds {address}' >&2; exit 3; }}")


def qdisc_spec(kind: str, value: dict[str, Any]) -> str:
    """The `tc qdisc replace dev $IF root …` tail for a tc-based packet fault."""
    match kind:
        case "bandwidth":
            rate = str(value.get("rate", "1mbit"))
            if not _RATE.match(rate):
                raise FaultError(f"bad rate {rate!r} (e.g. 512kbit, 1mbit)")
            burst, latency = int(value.get("burst_bytes", 16384)), int(value.get("latency_ms", 200))
            return f"tbf rate {rate} burst {burst} latency {latency}ms"
        case "delay":
            return f"netem delay {float(value.get('delay_ms', 100)):g}ms {float(value.get('jitter_ms', 20)):g}ms"
        case "duplicate":
            return f"netem duplicate {float(value.get('percent', 5)):g}%"
        case "reorder":
            delay, percent = float(value.get("delay_ms", 20)), float(value.get("percent", 25))
            return f"netem delay {delay:g}ms reorder {percent:g}% 50%"
    raise FaultError(f"unknown packet fault {kind!r}; known: {', '.join(PACKET_KINDS)}")


def qdisc_command(address: str, spec: str) -> str:
    return f"{iface_script(address)}; tc qdisc replace dev \"$IF\" root {spec} && echo \"$IF\""


def qdisc_clear_command(address: str) -> str:
    return f"{iface_script(address)}; tc qdisc del dev \"$IF\" root 2>/dev/null; true"


class PacketFault:
    kind = "packet"

    def __init__(self, ctx: FaultContext, rng: random.Random) -> None:
        self.ctx = ctx
        self.rng = rng
        self.chain = netfilter.loss_chain(ctx.lab)

    def operations(self) -> dict[str, Handler]:
        return {"start-packet": self.start, "stop-packet": self.stop}

    def start(self, value: dict[str, Any]) -> dict[str, Any]:
        kind = value.get("kind", "loss")
        who = value if "nodes" in value or "target" in value else {**value, "target": "all"}
        nodes = resolve_nodes(self.ctx, who, self.rng)
        if kind == "loss":
            probability = float(value.get("probability", 0.1))
            rules = netfilter.loss_rules(probability)
            self.ctx.state.put("loss", "nodes", nodes)
            self.ctx.run_each({n: netfilter.load_script(self.chain, rules, hook=True) for n in nodes})
            return {"kind": kind, "nodes": nodes, "probability": probability}
        spec = qdisc_spec(kind, value)
        entries = {n: {"host": self.ctx.host(n).name, "address": self.ctx.address(n), "spec": spec} for n in nodes}
        self.ctx.state.merge("qdisc", entries)
        try:
            results = self.ctx.run_each({n: qdisc_command(self.ctx.address(n), spec) for n in nodes})
        except (FaultError, PartialFault) as exc:
            self._forget_unapplied(nodes)
            if spec.startswith("netem") and _NETEM_MISSING.search(str(exc)):
                raise Unsupported(f"netem ({kind}) is not available in this kernel: {exc}") from exc
            raise
        return {"kind": kind, "nodes": nodes, "qdisc": spec,
                "interfaces": {n: r.stdout.strip() for n, r in results.items()}}

    def _forget_unapplied(self, nodes: list[str]) -> None:
        """After a failed tc command: clear the qdisc everywhere we tried, then forget it."""
        self.ctx.call_each(nodes, lambda n: self.ctx.host(n).run(qdisc_clear_command(self.ctx.address(n))))
        self.ctx.state.remove("qdisc", nodes)

    def stop(self, value: dict[str, Any]) -> dict[str, Any]:
        loss_nodes = self.ctx.state.get("loss").get("nodes", [])
        qdiscs = self.ctx.state.get("qdisc")
        scripts: dict[str, list[str]] = {}
        for node in loss_nodes:
            scripts.setdefault(node, []).append(netfilter.flush_script(self.chain))
        for node, entry in qdiscs.items():
            scripts.setdefault(node, []).append(qdisc_clear_command(entry["address"]))
        self.ctx.run_each({n: "; ".join(s) for n, s in scripts.items()})
        self.ctx.state.clear("loss")
        self.ctx.state.clear("qdisc")
        return {"loss_cleared": sorted(loss_nodes), "qdisc_cleared": sorted(qdiscs)}

    def heal_ops(self) -> list[tuple[str, dict[str, Any]]]:
        return [("stop-packet", {})] if self.ctx.state.get("loss") or self.ctx.state.get("qdisc") else []

    def close(self) -> None:
        pass


# ---- the package: loss or a slow link everywhere, for a window ------------------------------------

GENERATED_KINDS = ("loss", "bandwidth")
"""Kinds a schedule draws: the others need netem, which shared-kernel hosts lack (by hand they fail
as "unsupported here")."""


def _packet_modes(cluster: Cluster) -> list[tuple[str, float]]:
    return [("loss", 2.0), ("bandwidth", 1.0)]


def draw_packet(rng: random.Random, cluster: Cluster, timing: Timing, enabled: Sequence[str]) -> Draw:
    kind = pick(rng, _packet_modes(cluster), enabled)
    duration = span(rng, timing.session_s / 2, timing.session_s * 1.5)
    if kind == "loss":
        p = rng.choice((0.05, 0.1, 0.2, 0.3))
        return Draw("start-packet", {"kind": "loss", "target": "all", "probability": p}, duration,
                    f"{int(p * 100)}% of packets dropped everywhere: retries, timeouts, slow elections", kind)
    rate = rng.choice(("256kbit", "1mbit", "10mbit"))
    return Draw("start-packet", {"kind": "bandwidth", "target": "all", "rate": rate}, duration,
                f"every link limited to {rate}: fetches and heartbeats queue up", kind)


FAULT = FaultKind("packet", PacketFault)
PACKAGE = Package(
    name="packet", kind="packet", windows={"start-packet": "stop-packet"},
    modes=_packet_modes, draw=draw_packet, gap_s=lambda t: t.session_s,
    doc="packet loss and bandwidth limits (delay/duplicate/reorder by hand where netem exists)",
)
