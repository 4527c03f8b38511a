"""Partitions: a grudge applied as DROP rules on each receiving host's lab chain; heal flushes it.

`drop: new-connections` drops only the connection-opening SYNs of the grudge: each receiver cannot
be connected to by the hosts it holds a grudge against, but still reaches them over the connections
it opens itself."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from kraftlab.nemesis import grudge as g
from kraftlab.nemesis import netfilter
from kraftlab.nemesis.context import FaultContext
from kraftlab.nemesis.errors import FaultError
from kraftlab.nemesis.fault import Handler
from kraftlab.nemesis.package import Cluster, Draw, FaultKind, Package, Timing, pick, span


class PartitionFault:
    kind = "partition"

    def __init__(self, ctx: FaultContext, rng: random.Random) -> None:
        self.ctx = ctx
        self.rng = rng
        self.chain = netfilter.partition_chain(ctx.lab)
        self._hooked: set[str] = set()

    def operations(self) -> dict[str, Handler]:
        return {"start-partition": self.start, "stop-partition": self.stop}

    def grudge_for(self, value: dict[str, Any]) -> g.Grudge:
        """The grudge an op value asks for: an explicit `grudge`, or a `topology` built now."""
        if "grudge" in value:
            return g.from_json(value["grudge"])
        control = self.ctx.control
        topology = value.get("topology", "random-halves")
        active = self.ctx.active_controller() if topology in g.NEEDS_ACTIVE else None
        rng = random.Random(value["seed"]) if "seed" in value else self.rng
        try:
            return g.build(topology, control.nodes(), controllers=control.controllers(), brokers=control.brokers(),
                           active=active, rng=rng, targets=value.get("nodes", ()),
                           senders=value.get("from", ()), receivers=value.get("to", ()))
        except g.TopologyError as exc:
            raise FaultError(str(exc)) from exc

    def start(self, value: dict[str, Any]) -> dict[str, Any]:
        mode = value.get("drop", "all")
        if mode not in netfilter.DROP_MODES:
            raise FaultError(f"unknown drop mode {mode!r}; known: {', '.join(netfilter.DROP_MODES)}")
        grudge = self.grudge_for(value)
        nodes = self.ctx.control.nodes()
        unknown = (set(grudge) | set().union(*grudge.values())) - set(nodes) if grudge else set()
        if unknown:
            raise FaultError(f"grudge names unknown nodes {sorted(unknown)}")
        done = {"topology": value.get("topology", "grudge"), "grudge": g.to_json(grudge),
                **({"drop": mode} if mode != "all" else {})}
        self.ctx.state.put("partition", "grudge", done["grudge"])
        scripts = {}
        for node in nodes:
            addresses = [self.ctx.address(src) for src in grudge.get(node, ())]
            scripts[node] = netfilter.load_script(self.chain, netfilter.drop_rules(addresses, mode=mode),
                                                  hook=node not in self._hooked)
        self.ctx.run_each(scripts)
        self._hooked.update(nodes)
        return done

    def stop(self, value: dict[str, Any]) -> dict[str, Any]:
        nodes = self.ctx.control.nodes()
        self.ctx.run_each({node: netfilter.flush_script(self.chain) for node in nodes})
        self.ctx.state.clear("partition")
        return {"healed": nodes}

    def heal_ops(self) -> list[tuple[str, dict[str, Any]]]:
        return [("stop-partition", {})] if self.ctx.state.get("partition") else []

    def close(self) -> None:
        pass


# ---- the package: which partitions a schedule draws, and for how long ---------------------------

_ACTIVE_CUTS = ("isolate-controller", "leader-with-brokers", "voters-apart-from-leader")
"""Cuts around the active controller: each is held past a failover."""


def _partition_modes(cluster: Cluster) -> list[tuple[str, float]]:
    """(topology, weight) usable on this cluster; cuts that move leadership weigh the most."""
    modes: list[tuple[str, float]] = []
    if len(cluster.controllers) >= 2:
        modes += [("isolate-controller", 3.0), ("leader-with-brokers", 2.0), ("voters-apart-from-leader", 2.0)]
    if len(cluster.controllers) >= 3:
        modes.append(("minority-controllers", 1.0))
    if cluster.observers:
        modes += [("isolate-broker", 2.0), ("controllers-brokers", 1.0)]
        if len(cluster.controllers) >= 2:
            modes.append(("majority-controllers", 1.0))
    if len(cluster.nodes) >= 2:
        modes += [("random-halves", 1.0), ("one-way", 1.0)]
    if len(cluster.nodes) >= 3:
        modes.append(("bridge", 1.0))
    if len(cluster.nodes) >= 4:
        modes.append(("majorities-ring", 1.0))
    if len(cluster.nodes) >= 3 and len(cluster.controllers) >= 3:
        modes.append(("flapping", 4.0))
    return modes


FLAP_SHAPES: tuple[tuple[str, float], ...] = (
    ("leader-with-brokers", 2.0), ("voters-apart-from-leader", 2.0), ("random-halves", 1.0), ("bridge", 1.0),
    ("majorities-ring", 1.0))
"""What a flapping series changes between, weighted: cuts that leave the active controller its
clients (brokers forward writes to it) but not its quorum — it appends a tail it cannot commit
while the other voters elect —, and shapes in which a different majority (or none) can elect each
time. (Isolating the leader from everyone is not among them: no write reaches it, so it leaves no
tail.)"""


def draw_flapping(rng: random.Random, cluster: Cluster, timing: Timing, enabled: Sequence[str]) -> Draw:
    """Rapid flapping (Jepsen's partition generators): three to six partitions of changing shape,
    back to back, each held a little past a follower's fetch timeout and an election (long enough
    that a side with a majority elects, too short for the cluster to settle), so several leaders are
    elected in quick succession while clients keep writing to whichever leader their broker reaches —
    uncommitted tails in different epochs, which later leaders' DivergingEpoch must cut. Shapes come
    from the seed's enabled modes among `FLAP_SHAPES` (all of them when it enabled none)."""
    usable = {m for m, _ in _partition_modes(cluster)}
    shapes = [(m, w) for m, w in FLAP_SHAPES if m in usable and m in enabled] or [
        (m, w) for m, w in FLAP_SHAPES if m in usable]
    low, high = timing.fetch_s + timing.election_s, timing.failover_s + timing.election_s
    series: list[Draw] = []
    count = rng.randint(3, 6)
    for i in range(count):
        shape = pick(rng, shapes)
        value: dict[str, Any] = {"topology": shape, "seed": rng.randrange(2**31)}
        series.append(Draw("start-partition", value, span(rng, low, high),
                           f"flapping {i + 1}/{count}: {shape}, leadership moves while clients write", "flapping"))
    return replace(series[0], then=tuple(series[1:]))


