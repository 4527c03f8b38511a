"""AlterClientQuotas on the controller (Kafka's validation and records), ClientQuotaRecord in the
image, its snapshot and its wire form, and DescribeClientQuotas' filter on a broker's image."""

from __future__ import annotations

from typing import Any

import pytest
from controller_harness import Harness
from kio.schema.alter_client_quotas.v0.request import AlterClientQuotasRequest as Alter0
from kio.schema.alter_client_quotas.v1.request import AlterClientQuotasRequest, EntityData, EntryData, OpData
from kio.schema.describe_client_quotas.v1.request import ComponentData, DescribeClientQuotasRequest
from kio.schema.errors import ErrorCode

from kraftlab.node.broker.client_quotas import describe_client_quotas_response
from kraftlab.node.metadata.client_quotas import resolve
from kraftlab.node.metadata.image import MetadataImage
from kraftlab.node.metadata.records import ClientQuotaRecord, decode, encode, to_json


def entry(entity: dict[str, str | None], **ops: float | None) -> EntryData:
    return EntryData(entity=tuple(EntityData(entity_type=t, entity_name=n) for t, n in entity.items()),
                     ops=tuple(OpData(key=k, value=0.0 if v is None else v, remove=v is None) for k, v in ops.items()))


def alter(h: Harness, *entries: EntryData, validate_only: bool = False) -> list[tuple[ErrorCode, str | None]]:
    resp = h.run(AlterClientQuotasRequest(entries=entries, validate_only=validate_only))
    return [(e.error_code, e.error_message) for e in resp.entries]


def test_set_change_and_remove_quotas(h: Harness) -> None:
    assert alter(h, entry({"user": "alice"}, producer_byte_rate=1024.0, request_percentage=50.0)) == [
        (ErrorCode.none, None)]
    assert h.image().client_quotas == {(("user", "alice"),): {"producer_byte_rate": 1024.0, "request_percentage": 50.0}}
    before = h.active().committed_offset
    assert alter(h, entry({"user": "alice"}, producer_byte_rate=1024.0)) == [(ErrorCode.none, None)]
    assert h.active().committed_offset == before  # the same value: nothing written
    alter(h, entry({"user": "alice", "client-id": None}, consumer_byte_rate=10.0),
          entry({"user": "alice"}, producer_byte_rate=None, request_percentage=None))
    assert h.image().client_quotas == {(("client-id", None), ("user", "alice")): {"consumer_byte_rate": 10.0}}
    assert alter(h, entry({"ip": "10.0.0.1"}, connection_creation_rate=5.0)) == [(ErrorCode.none, None)]
    assert h.evs("decision")[-1]["api"] == "AlterClientQuotas"


@pytest.mark.parametrize(("e", "reason"), [
    (entry({}, producer_byte_rate=1.0), "empty"),
    (entry({"group": "g"}, producer_byte_rate=1.0), "entity type"),
    (entry({"ip": "1.2.3.4", "user": "u"}, producer_byte_rate=1.0), "combined"),
    (entry({"ip": "not-an-ip"}, connection_creation_rate=1.0), "valid IP"),
    (entry({"user": "u"}, no_such_quota=1.0), "Invalid configuration key"),
    (entry({"user": "u"}, connection_creation_rate=1.0), "Invalid configuration key"),
    (entry({"ip": None}, producer_byte_rate=1.0), "Invalid configuration key"),
    (entry({"user": "u"}, producer_byte_rate=1.5), "Long"),
    (entry({"user": "u"}, request_percentage=-1.0), "positive"),
])
def test_kafka_refusals(h: Harness, e: EntryData, reason: str) -> None:
    (code, message), = alter(h, e, entry({"user": "fine"}, request_percentage=10.0))[:1]
    assert code == ErrorCode.invalid_request and reason in (message or "")
    assert h.image().client_quotas == {(("user", "fine"),): {"request_percentage": 10.0}}  # the other entry applied


