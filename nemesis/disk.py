"""Disk faults on a stopped node: the node is SIGKILLed, its metadata log directory damaged, and it
is started again on `stop-disk` (after a format, when the data directory was wiped).

A node whose damage reaches committed data (below its checkpointed high-water mark) must refuse to
start: that is the node doing its job. `stop-disk` then does what an operator does with a broker-only
node (an observer, whose log the quorum can give back): wipe its metadata directory (not its
partition logs, nor its journal), format what is missing, start — and says so in its result
(`rebuilt`). A voter that refuses is left down (`refused`), since rebuilding a voter's log breaks Raft's stable-storage
assumption; so is a wiped voter, which is started on its empty directory (never formatted anew) and
must refuse to start.

Layout (node/storage): `<metadata.log.dir>/__cluster_metadata-0/` holds `<20-digit offset>.log`
segments, `*.checkpoint` snapshots and the `quorum-state` file.
"""

from __future__ import annotations

import json
import random
import shlex
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kraftlab.nemesis import powerloss
from kraftlab.nemesis.context import FaultContext
from kraftlab.nemesis.corruption_script import MODES, ZONES
from kraftlab.nemesis.errors import FaultError
from kraftlab.nemesis.fault import Handler
from kraftlab.nemesis.package import Cluster, Draw, FaultKind, Package, Timing, pick, span
from kraftlab.nemesis.process import resolve_nodes

DAMAGES: tuple[str, ...] = ("truncate-tail", "flip-bits", "delete-quorum-state", "wipe")
PARTITION_DIR = "__cluster_metadata-0"
STARTUP_WATCH_S = 10.0  # a node that refuses damaged storage exits within its start-up; a NodeControl
# may say otherwise with a `startup_watch_s` attribute (the in-memory one: its nodes start at once)

# Runs on the host: damages files and prints, as JSON, exactly what it did.
_DAMAGER = r"""
import glob,json,os,random,shutil,sys
action,meta,data,seed,amount=sys.argv[1],sys.argv[2],sys.argv[3],int(sys.argv[4]),int(sys.argv[5])
rng=random.Random(seed)
part=os.path.join(meta,"__cluster_metadata-0")
segs=sorted(glob.glob(os.path.join(part,"*.log")))
snaps=sorted(glob.glob(os.path.join(part,"*.checkpoint")))
out={"action":action}
if action=="truncate-tail":
    if not segs: sys.exit("no log segment in "+part)
    f=segs[-1];size=os.path.getsize(f);new=max(0,size-amount)
    os.truncate(f,new);out.update(file=f,old_size=size,new_size=new)
elif action=="flip-bits":
    files=[f for f in segs+snaps if os.path.getsize(f)>0]
    if not files: sys.exit("no non-empty segment or snapshot in "+part)
    f=rng.choice(files);size=os.path.getsize(f);flips=[]
    with open(f,"r+b") as h:
        for _ in range(amount):
            pos=rng.randrange(size);bit=rng.randrange(8);h.seek(pos);b=h.read(1)[0]
            h.seek(pos);h.write(bytes([b^(1<<bit)]));flips.append([pos,bit])
        h.flush();os.fsync(h.fileno())
    out.update(file=f,size=size,flips=flips)
elif action=="delete-quorum-state":
    f=os.path.join(part,"quorum-state");existed=os.path.exists(f)
    if existed: os.remove(f)
    out.update(file=f,existed=existed)
elif action in ("wipe","wipe-metadata","wipe-metadata-log"):
    removed=[]
    only=None  # a rebuild: the metadata's own files only, whatever else log.dirs keeps beside them (Kafka's
    if action!="wipe":  # shared layout, as on --diskfs); meta.properties (the directory id) kept by -log
        only=("__cluster_metadata-0","bootstrap.checkpoint")+(("meta.properties",) if action=="wipe-metadata" else ())
    for d in dict.fromkeys([data,meta] if action=="wipe" else [meta]):
        if os.path.isdir(d):
            for name in sorted(os.listdir(d)):
                if only is not None and name not in only: continue
                p=os.path.join(d,name);removed.append(p)
                shutil.rmtree(p) if os.path.isdir(p) and not os.path.islink(p) else os.remove(p)
    out.update(removed=removed)
else: sys.exit("unknown damage "+action)
print(json.dumps(out))
"""


_CORRUPTION = Path(__file__).with_name("corruption_script.py").read_text()
CORRUPTION_MODES = MODES


def corruption_command(mode: str, zone: str, meta_dir: str, stash: str, seed: int, index: int, count: int,
                       amount: int) -> str:
    args = [mode, zone, meta_dir, stash, str(seed), str(index), str(count), str(amount)]
    return "python3 -c " + shlex.quote(_CORRUPTION) + " " + " ".join(shlex.quote(a) for a in args)


def damage_command(action: str, meta_dir: str, data_dir: str, seed: int, amount: int) -> str:
    args = [action, meta_dir, data_dir, str(seed), str(amount)]
    return "python3 -c " + shlex.quote(_DAMAGER) + " " + " ".join(shlex.quote(a) for a in args)