def draw_partition(rng: random.Random, cluster: Cluster, timing: Timing, enabled: Sequence[str]) -> Draw:
    mode = pick(rng, _partition_modes(cluster), enabled)
    if mode == "flapping":
        return draw_flapping(rng, cluster, timing, enabled)
    value: dict[str, Any] = {"topology": mode, "seed": rng.randrange(2**31)}
    failover = (timing.failover_s, timing.failover_s + 6)
    if mode == "isolate-broker":
        value = {"topology": "isolate-node", "nodes": [rng.choice(cluster.observers)], "seed": value["seed"]}
        if rng.random() < 0.5:
            return Draw("start-partition", value, span(rng, timing.fence_s, timing.fence_s + 4),
                        "a broker cut off past its session: fenced", mode)
        return Draw("start-partition", value, span(rng, timing.self_fence_s + 1, timing.self_fence_s + 5),
                    "a broker cut off past its self-fence bound: it must stop serving", mode)
    if "new-connections" in enabled and mode in (*_ACTIVE_CUTS, "random-halves", "one-way") and rng.random() < 0.3:
        value["drop"] = "new-connections"  # asymmetric: open connections live on, new ones are refused
    purposes = {
        "isolate-controller": "the active controller cut off: a failover",
        "leader-with-brokers": "the leader keeps the brokers and loses the voters: a failover",
        "voters-apart-from-leader": "the leader cut from the voters only: a failover",
        "minority-controllers": "a minority of voters falls behind",
        "majority-controllers": "the voters' majority apart from the brokers: a failover or fences",
        "controllers-brokers": "every broker cut from the quorum: fences",
    }
    if mode == "controllers-brokers":
        return Draw("start-partition", value, span(rng, timing.fence_s, timing.fence_s + 4), purposes[mode], mode)
    if mode == "minority-controllers":
        return Draw("start-partition", value, span(rng, 2.0, timing.failover_s + 4), purposes[mode], mode)
    return Draw("start-partition", value, span(rng, *failover),
                purposes.get(mode, f"{mode}: leadership may move"), mode)


FAULT = FaultKind("partition", PartitionFault)
PACKAGE = Package(
    leader_modes=_ACTIVE_CUTS,
    name="partition", kind="partition", windows={"start-partition": "stop-partition"},
    modes=_partition_modes, draw=draw_partition, gap_s=lambda t: 0.5 * t.failover_s, flags=("new-connections",),
    doc="network partitions (iptables DROP per receiving host), around the active controller, the voters, "
        "the brokers, or random (halves, bridge, majorities ring), or flapping between shapes; "
        "`drop: new-connections` cuts only new TCP connections",
)
