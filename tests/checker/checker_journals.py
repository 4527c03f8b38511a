"""Hand-built node journals for the invariant tests: a healthy three-voter run to mutate."""

from __future__ import annotations

from typing import Any

HB: dict[str, Any] = {"fenced": False, "shut_down": False, "metadata_offset": 9}
"""The answer fields of an accepted heartbeat decision (unfenced, caught up past epoch 5's registration)."""


class JB:
    """Appends journal entries with increasing clocks; `entries` is the journal (all nodes)."""

    def __init__(self) -> None:
        self.entries: list[dict[str, Any]] = []
        self.t = 0

    def add(self, node: int, ev: str, **fields: Any) -> dict[str, Any]:
        self.t += 1
        e = {"ts": 1_000_000 + self.t * 10, "mono": self.t * 10_000_000, "node": node, "ev": ev, **fields}
        self.entries.append(e)
        return e


def one_kernel(j: JB) -> JB:
    """The same journals as nodes on one kernel write them: `rmono` on every line, one boot id."""
    for e in j.entries:
        e["rmono"] = e["mono"]
        if e["ev"] == "start":
            e["boot_id"] = "one-kernel"
    return j


def healthy_raft() -> JB:
    """Node 1 leads epoch 1 and commits offsets 0-2 on all three voters; node 2 leads epoch 2."""
    j = JB()
    for n in (1, 2, 3):
        j.add(n, "start", roles=["controller"], voters=[1, 2, 3], log_start=0, log_end=0, hw=0)
    j.add(1, "role", role="leader", epoch=1, leader=1, voted_for=1)
    for n in (2, 3):
        j.add(n, "role", role="follower", epoch=1, leader=1, voted_for=1)
    j.add(1, "append", base=0, epoch=1, crcs=[11, 12, 13], control=False, leader=True)
    for n in (2, 3):
        j.add(n, "append", base=0, epoch=1, crcs=[11, 12, 13], control=False, leader=False)
    j.add(1, "hw", hw=3, epoch=1)
    for n in (2, 3):
        j.add(n, "hw", hw=3, epoch=1)
    for n in (1, 2, 3):
        for o, crc in enumerate([11, 12, 13]):
            j.add(n, "apply", offset=o, type="RegisterBrokerRecord", crc=crc)
    j.add(2, "role", role="leader", epoch=2, leader=2, voted_for=2)
    for n in (1, 3):
        j.add(n, "role", role="follower", epoch=2, leader=2, voted_for=2)
    j.add(2, "append", base=3, epoch=2, crcs=[21], control=True, leader=True)
    j.add(3, "append", base=3, epoch=2, crcs=[21], control=True, leader=False)
    j.add(2, "hw", hw=4, epoch=2)
    return j


def healthy_fencing(beats: int = 3) -> JB:
    """Controller 1 leads; broker 4 registers (epoch 5), is unfenced, heartbeats (`beats` accepted
    heartbeats, caught up), ISR changes."""
    j = JB()
    j.add(1, "start", roles=["controller"], voters=[1], log_start=0, log_end=0, hw=0)
    j.add(1, "role", role="leader", epoch=1, leader=1, voted_for=1)
    j.add(1, "decision", api="BrokerRegistration", broker=4, broker_epoch=5, incarnation="inc-a", error="NONE")
    j.add(1, "fence", broker=4, action="unfence", reason="heartbeat", epoch=5)
    for _ in range(beats):
        j.add(1, "decision", api="BrokerHeartbeat", broker=4, broker_epoch=5, **HB, error="NONE")
    j.add(1, "decision", api="AlterPartition", broker=4, broker_epoch=5, incarnation=None, error="NONE",
          topic="t", partition=0, leader=4, leader_epoch=1, partition_epoch=1, isr=[4])
    j.add(1, "decision", api="AlterPartition", broker=4, broker_epoch=5, incarnation=None, error="NONE",
          topic="t", partition=0, leader=4, leader_epoch=1, partition_epoch=2, isr=[4, 5])
    j.add(1, "fence", broker=4, action="fence", reason="session expired", epoch=5)
    return j


def only_anomaly(res: dict[str, Any], invariant: str) -> dict[str, Any]:
    """The one anomaly of an invalid result, which must be of `invariant`."""
    assert res["valid"] is False
    kinds = [a["type"] for a in res["anomalies"]]
    assert kinds == [invariant], kinds
    return res["anomalies"][0]


def line_of(j: JB, e: dict[str, Any]) -> str:
    """Where entry `e` stands in the journal a checker reads from `j` (file:line)."""
    return f"journal.jsonl:{j.entries.index(e) + 1}"
