"""Partitions: a grudge applied as DROP rules on each receiving host's lab chain; heal flushes it.

`drop: new-connections` drops only the connection-opening SYNs of the grudge: each receiver cannot
be connected to by the hosts it holds a grudge against, but still reaches them over the connections
it opens itself."""

from __future__ import annotations

import random
from typing import Any

from kraftlab.nemesis import grudge as g
from kraftlab.nemesis import netfilter
from kraftlab.nemesis.context import FaultContext
from kraftlab.nemesis.errors import FaultError
from kraftlab.nemesis.fault import Handler


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
        active = control.active_controller() if topology == "isolate-controller" else None
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