def test_validate_only_and_old_versions(h: Harness) -> None:
    assert alter(h, entry({"user": "v"}, request_percentage=1.0), validate_only=True) == [(ErrorCode.none, None)]
    assert h.image().client_quotas == {}
    resp = h.run(Alter0(entries=(entry({"client-id": "c"}, request_percentage=2.0),), validate_only=False))  # type: ignore[arg-type]
    assert type(resp).__version__ == 0 and resp.entries[0].error_code == ErrorCode.none


def test_record_round_trip_snapshot_and_dump() -> None:
    from kraftlab.node.metadata.records import QuotaEntityData

    r = ClientQuotaRecord(entity=(QuotaEntityData(entity_type="user", entity_name=None),), key="request_percentage",
                          value=12.5, remove=False)
    assert decode(encode(r)) == r
    assert encode(r)[:3] == bytes([1, 14, 0])  # frame 1, Kafka's record type 14, version 0
    assert to_json(r)["type"] == "CLIENT_QUOTA_RECORD"
    image = MetadataImage()
    image.apply(r)
    again = MetadataImage()
    for rec in image.iter_records():
        again.apply(rec)
    assert again.client_quotas == image.client_quotas == {(("user", None),): {"request_percentage": 12.5}}
    image.apply(ClientQuotaRecord(entity=r.entity, key=r.key, value=0.0, remove=True))
    assert image.client_quotas == {}


def _describe(image: MetadataImage, components: list[tuple[str, int, str | None]], strict: bool = False) -> Any:
    req = DescribeClientQuotasRequest(components=tuple(ComponentData(entity_type=t, match_type=m, match=n)
                                                       for t, m, n in components), strict=strict)
    return describe_client_quotas_response(req, image)


def test_describe_filters_as_kafka() -> None:
    image = MetadataImage()
    from kraftlab.node.metadata.records import QuotaEntityData

    def put(entity: dict[str, str | None], key: str, value: float) -> None:
        image.apply(ClientQuotaRecord(entity=tuple(QuotaEntityData(entity_type=t, entity_name=n)
                                                   for t, n in entity.items()), key=key, value=value, remove=False))

    put({"user": "alice"}, "request_percentage", 10.0)
    put({"user": None}, "request_percentage", 20.0)
    put({"user": "alice", "client-id": "app"}, "producer_byte_rate", 100.0)
    put({"client-id": "app"}, "consumer_byte_rate", 200.0)

    def names(resp: Any) -> list[dict[str, str | None]]:
        assert resp.error_code == ErrorCode.none, resp
        return [{e.entity_type: e.entity_name for e in x.entity} for x in resp.entries]

    assert names(_describe(image, [("user", 0, "alice")])) == [{"client-id": "app", "user": "alice"},
                                                               {"user": "alice"}]
    assert names(_describe(image, [("user", 0, "alice")], strict=True)) == [{"user": "alice"}]
    assert names(_describe(image, [("user", 1, None)])) == [{"user": None}]
    assert len(names(_describe(image, [("user", 2, None)]))) == 3
    assert len(names(_describe(image, []))) == 4
    assert names(_describe(image, [], strict=True)) == []
    for bad in ([("user", 0, None)], [("user", 0, "a"), ("user", 2, None)], [("group", 2, None)], [("user", 7, None)],
                [("ip", 2, None), ("user", 2, None)]):
        resp = _describe(image, bad)
        assert resp.error_code == ErrorCode.invalid_request and resp.entries is None
    # Kafka's precedence for one request
    assert resolve(image.client_quotas, "alice", "app", "request_percentage") == 10.0
    assert resolve(image.client_quotas, "bob", "app", "request_percentage") == 20.0
    assert resolve(image.client_quotas, "bob", "app", "consumer_byte_rate") == 200.0
    assert resolve(image.client_quotas, "bob", "x", "producer_byte_rate") is None
