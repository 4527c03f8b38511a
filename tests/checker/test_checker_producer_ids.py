"""The metadata checker's producer-id rules: ids brokers journalled handing out (InitProducerId),
judged against the blocks the committed ProducerIdsRecords granted."""

from __future__ import annotations

import base64
import uuid
from typing import Any

from kraftlab.checker.journal import journals_from
from kraftlab.checker.metadata.check import check_metadata
from kraftlab.node.metadata.records import (
    MetadataRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    UnfenceBrokerRecord,
    encode,
)


class J:
    def __init__(self) -> None:
        self.entries: list[dict[str, Any]] = []

    def add(self, node: int, ev: str, **f: Any) -> None:
        t = len(self.entries) + 1
        self.entries.append({"ts": 1_000 + t, "mono": t, "node": node, "ev": ev, **f})


def _log() -> list[MetadataRecord]:
    out: list[MetadataRecord] = [RegisterBrokerRecord(broker_id=b, incarnation_id=uuid.UUID(int=b), broker_epoch=b - 1)
                                 for b in (1, 2)]
    out += [UnfenceBrokerRecord(id=b, epoch=b - 1) for b in (1, 2)]
    out += [ProducerIdsRecord(broker_id=1, broker_epoch=0, next_producer_id=1000),
            ProducerIdsRecord(broker_id=2, broker_epoch=1, next_producer_id=2000)]
    return out


def _journal(records: list[MetadataRecord] | None = None) -> J:
    j = J()
    j.add(9, "start")
    for off, r in enumerate(records or _log()):
        j.add(9, "apply", offset=off, type=type(r).__name__, crc=0, value=base64.b64encode(encode(r)).decode())
    for b in (1, 2):
        j.add(b, "start")
    return j


def _run(j: J) -> dict[str, Any]:
    return check_metadata(journals_from(j.entries))


def test_ids_from_committed_blocks_each_handed_out_once_are_valid() -> None:
    j = _journal()
    j.add(1, "producer_id_block", broker=1, broker_epoch=0, start=0, len=1000)
    j.add(2, "producer_id_block", broker=2, broker_epoch=1, start=1000, len=1000)
    for pid in (0, 1, 2):
        j.add(1, "producer_id", broker=1, producer_id=pid, producer_epoch=0)
    j.add(2, "producer_id", broker=2, producer_id=1000, producer_epoch=0)
    res = _run(j)
    assert res["valid"] is True, res["explanation"]
    assert "ProducerIdUnique" in res["checked"] and "ProducerIdUnique" not in res.get("not_checked", {})
    assert (res["stats"]["producer_id_blocks_received"], res["stats"]["producer_ids_handed_out"]) == (2, 4)


def test_a_run_without_init_producer_id_says_the_rules_were_not_judged() -> None:
    res = _run(_journal())
    assert res["valid"] is True
    assert set(res["not_checked"]) >= {"ProducerIdUnique", "ProducerIdFromCommittedBlock"}


def test_a_block_granted_again_after_a_failover_hands_out_ids_twice() -> None:
    # the controller that answered broker 2 had not replayed broker 1's block: it granted [0, 1000) again,
    # and that record never committed (what respond-before-commit plus a failover looks like)
    j = _journal()
    j.add(1, "producer_id_block", broker=1, broker_epoch=0, start=0, len=1000)
    j.add(2, "producer_id_block", broker=2, broker_epoch=1, start=0, len=1000)
    j.add(1, "producer_id", broker=1, producer_id=0, producer_epoch=0)
    j.add(2, "producer_id", broker=2, producer_id=0, producer_epoch=0)
    res = _run(j)
    kinds = sorted(a["type"] for a in res["anomalies"])
    assert kinds == ["ProducerIdFromCommittedBlock", "ProducerIdUnique"]
    unique = next(a for a in res["anomalies"] if a["type"] == "ProducerIdUnique")
    assert "producer id 0 was handed out twice: by broker 1 and again by broker 2" in unique["explanation"]
    block = next(a for a in res["anomalies"] if a["type"] == "ProducerIdFromCommittedBlock")
    assert "offset 4 granted [0, 1000) to broker 1" in block["explanation"]


def test_an_id_outside_every_block_the_broker_received_in_this_life() -> None:
    j = _journal()
    j.add(1, "producer_id_block", broker=1, broker_epoch=0, start=0, len=1000)
    j.add(1, "start")  # a restart forgets the block
    j.add(1, "producer_id", broker=1, producer_id=5, producer_epoch=0)
    (a,) = _run(j)["anomalies"]
    assert a["type"] == "ProducerIdFromCommittedBlock" and "lies in no block it received" in a["explanation"]


def test_a_step_back_of_the_next_producer_id_is_a_record_rule_breach() -> None:
    records = [*_log(), ProducerIdsRecord(broker_id=1, broker_epoch=0, next_producer_id=1500)]
    res = _run(_journal(records))
    assert [a["type"] for a in res["anomalies"]] == ["ProducerIdsGrow"]
    assert "not above 2000" in res["anomalies"][0]["explanation"]