class DiskFault:
    kind = "disk"

    def __init__(self, ctx: FaultContext, rng: random.Random) -> None:
        self.ctx = ctx
        self.rng = rng

    def operations(self) -> dict[str, Handler]:
        return {"start-disk": self.start, "stop-disk": self.stop}

    def start(self, value: dict[str, Any]) -> dict[str, Any]:
        if "zone" in value:
            return self._corrupt(value)
        damage = value.get("damage", "truncate-tail")
        if damage not in DAMAGES:
            raise FaultError(f"unknown disk damage {damage!r}; known: {', '.join(DAMAGES)}")
        seed = int(value.get("seed", self.rng.randrange(2**31)))
        amount = int(value.get("amount", 1 if damage == "flip-bits" else 100))
        nodes = resolve_nodes(self.ctx, value, self.rng)
        control = self.ctx.control
        done: dict[str, Any] = {}
        for node in nodes:
            self.ctx.state.put("disk", node, {"host": control.host(node).name, "damage": damage, "done": None})
            if control.running(node):
                powerloss.crash(control, node)
            result = control.host(node).run(damage_command(damage, control.metadata_log_dir(node),
                                                           control.data_dir(node), seed, amount), timeout=60)
            if not result.ok:
                done[node] = {"error": result.stderr.strip()[-500:]}
                continue
            done[node] = json.loads(result.stdout.strip().splitlines()[-1])
            self.ctx.state.put("disk", node, {"host": control.host(node).name, "damage": damage, "done": done[node]})
        failed = {n: d["error"] for n, d in done.items() if "error" in d}
        if failed and len(failed) == len(nodes):
            raise FaultError("; ".join(f"{n}: {e}" for n, e in failed.items()) + " (the nodes are down)")
        return {"nodes": nodes, "damage": damage, "seed": seed, "amount": amount, "done": done}

    def _corrupt(self, value: dict[str, Any]) -> dict[str, Any]:
        """Damage by KRaft zone (nemesis.corruption_script): the nodes are killed (a power loss) and
        damaged, each in its own region when `helix` (every node, never two in the same place);
        `snapshot` only keeps a copy of the zone (the node runs on) for a later `restore`."""
        mode, zone = value.get("damage", "flip-bits"), str(value["zone"])
        if mode not in CORRUPTION_MODES:
            raise FaultError(f"unknown corruption {mode!r}; known: {', '.join(CORRUPTION_MODES)}")
        if zone not in ZONES:
            raise FaultError(f"unknown zone {zone!r}; known: {', '.join(ZONES)}")
        seed = int(value.get("seed", self.rng.randrange(2**31)))
        amount = int(value.get("amount", 1 if mode == "flip-bits" else 64))
        helix = bool(value.get("helix"))
        nodes = resolve_nodes(self.ctx, value, self.rng)
        control = self.ctx.control
        done: dict[str, Any] = {}
        for k, node in enumerate(nodes):
            index, count = (k, len(nodes)) if helix else (0, 1)
            if mode != "snapshot":
                self.ctx.state.put("disk", node, {"host": control.host(node).name, "damage": mode, "zone": zone,
                                                  "done": None})
                if control.running(node):
                    powerloss.crash(control, node)
            stash = f"{control.data_dir(node).rsplit('/', 1)[0]}/disk-snapshots"
            result = control.host(node).run(corruption_command(mode, zone, control.metadata_log_dir(node), stash,
                                                               seed + k, index, count, amount), timeout=60)
            done[node] = (json.loads(result.stdout.strip().splitlines()[-1]) if result.ok
                          else {"error": result.stderr.strip()[-500:]})
            if mode != "snapshot":
                self.ctx.state.put("disk", node, {"host": control.host(node).name, "damage": mode, "zone": zone,
                                                  "done": done[node]})
        failed = {n: d["error"] for n, d in done.items() if "error" in d}
        if failed and len(failed) == len(nodes):
            raise FaultError("; ".join(f"{n}: {e}" for n, e in failed.items()))
        return {"nodes": nodes, "damage": mode, "zone": zone, "helix": helix, "seed": seed, "amount": amount,
                "done": done}

    def stop(self, value: dict[str, Any]) -> dict[str, Any]:
        """Start the damaged nodes again: a wiped broker-only node formatted anew first; a wiped voter
        not (it must refuse to start on an empty directory: formatting it anew would give the quorum an
        empty voter, breaking Raft's stable storage); a node that refuses its damage rebuilt if an
        observer, left down if a voter. `outcomes` says per node what became of its damage: `served`
        (it started on it), `formatted`, `rebuilt` or `refused`."""
        in_force = self.ctx.state.get("disk")
        control = self.ctx.control
        voters = set(control.controllers())
        restarted, formatted = [], []
        for node in sorted(in_force):
            if in_force[node]["damage"] == "wipe" and node not in voters:
                control.reformat(node)
                formatted.append(node)
            if not control.running(node):
                control.start(node)
                restarted.append(node)
        # every damaged node is watched, not only those started here: another package's restart
        # during the window may have started one moments ago, still reading the damage
        watch = [n for n in sorted(in_force) if n not in formatted]
        default_watch = getattr(control, "startup_watch_s", STARTUP_WATCH_S)
        rebuilt, refused = self._rebuild_refusals(watch, float(value.get("watch_s", default_watch)),
                                                  {n: in_force[n].get("zone") for n in watch})
        outcomes = {node: {"damage": in_force[node]["damage"], "zone": in_force[node].get("zone"),
                           "outcome": "refused" if node in refused else "rebuilt" if node in rebuilt
                           else "formatted" if node in formatted else "served"} for node in sorted(in_force)}
        for node in sorted(in_force):
            self.ctx.state.drop("disk", node)
        return {"restarted": restarted, "formatted": formatted + rebuilt, "rebuilt": rebuilt, "refused": refused,
                "outcomes": outcomes}

    def _rebuild_refusals(self, nodes: list[str], watch_s: float,
                          zones: dict[str, str | None]) -> tuple[list[str], list[str]]:
        """Nodes that exited within `watch_s` of their restart refused their damaged storage: observers
        get their metadata wiped (`zones`: what was damaged), are formatted and started again; voters
        are left down and named."""
        control = self.ctx.control
        deadline = time.monotonic() + watch_s
        down: set[str] = set()
        while nodes:
            down |= {n for n in nodes if not control.running(n)}
            if len(down) == len(nodes) or time.monotonic() >= deadline:
                break
            time.sleep(0.2)
        voters = set(control.controllers())
        rebuilt, refused = [], []
        for node in sorted(down):
            if node in voters:
                refused.append(node)
                continue
            # the metadata log only, as an operator rebuilds a broker's metadata: its partition logs
            # stay, with their directory id (meta.properties too, unless that was the damage), so the
            # controller knows the replicas came back (KIP-858)
            action = "wipe-metadata" if zones.get(node) == "meta.properties" else "wipe-metadata-log"
            result = control.host(node).run(damage_command(action, control.metadata_log_dir(node),
                                                           control.data_dir(node), 0, 0), timeout=60)
            if not result.ok:
                raise FaultError(f"{node}: could not wipe its refused storage: {result.stderr.strip()[-300:]}")
            control.reformat(node)
            control.start(node)
            rebuilt.append(node)
        return rebuilt, refused

    def heal_ops(self) -> list[tuple[str, dict[str, Any]]]:
        return [("stop-disk", {})] if self.ctx.state.get("disk") else []

    def close(self) -> None:
        pass


