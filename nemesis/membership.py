"""Membership faults on a dynamic quorum (KIP-853): controllers added and removed (the active one
included), a controller's disk replaced, the quorum grown and shrunk between 1 and 5 voters — one
voter change at a time (or two at once, to test the leader's one-at-a-time rule), each as Kafka's
tools make it (AddRaftVoter / RemoveRaftVoter sent to the quorum's leader), each journalled with its
outcome in the op's completion (`changes`).

A window (`start-membership`) makes one change of the voter set:

- `shrink`: voters removed one at a time until `to` remain (`target: controller`: the active
  controller first). The active controller is removed only while three or more voters remain: a
  leader removing itself from two leaves one voter that must win an election alone, where KIP-853
  can wedge;
- `grow`: running controllers that are not voters (the lab's spares, or removed voters) added one
  at a time until `to` voters;
- `replace`: a voter's disk replaced, as an operator does it: the node killed, its metadata
  directory wiped and formatted anew (`--no-initial-controllers`: a new directory id), started (an
  observer now), and the old (id, directory id) removed. Only with three or more voters (with two,
  the other cannot be elected alone to remove the old one).
- `concurrent`: two changes (two spares added, a spare added and a follower removed, or two
  followers removed) sent to the leader at the same moment, each over its own connection
  (nemesis.voter_races), then each carried on alone. KIP-853's leader takes one at a time: the other
  is answered REQUEST_TIMED_OUT until the first commits (`sent_together` keeps the first answers);
- `replace-split`: a follower's disk replaced (as `replace`) but its old (id, directory id) left in
  the set, then the active controller paused for `elect_s` (a failover's length): the others
  campaign and ask the new disk, which has no vote to give. The window's end removes the old voter
  and adds the new disk.

`stop-membership` (the window's end, and the final heal) brings the voter set back to the one in
force before the first change — the same nodes, each with the directory id its disk holds now (a
replaced disk is added as the new voter) — one change at a time: missing voters added, voters on a
replaced disk removed (then added), voters the nemesis added removed.

By hand (`kraftlab nemesis membership …`): `add-controller`, `remove-controller` and `replace-disk`
(the replacement, then the new disk added) on named nodes; a later heal returns to the set before.

Random choices made when an op fires (which voters, which spares) come from the op's `seed`, in the
order of the voter set then in force: a replay against the same quorum chooses the same nodes.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from kraftlab.control.host import HostError
from kraftlab.nemesis import powerloss, voter_races
from kraftlab.nemesis.context import FaultContext
from kraftlab.nemesis.errors import FaultError, PartialFault, Unsupported
from kraftlab.nemesis.fault import Handler
from kraftlab.nemesis.package import Cluster, Draw, FaultKind, Package, Timing, pick, span
from kraftlab.nemesis.ports import QuorumView, VoterControl, VoterRequest
from kraftlab.nemesis.voter_changes import ADD, REMOVE, Change, carry_out, look

CHANGES: tuple[str, ...] = ("shrink", "grow", "replace", "concurrent", "replace-split")
MAX_VOTERS = 5
DEADLINE_S = 10.0  # per voter change: retried until in force or refused for good, at most this long
CATCH_UP_S = 6.0  # how long the leader may wait for an added voter to catch up (the tool's --timeout)
VIEW_WAIT_S = 3.0  # how long an op waits for a leader to describe the quorum
HEAL_WAIT_S = 30.0  # the final heal's deadline and wait: every other fault is undone by then
ELECT_S = 5.5  # replace-split: how long the active controller is paused (the draw sizes it: Timing.failover_s)
MAX_HEAL_STEPS = 12
VIEW_RETRY_S = 0.5
hold: Callable[[float], None] = time.sleep
"""How a paused leader is held paused (tests replace it: the pause then takes no time)."""
# A schedule's steps fire one after another: an op waiting here holds every other lane's next step (a
# restart, a partition's end) that the quorum may need to elect a leader. Ops in a run wait briefly and
# fail (the window's end or the final heal comes back to it); the final heal, after every other fault
# is undone, waits longer.


class MembershipFault:
    kind = "membership"

    def __init__(self, ctx: FaultContext, rng: random.Random) -> None:
        self.ctx = ctx
        self.rng = rng

    def operations(self) -> dict[str, Handler]:
        return {"start-membership": self.start, "stop-membership": self.stop, "add-controller": self.add,
                "remove-controller": self.remove, "replace-disk": self.replace}

    # ---- the seams -------------------------------------------------------------------------------

    def _quorum(self) -> VoterControl:
        control = self.ctx.control
        if not isinstance(control, VoterControl) or not control.dynamic_quorum():
            raise Unsupported("the lab's quorum is static (controller.quorum.voters): voters cannot change; "
                              "deploy it as a dynamic quorum (--quorum dynamic)")
        return control

    def _view(self, quorum: VoterControl, value: dict[str, Any] | None = None) -> QuorumView:
        """The voter set now; while no controller answers (no leader: an election, a partition) it is
        asked again for `wait_s`."""
        deadline = time.monotonic() + float((value or {}).get("wait_s", VIEW_WAIT_S))
        while (view := look(quorum)) is None:
            if time.monotonic() >= deadline:
                raise FaultError("no controller answered DescribeQuorum (no leader)")
            time.sleep(VIEW_RETRY_S)
        return view

    def _remember(self, view: QuorumView) -> None:
        """The voter set to return to: the one in force before the first change (kept until healed)."""
        if "desired" not in self.ctx.state.get("membership"):
            self.ctx.state.put("membership", "desired", sorted(view.voters, key=self._order))

    def _order(self, node: str) -> int:
        nodes = self.ctx.control.nodes()
        return nodes.index(node) if node in nodes else len(nodes)

    def _sorted(self, nodes: Iterable[str]) -> list[str]:
        return sorted(nodes, key=self._order)

    @staticmethod
    def _carry_out(quorum: VoterControl, kind: str, node: str, directory_id: str | None,
                   value: dict[str, Any]) -> Change:
        return carry_out(quorum, kind, node, directory_id, deadline_s=float(value.get("deadline_s", DEADLINE_S)),
                         catch_up_s=float(value.get("catch_up_s", CATCH_UP_S)))

    # ---- one change --------------------------------------------------------------------------------

    def _add(self, quorum: VoterControl, node: str, value: dict[str, Any]) -> Change:
        if node not in self.ctx.control.controllers():
            return Change(ADD, node, None, "fail", f"{node} has no controller role (process.roles)")
        return self._carry_out(quorum, ADD, node, quorum.directory_id(node), value)

    def _remove(self, quorum: VoterControl, node: str, directory_id: str | None, value: dict[str, Any]) -> Change:
        return self._carry_out(quorum, REMOVE, node, directory_id, value)

    @staticmethod
    def _finish(done: dict[str, Any], changes: list[Change]) -> dict[str, Any]:
        """The completion: ok when every change is in force; fail when none was and none may be;
        info (PartialFault) otherwise."""
        done["changes"] = [c.to_json() for c in changes]
        failed = [c for c in changes if c.outcome != "ok"]
        if not failed:
            return done
        why = "; ".join(f"{c.kind} {c.node}: {c.outcome}: {c.error}" for c in failed)
        if all(c.outcome == "fail" for c in changes):
            raise FaultError(why)
        raise PartialFault(done, why)

    # ---- windows -------------------------------------------------------------------------------------

    def start(self, value: dict[str, Any]) -> dict[str, Any]:
        change = str(value.get("change", ""))
        if change not in CHANGES:
            raise FaultError(f"unknown membership change {change!r}; known: {', '.join(CHANGES)}")
        quorum = self._quorum()
        view = self._view(quorum, value)
        self._remember(view)
        rng = random.Random(int(value.get("seed", self.rng.randrange(2**31))))
        # A window starts from the first voter set: what an earlier window's end could not undo is undone now.
        restored, back = self._restore(quorum, list(self.ctx.state.get("membership")["desired"]), value)
        if back is None:
            self._finish({"change": change, "nodes": []}, restored)
            raise FaultError("the voters are not back to the first set yet")
        view = back
        if change in ("replace", "replace-split"):
            settled, why = self._until_settled(quorum, value)
            if settled is None:
                self._finish({"change": change, "nodes": []}, restored)
                raise FaultError(f"the quorum has not settled ({why}): a disk is replaced only in a settled quorum")
            view = settled
        done: dict[str, Any] = {"change": change, "voters_before": self._sorted(view.voters)}
        if change == "shrink":
            changes = self._shrink(quorum, view, value, rng)
        elif change == "grow":
            changes = self._grow(quorum, view, value, rng)
        elif change == "concurrent":
            sent, changes = self._together(quorum, view, value, rng)
            done["sent_together"] = sent
        elif change == "replace-split":
            done.update(self._replace_then_elect(quorum, view, value, rng))
            changes = []
        else:
            node = self._replaced(view, value, rng)
            changes = [self._replace_disk(quorum, node, view.voters[node], value)]
        done["nodes"] = [c.node for c in changes] or done.get("nodes", [])
        changes = restored + changes
        after = self._settled(quorum, self._election(value) if change == "shrink" else value)
        done["voters_after"] = self._sorted(after.voters) if after is not None else None
        done = self._finish(done, changes)
        if change == "shrink" and (after is None or len(after.voters) > int(value.get("to", 0))):
            raise PartialFault(done, f"the voters are {done['voters_after']}, not yet {value.get('to')}: "
                                     "no leader described the quorum after a removal")
        return done

    def _shrink(self, quorum: VoterControl, view: QuorumView, value: dict[str, Any],
                rng: random.Random) -> list[Change]:
        listed = list(value.get("nodes", ()))
        to = int(value.get("to", len(view.voters) - len(listed) if listed else len(view.voters) - 1))
        if not 1 <= to < len(view.voters):
            raise FaultError(f"cannot shrink {len(view.voters)} voters to {to} (1 ≤ to < voters)")
        changes: list[Change] = []
        while len(view.voters) > to:
            if listed:
                node = listed.pop(0)
            elif not changes and value.get("target") == "controller" and view.leader in view.voters \
                    and len(view.voters) >= 3:
                node = view.leader
            else:
                spared = {view.leader} if len(view.voters) <= 2 else set()
                node = rng.choice([n for n in self._sorted(view.voters) if n not in spared])
            if node not in view.voters:
                changes.append(Change(REMOVE, node, None, "fail", f"{node} is not a voter"))
                break
            changes.append(self._remove(quorum, node, view.voters[node], value))
            after = self._settled(quorum, self._election(value))  # a removed leader resigns: the next one
            if changes[-1].outcome != "ok" or after is None:
                break
            view = after
        return changes

    @staticmethod
    def _election(value: dict[str, Any]) -> dict[str, Any]:
        """After a removal (maybe of the leader, which then resigns) a leader is awaited as long as a
        change may take: an election is part of the change."""
        return {**value, "wait_s": max(float(value.get("wait_s", VIEW_WAIT_S)),
                                       float(value.get("deadline_s", DEADLINE_S)))}

    def _until_settled(self, quorum: VoterControl, value: dict[str, Any]) -> tuple[QuorumView | None, str]:
        """The quorum once settled (`QuorumView.unsettled`), asked again for `wait_s`; else (None, why).
        An operator replaces a disk only then: a window's replacement in a quorum that has not
        settled could lose the only copy of the leader's epoch and leave no replica able to win."""
        deadline = time.monotonic() + float(value.get("wait_s", VIEW_WAIT_S))
        while True:
            view = look(quorum)
            why = "no controller answered DescribeQuorum (no leader)" if view is None else view.unsettled()
            if view is not None and why is None:
                return view, ""
            if time.monotonic() >= deadline:
                return None, str(why)
            time.sleep(VIEW_RETRY_S)

    def _settled(self, quorum: VoterControl, value: dict[str, Any]) -> QuorumView | None:
        try:
            return self._view(quorum, value)
        except FaultError:
            return None

    def _grow(self, quorum: VoterControl, view: QuorumView, value: dict[str, Any],
              rng: random.Random) -> list[Change]:
        listed = list(value.get("nodes", ()))
        control = self.ctx.control
        spares = [n for n in control.controllers() if n not in view.voters and control.running(n)]
        to = int(value.get("to", len(view.voters) + (len(listed) or 1)))
        if not len(view.voters) < to <= MAX_VOTERS:
            raise FaultError(f"cannot grow {len(view.voters)} voters to {to} (voters < to ≤ {MAX_VOTERS})")
        chosen = listed or rng.sample(spares, min(len(spares), to - len(view.voters)))
        if not chosen:
            raise FaultError("no running controller is outside the voter set (no spare to add)")
        changes: list[Change] = []
        for node in chosen:
            changes.append(self._add(quorum, node, value))
            if changes[-1].outcome != "ok":
                break
        return changes

    def _replaced(self, view: QuorumView, value: dict[str, Any], rng: random.Random) -> str:
        if len(view.voters) < 3:
            raise FaultError(f"a disk is replaced only with 3 or more voters ({len(view.voters)} now: the others "
                             "could not elect a leader to remove the old disk)")
        listed = list(value.get("nodes", ()))
        if listed:
            node = listed[0]
        elif value.get("target") == "controller" and view.leader is not None:
            node = view.leader
        else:
            node = rng.choice(self._sorted(view.voters))
        if node not in view.voters:
            raise FaultError(f"{node} is not a voter")
        return node

    def _replace_disk(self, quorum: VoterControl, node: str, old_directory: str, value: dict[str, Any]) -> Change:
        """Kill the node, give it a new disk (wiped and formatted: a new directory id), start it, and
        remove its old (id, directory id) from the voters."""
        self._swap_disk(quorum, node, "replace")
        return self._remove(quorum, node, old_directory, value)

    def _swap_disk(self, quorum: VoterControl, node: str, change: str) -> None:
        """Kill the node, give it a new disk (wiped and formatted: a new directory id), start it."""
        control = self.ctx.control
        host = control.host(node).name
        self.ctx.state.put("process", node, {"state": "killed", "host": host})  # a killed run leaves it to heal
        try:
            if control.running(node):
                powerloss.crash(control, node)
            quorum.new_disk(node)
            control.start(node)
        except HostError as exc:
            raise PartialFault({"change": change, "nodes": [node]}, f"{node}: new disk: {exc}") from exc
        self.ctx.state.drop("process", node)

    def _replace_then_elect(self, quorum: VoterControl, view: QuorumView, value: dict[str, Any],
                            rng: random.Random) -> dict[str, Any]:
        """A voter's disk replaced but its old (id, directory id) left in the voter set, then an election
        forced (the active controller paused past a failover) before the window's end removes the old
        voter and adds the new disk: the new disk has no vote to give (KIP-853's directory ids), and a
        node that gives the old one's is caught (ReplacedDiskNeverVotes)."""
        if len(view.voters) < 3:
            raise FaultError(f"a disk is replaced only with 3 or more voters ({len(view.voters)} now)")
        others = [n for n in self._sorted(view.voters) if n != view.leader]
        listed = list(value.get("nodes", ()))
        node = listed[0] if listed else rng.choice(others)
        if node not in others:
            raise FaultError(f"{node} is not a voter other than the active controller")
        old = view.voters[node]
        self._swap_disk(quorum, node, "replace-split")
        done: dict[str, Any] = {"nodes": [node], "old_directory_id": old, "directory_id": quorum.directory_id(node)}
        if view.leader is not None:
            done["election"] = self._pause_leader(view.leader, float(value.get("elect_s", ELECT_S)))
            after = self._settled(quorum, self._election(value))
            done["election"]["leader_after"] = after.leader if after is not None else None
        return done

    def _pause_leader(self, leader: str, pause_s: float) -> dict[str, Any]:
        """SIGSTOP the active controller for `pause_s` (its followers' fetch timeout passes: they
        campaign), then SIGCONT; recorded in the ledger while in force (a killed run resumes it)."""
        control = self.ctx.control
        self.ctx.state.put("process", leader, {"state": "paused", "host": control.host(leader).name,
                                               "pid": control.pid(leader)})
        try:
            control.pause(leader)
            hold(pause_s)
        except HostError as exc:
            raise FaultError(f"{leader}: pause: {exc}") from exc
        finally:
            if control.running(leader):
                control.resume(leader)
            self.ctx.state.drop("process", leader)
        return {"paused": leader, "paused_s": pause_s}

    def _together(self, quorum: VoterControl, view: QuorumView, value: dict[str, Any],
                  rng: random.Random) -> tuple[list[dict[str, Any]], list[Change]]:
        """Two voter changes sent at the same moment (two adds, an add and a removal, or two removals;
        never of the active controller), each then carried on alone: (the first answers, the changes)."""
        control = self.ctx.control
        spares = [n for n in control.controllers() if n not in view.voters and control.running(n)]
        removable = [n for n in self._sorted(view.voters) if n != view.leader]
        allowed = [pair for pair in voter_races.PAIRS if
                   len(view.voters) + pair.count(ADD) <= MAX_VOTERS and pair.count(ADD) <= len(spares)
                   and pair.count(REMOVE) <= len(removable)]
        if value.get("pair"):
            allowed = [p for p in allowed if "+".join(p) == value["pair"]]
        if not allowed:
            raise FaultError(f"no two voter changes to send together (voters {self._sorted(view.voters)}, "
                             f"spares {spares}, pair {value.get('pair', 'any')})")
        pair = rng.choice(allowed)
        added = rng.sample(spares, pair.count(ADD))
        removed = rng.sample(removable, pair.count(REMOVE))
        requests = [VoterRequest(ADD, n, quorum.directory_id(n)) for n in added] + \
                   [VoterRequest(REMOVE, n, view.voters[n]) for n in removed]
        first, changes = voter_races.carry_out_together(
            quorum, requests, deadline_s=2 * float(value.get("deadline_s", DEADLINE_S)),
            catch_up_s=float(value.get("catch_up_s", CATCH_UP_S)))
        sent = [{"change": r.kind, "node": r.node, "answer": a.error} for r, a in zip(requests, first, strict=True)]
        return sent, changes

    def stop(self, value: dict[str, Any]) -> dict[str, Any]:
        """Back to the voter set in force before the first change, one change at a time."""
        desired = self.ctx.state.get("membership").get("desired")
        if desired is None:
            return {"changes": [], "voters": None}
        quorum = self._quorum()
        changes, view = self._restore(quorum, list(desired), value)
        if view is not None:
            self.ctx.state.clear("membership")
            return self._finish({"voters": self._sorted(view.voters), "desired": desired}, changes)
        after = look(quorum)
        done = {"voters": self._sorted(after.voters) if after is not None else None, "desired": desired}
        self._finish(done, changes)
        raise PartialFault({**done, "changes": [c.to_json() for c in changes]},
                           f"the voters are not back to {desired} after {len(changes)} changes")

    def _restore(self, quorum: VoterControl, desired: list[str],
                 value: dict[str, Any]) -> tuple[list[Change], QuorumView | None]:
        """Changes towards `desired`, one at a time: what was done, and the view once there (None: not there)."""
        changes: list[Change] = []
        for _ in range(MAX_HEAL_STEPS):
            view = self._view(quorum, value)
            step = self._next_heal_step(quorum, view, desired)
            if step is None:
                return changes, view
            kind, node = step
            changes.append(self._add(quorum, node, value) if kind == ADD
                           else self._remove(quorum, node, view.voters[node], value))
            if changes[-1].outcome != "ok":
                break
        return changes, None

    def _next_heal_step(self, quorum: VoterControl, view: QuorumView, desired: list[str]) -> tuple[str, str] | None:
        """The next change towards `desired`: add a missing voter, remove a voter on a replaced disk
        (its node is added back next), remove a voter the nemesis added (the leader last)."""
        missing = [n for n in desired if n not in view.voters]
        if missing:
            return ADD, missing[0]
        stale = [n for n in desired if quorum.directory_id(n) not in (None, view.voters[n])]
        if stale:
            return REMOVE, stale[0]
        extra = sorted((n for n in view.voters if n not in desired), key=lambda n: (n == view.leader, self._order(n)))
        if extra:
            return REMOVE, extra[0]
        return None

    # ---- by hand -------------------------------------------------------------------------------------

    def _named(self, value: dict[str, Any], what: str) -> list[str]:
        nodes = list(value.get("nodes", ()))
        unknown = [n for n in nodes if n not in self.ctx.control.nodes()]
        if unknown:
            raise FaultError(f"unknown nodes {unknown}; nodes are {self.ctx.control.nodes()}")
        if not nodes and value.get("target") != "controller":
            raise FaultError(f"{what} needs nodes (or target controller)")
        return nodes

    def add(self, value: dict[str, Any]) -> dict[str, Any]:
        nodes = self._named(value, "add-controller")
        quorum = self._quorum()
        self._remember(self._view(quorum, value))
        changes: list[Change] = []
        for node in nodes:
            changes.append(self._add(quorum, node, value))
            if changes[-1].outcome != "ok":
                break
        after = look(quorum)
        return self._finish({"nodes": nodes, "voters": self._sorted(after.voters) if after else None}, changes)

    def remove(self, value: dict[str, Any]) -> dict[str, Any]:
        self._named(value, "remove-controller")
        quorum = self._quorum()
        view = self._view(quorum, value)
        self._remember(view)
        nodes = list(value.get("nodes", ())) or ([view.leader] if view.leader else [])
        if not nodes:
            raise FaultError("no active controller is known (DescribeQuorum found no leader)")
        changes: list[Change] = []
        for node in nodes:
            if node not in view.voters:
                changes.append(Change(REMOVE, node, None, "fail", f"{node} is not a voter"))
                break
            changes.append(self._remove(quorum, node, view.voters[node], value))
            after = self._settled(quorum, value)
            if changes[-1].outcome != "ok" or after is None:
                break
            view = after
        after = look(quorum)
        return self._finish({"nodes": nodes, "voters": self._sorted(after.voters) if after else None}, changes)

    def replace(self, value: dict[str, Any]) -> dict[str, Any]:
        """The whole replacement: the new disk, the old (id, directory id) removed, the new one added."""
        self._named(value, "replace-disk")
        quorum = self._quorum()
        view = self._view(quorum, value)
        self._remember(view)
        node = self._replaced(view, value, self.rng)
        changes = [self._replace_disk(quorum, node, view.voters[node], value)]
        if changes[0].outcome == "ok":
            changes.append(self._add(quorum, node, value))
        after = look(quorum)
        return self._finish({"nodes": [node], "old_directory_id": view.voters[node],
                             "voters": self._sorted(after.voters) if after else None}, changes)

    def heal_ops(self) -> list[tuple[str, dict[str, Any]]]:
        if self.ctx.state.get("membership").get("desired") is None:
            return []
        return [("stop-membership", {"deadline_s": HEAL_WAIT_S, "wait_s": HEAL_WAIT_S})]

    def close(self) -> None:
        pass


# ---- the package ---------------------------------------------------------------------------------------

def _membership_modes(cluster: Cluster) -> list[tuple[str, float]]:
    if not cluster.dynamic:
        return []
    base = len(cluster.voters)
    modes: list[tuple[str, float]] = []
    if base >= 2:
        modes += [("shrink", 2.0), ("shrink-leader", 2.0)]
    if cluster.spares and base < MAX_VOTERS:
        modes.append(("grow", 2.0))
    if base >= 3:
        modes += [("replace", 1.0), ("replace-leader", 1.0), ("replace-split", 1.0)]
    spares = len(cluster.spares)
    if base >= 3 or (spares and base >= 2) or (spares >= 2 and base + 2 <= MAX_VOTERS):
        modes.append(("concurrent", 2.0))
    return modes


def draw_membership(rng: random.Random, cluster: Cluster, timing: Timing, enabled: Sequence[str]) -> Draw:
    mode = pick(rng, _membership_modes(cluster), enabled)
    base = len(cluster.voters)
    seed = rng.randrange(2**31)
    held = span(rng, 1.0, timing.failover_s + 5)
    target = "controller" if mode.endswith("-leader") else "voter"
    if mode.startswith("shrink"):
        to = rng.randint(1, base - 1)
        who = "the active controller first" if target == "controller" else "random voters"
        return Draw("start-membership", {"change": "shrink", "to": to, "target": target, "seed": seed}, held,
                    f"the quorum shrunk from {base} to {to} voters ({who}), then grown back", mode)
    if mode == "grow":
        to = rng.randint(base + 1, min(MAX_VOTERS, base + len(cluster.spares)))
        return Draw("start-membership", {"change": "grow", "to": to, "seed": seed}, held,
                    f"spare controllers added: {base} to {to} voters, then removed", mode)
    if mode == "concurrent":
        return Draw("start-membership", {"change": "concurrent", "seed": seed}, held,
                    "two voter changes sent to the active controller at the same moment (it must take one at a "
                    "time), then undone", mode)
    if mode == "replace-split":
        elect = round(timing.failover_s, 3)
        return Draw("start-membership", {"change": "replace-split", "elect_s": elect, "seed": seed}, held,
                    f"a follower's disk replaced with its old voter left in the set, the active controller paused "
                    f"{elect:g} s (an election the new disk must not vote in), then the old voter removed and the "
                    "new disk added", mode)
    who = "the active controller's" if target == "controller" else "a voter's"
    return Draw("start-membership", {"change": "replace", "target": target, "seed": seed}, held,
                f"{who} disk replaced (a new directory id; the old voter removed), then the new disk added", mode)


FAULT = FaultKind("membership", MembershipFault)
PACKAGE = Package(
    leader_modes=("shrink-leader", "replace-leader"),
    name="membership", kind="membership", windows={"start-membership": "stop-membership"},
    modes=_membership_modes, draw=draw_membership, gap_s=lambda t: 2 * t.failover_s,
    doc="voter changes of a dynamic quorum (KIP-853): shrink to as few as 1 voter (the active controller "
        "first, or random voters), grow with spare controllers up to 5, replace a voter's disk (a new "
        "directory id; or split: the old voter left in the set through a forced election), two changes "
        "sent at the same moment, each undone when its window closes (only on a dynamic quorum)",
    extra_windows={"replace-disk": "stop-membership", "remove-controller": "stop-membership",
                   "add-controller": "stop-membership"},
)