# ---- the package: damage on broker-only nodes ------------------------------------------------------
# Raft assumes stable storage on voters: a voter that loses fsynced entries (a cut tail) or its
# quorum-state may help elect a leader without committed data or vote twice in an epoch, and one
# with damage below its high-water mark must refuse to start. Either way a correct node would be
# judged by a fault outside its model, so generated schedules damage broker-only nodes (observers),
# whose logs can be rebuilt from the quorum; damaging a voter stays possible by hand
# (`kraftlab nemesis start-disk --nodes n1`).

# Corruption by zone is generated the same way: on one observer, or (`helix`) on every observer, each
# in its own region of the file; by hand it reaches any node.
GENERATED_CORRUPTIONS = ("flip-bits", "truncate", "zero", "copy-chunk")


def _disk_modes(cluster: Cluster) -> list[tuple[str, float]]:
    if not cluster.observers:
        return []
    modes = [(d, 1.0) for d in DAMAGES] + [("zone", 2.0)]
    if len(cluster.observers) >= 2:
        modes.append(("helix", 1.0))
    return modes


def draw_disk(rng: random.Random, cluster: Cluster, timing: Timing, enabled: Sequence[str]) -> Draw:
    damage = pick(rng, _disk_modes(cluster), enabled)
    seed = rng.randrange(2**31)
    if damage in ("zone", "helix"):
        mode, zone = rng.choice(GENERATED_CORRUPTIONS), rng.choice(ZONES)
        nodes = list(cluster.observers) if damage == "helix" else [rng.choice(cluster.observers)]
        return Draw("start-disk", {"nodes": nodes, "damage": mode, "zone": zone, "helix": damage == "helix",
                                   "seed": seed}, span(rng, 3.0, 10.0),
                    f"{mode} of {zone} on {'every broker, each in its own region' if damage == 'helix' else 'a broker'}"
                    ": it must recover from the quorum or refuse loudly", damage)
    return Draw("start-disk", {"nodes": [rng.choice(cluster.observers)], "damage": damage,
                               "seed": seed}, span(rng, 3.0, 10.0),
                f"{damage} on a broker's metadata log: it must recover from the quorum or refuse loudly", damage)


FAULT = FaultKind("disk", DiskFault)
PACKAGE = Package(
    name="disk", kind="disk", windows={"start-disk": "stop-disk"},
    modes=_disk_modes, draw=draw_disk, gap_s=lambda t: 2 * t.session_s,
    doc="damage to broker-only nodes' metadata logs (truncated tail, flipped bits, lost quorum-state, wipe; "
        "corruption by KRaft zone, also helix across every broker)",
)
