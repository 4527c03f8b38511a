"""The node's Raft codec judged by Kafka's schemas: every Raft API the node serves or sends, at every
version, request and response, with values over their whole domain —

- node-encode → kio-decode: a message the node encodes, read back by Kafka's schema field names
  (`node.sim.raft_reading`, record batches by kio's batch reader), is the message (as far as the
  version carries it);
- kio-encode → node-decode: any entity Kafka's schema allows, read by the node, gives what Kafka's
  reading gives (both refuse a request for another partition than `__cluster_metadata`-0).

A codec bug made the same way in both directions passes the node's own round trip
(tests/raft/test_wire.py) and fails here; the last tests plant such codecs and show it.
"""

from __future__ import annotations

import dataclasses
import datetime
import typing
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode
from kio.static.primitive import Records, i32, i32Timedelta
from kio_bytes import through_bytes
from kio_strategies import ints, raft_entities, texts

from kraftlab.node.process.transport import register_raft_apis
from kraftlab.node.process.voter_changes import register_voter_change_apis
from kraftlab.node.protocol.headers import API_VERSIONS_KEY, request_schema, response_schema
from kraftlab.node.protocol.registry import ApiRegistry
from kraftlab.node.raft import messages as m
from kraftlab.node.raft import wire
from kraftlab.node.raft.membership import wire as voter_wire
from kraftlab.node.raft.ports import Batch, OffsetAndEpoch, Record
from kraftlab.node.raft.voters import Endpoint, Voter
from kraftlab.node.sim import raft_reading
from kraftlab.node.sim.raft_reading import (
    METADATA_TOPIC,
    METADATA_TOPIC_ID,
    Refused,
    carried,
    read_request,
    read_response,
)

FAST = settings(max_examples=60, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
PER_CLASS = settings(FAST, max_examples=30)  # 32 entity classes, each drawn on its own


# ---------------------------------------------------------------------------- the node's messages

i32s, i64s = ints("int32"), ints("int64")
epochs = i32s
offsets = i64s
leaders = st.none() | st.integers(0, 2**31 - 1)
directories = st.none() | st.uuids().filter(lambda u: u.int != 0)
errors = st.sampled_from(list(m.Errors))
endpoints = st.lists(
    st.builds(Endpoint, texts, texts, ints("uint16")), max_size=3
).map(tuple)
snapshot_ids = st.builds(OffsetAndEpoch, st.integers(0, 2**63 - 1), st.integers(0, 2**31 - 1))


@st.composite
def node_batches(draw: st.DrawFn) -> tuple[Batch, ...]:
    base = draw(st.integers(0, 2**40))
    out = []
    for _ in range(draw(st.integers(0, 3))):
        records = tuple(draw(st.lists(
            st.builds(Record, st.none() | st.binary(max_size=8), st.none() | st.binary(max_size=16)),
            min_size=1, max_size=4,
        )))
        out.append(Batch(base, draw(st.integers(0, 2**31 - 1)), records, draw(st.booleans()),
                         draw(st.integers(0, 2**41))))
        base += len(records)
    return tuple(out)


replicas = st.builds(m.ReplicaState, i32s, i64s, i64s, i64s, directories)

REQUESTS: dict[type, st.SearchStrategy[Any]] = {
    m.VoteRequest: st.builds(m.VoteRequest, epochs, i32s, epochs, offsets, st.booleans(), directories),
    m.BeginQuorumEpochRequest: st.builds(m.BeginQuorumEpochRequest, epochs, i32s),
    m.EndQuorumEpochRequest: st.builds(m.EndQuorumEpochRequest, epochs, i32s, st.lists(i32s, max_size=5).map(tuple)),
    m.DescribeQuorumRequest: st.just(m.DescribeQuorumRequest()),
    m.FetchRequest: st.builds(m.FetchRequest, epochs, i32s, offsets, epochs, st.integers(0, 2**31 - 1), directories),
    m.FetchSnapshotRequest: st.builds(
        m.FetchSnapshotRequest, epochs, i32s, st.builds(OffsetAndEpoch, offsets, epochs), offsets, i32s, directories
    ),
}
RESPONSES: dict[type, st.SearchStrategy[Any]] = {
    m.VoteResponse: st.builds(m.VoteResponse, errors, epochs, leaders, st.booleans()),
    m.BeginQuorumEpochResponse: st.builds(m.BeginQuorumEpochResponse, errors, epochs, leaders),
    m.EndQuorumEpochResponse: st.builds(m.EndQuorumEpochResponse, errors, epochs, leaders),
    m.DescribeQuorumResponse: st.builds(
        m.DescribeQuorumResponse, errors, leaders, epochs, offsets,
        st.lists(replicas, max_size=4).map(tuple), st.lists(replicas, max_size=3).map(tuple),
        st.lists(st.tuples(st.integers(0, 2**31 - 1), endpoints), max_size=3).map(tuple),
    ),
    m.FetchResponse: st.builds(
        m.FetchResponse, errors, epochs, leaders, offsets, offsets, node_batches(),
        st.none() | snapshot_ids, st.none() | snapshot_ids,
    ),
    m.FetchSnapshotResponse: st.builds(
        m.FetchSnapshotResponse, errors, epochs, leaders, st.none() | snapshot_ids, offsets, offsets,
        st.binary(max_size=64),
    ),
}
VERSIONS: dict[type, range] = {
    m.FetchRequest: wire.FETCH_VERSIONS, m.FetchResponse: wire.FETCH_VERSIONS,
    m.FetchSnapshotRequest: wire.FETCH_SNAPSHOT_VERSIONS, m.FetchSnapshotResponse: wire.FETCH_SNAPSHOT_VERSIONS,
    m.DescribeQuorumResponse: range(1, 3),
}
"""Every version the node serves or sends, for the APIs served in more than one."""

voters = st.builds(Voter, i32s, directories, endpoints)
VOTER_CHANGES: dict[type, st.SearchStrategy[Any]] = {
    m.AddRaftVoterRequest: st.builds(m.AddRaftVoterRequest, voters, st.integers(0, 2**31 - 1)),
    m.RemoveRaftVoterRequest: st.builds(m.RemoveRaftVoterRequest, i32s, directories),
    m.UpdateRaftVoterRequest: st.builds(
        m.UpdateRaftVoterRequest, epochs, i32s, directories, endpoints, st.tuples(ints("int16"), ints("int16"))
    ),
}
voter_answers = st.builds(m.VoterChangeResponse, errors, st.none() | texts, leaders, epochs)


def versioned(kinds: dict[type, st.SearchStrategy[Any]]) -> st.SearchStrategy[tuple[Any, int | None]]:
    return st.one_of(*(
        st.tuples(strategy, st.sampled_from(list(VERSIONS[kind])) if kind in VERSIONS else st.none())
        for kind, strategy in kinds.items()
    ))


# ---------------------------------------------------------------------------- node-encode → kio-decode


def node_request_read_by_kafka(message: m.Request, version: int | None) -> None:
    entity = through_bytes(wire.request_to_wire(message, "cluster", 3, version))
    assert read_request(entity) == carried(message, int(entity.__version__)), entity


def node_response_read_by_kafka(message: m.Response, version: int | None) -> None:
    entity = through_bytes(wire.response_to_wire(message, version))
    if version is not None:
        assert int(entity.__version__) == version
    assert read_response(entity) == carried(message, int(entity.__version__)), entity


@FAST
@given(versioned(REQUESTS))
def test_a_request_the_node_encodes_is_read_by_kafkas_schema_as_sent(drawn: tuple[m.Request, int | None]) -> None:
    node_request_read_by_kafka(*drawn)


@FAST
@given(versioned(RESPONSES))
def test_a_response_the_node_encodes_is_read_by_kafkas_schema_as_sent(drawn: tuple[m.Response, int | None]) -> None:
    node_response_read_by_kafka(*drawn)


@FAST
@given(st.one_of(*VOTER_CHANGES.values()), voter_answers)
def test_voter_changes_the_node_encodes_are_read_by_kafkas_schema(request: Any, answer: m.VoterChangeResponse) -> None:
    assert read_request(through_bytes(voter_wire.request_to_wire(request, "cluster"))) == request
    read = read_response(through_bytes(voter_wire.response_to_wire(request, answer)))
    if isinstance(request, m.UpdateRaftVoterRequest):  # its answer names the leader, and has no message
        assert read == dataclasses.replace(answer, message=None)
    else:
        assert read == m.VoterChangeResponse(answer.error, answer.message)


# ---------------------------------------------------------------------------- kio-encode → node-decode


def _advertised() -> list[tuple[int, int]]:
    """(api key, version) of every Raft API version a controller's listener advertises in ApiVersions
    (the Raft APIs and KIP-853's voter changes) — what a peer may send and the node must read."""
    registry = ApiRegistry()
    register_raft_apis(registry, None, "c1", 1.0)  # type: ignore[arg-type]  # the driver serves requests only
    register_voter_change_apis(registry, None, "c1")  # type: ignore[arg-type]
    return [(r.api_key, v) for r in registry.ranges() if r.api_key != API_VERSIONS_KEY
            for v in range(r.min_version, r.max_version + 1)]


def _served(kind: str) -> Iterator[type]:
    """Every request or response entity class of every version the node advertises."""
    schema = request_schema if kind == "request" else response_schema
    for key, version in _advertised():
        yield schema(key, version)


def _node_reading(read: Callable[[Any], Any], entity: Any) -> Any:
    try:
        return read(entity)
    except (wire.WireError, ValueError) as exc:
        return Refused(str(exc))


def _kafka_reading(read: Callable[[Any], Any], entity: Any) -> Any:
    try:
        return read(entity)
    except Refused as exc:
        return exc


def judge_node_reading(entity: Any, node_read: Callable[[Any], Any], kafka_read: Callable[[Any], Any]) -> None:
    entity = through_bytes(entity)
    node, kafka = _node_reading(node_read, entity), _kafka_reading(kafka_read, entity)
    if isinstance(kafka, Refused) or isinstance(node, Refused):
        assert isinstance(node, Refused) and isinstance(kafka, Refused), (entity, node, kafka)
        return
    assert node == kafka, entity


def _node_request(entity: Any) -> m.Request:
    if type(entity) in voter_wire.REQUEST_ENTITIES.values():
        return voter_wire.request_from_wire(entity)
    return wire.request_from_wire(entity)


def _node_response(entity: Any) -> m.Response:
    if "RaftVoter" in type(entity).__name__:
        return voter_wire.response_from_wire(entity)
    return wire.response_from_wire(entity)


@pytest.mark.parametrize("cls", list(_served("request")), ids=lambda c: f"{c.__name__}v{c.__version__}")
def test_any_request_kafkas_schema_allows_reads_as_kafka_reads_it(cls: type) -> None:
    @PER_CLASS
    @given(raft_entities(cls))
    def prop(entity: Any) -> None:
        judge_node_reading(entity, _node_request, read_request)

    prop()


@pytest.mark.parametrize("cls", list(_served("response")), ids=lambda c: f"{c.__name__}v{c.__version__}")
def test_any_response_kafkas_schema_allows_reads_as_kafka_reads_it(cls: type) -> None:
    @PER_CLASS
    @given(raft_entities(cls))
    def prop(entity: Any) -> None:
        judge_node_reading(entity, _node_response, read_response)

    prop()


def test_every_entity_the_node_sends_is_one_it_advertises() -> None:
    served = {c for kind in ("request", "response") for c in _served(kind)}
    sent = set(wire.REQUEST_ENTITIES.values()) | set(wire.RESPONSE_ENTITIES.values())
    assert sent | set(voter_wire.REQUEST_ENTITIES.values()) <= served
    assert len(served) == 2 * (1 + 1 + 1 + 2 + len(wire.FETCH_VERSIONS) + len(wire.FETCH_SNAPSHOT_VERSIONS) + 3)
    assert {v for k, v in _advertised() if k == 1} == set(VERSIONS[m.FetchRequest])
    assert raft_reading.UNMODELED, "the fields the node does not model are stated"


# ---------------------------------------------------------------------------- planted codecs


def _swap_epochs(message: Any) -> Any:
    """A Vote request with its epoch and last log epoch swapped (a field-order mistake)."""
    if isinstance(message, m.VoteRequest):
        return dataclasses.replace(message, epoch=message.last_epoch, last_epoch=message.epoch)
    return message


def _falsified(prop: Callable[..., None], strategy: st.SearchStrategy[Any]) -> bool:
    @settings(FAST, max_examples=200, phases=[Phase.generate])
    @given(strategy)
    def run(drawn: Any) -> None:
        prop(drawn)

    try:
        run()
    except AssertionError:
        return True
    return False


def test_a_field_order_mistake_made_both_ways_passes_the_nodes_round_trip_and_fails_here(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    to_wire, from_wire = wire.request_to_wire, wire.request_from_wire
    monkeypatch.setattr(wire, "request_to_wire", lambda msg, *a, **k: to_wire(_swap_epochs(msg), *a, **k))
    monkeypatch.setattr(wire, "request_from_wire", lambda entity: _swap_epochs(from_wire(entity)))
    vote = m.VoteRequest(7, 2, 6, 120, True)
    assert wire.request_from_wire(through_bytes(wire.request_to_wire(vote))) == vote  # invisible to itself
    assert _falsified(lambda d: node_request_read_by_kafka(*d), versioned(REQUESTS))
    assert _falsified(lambda e: judge_node_reading(e, _node_request, read_request),
                      raft_entities(_served_class("vote", 2, "request")))


def test_a_wrong_default_made_both_ways_fails_here(monkeypatch: pytest.MonkeyPatch) -> None:
    """No leader written as 0 instead of Kafka's -1, and 0 read back as no leader."""
    monkeypatch.setattr(wire, "_bid", lambda node: wire.BrokerId(0 if node is None else node))
    monkeypatch.setattr(wire, "_node", lambda value: None if value <= 0 else int(value))
    answer = m.BeginQuorumEpochResponse(m.Errors.NONE, 9, None)
    assert wire.response_from_wire(through_bytes(wire.response_to_wire(answer))) == answer
    assert _falsified(lambda d: node_response_read_by_kafka(*d), versioned(RESPONSES))


def test_a_field_the_node_does_not_read_fails_here(monkeypatch: pytest.MonkeyPatch) -> None:
    """A reader that drops Fetch's ReplicaDirectoryId (KIP-853) though the version carries it."""
    from_wire = wire.request_from_wire
    monkeypatch.setattr(wire, "request_from_wire", lambda entity: (
        dataclasses.replace(r, replica_directory_id=None) if isinstance(r := from_wire(entity), m.FetchRequest) else r
    ))
    assert _falsified(lambda e: judge_node_reading(e, _node_request, read_request),
                      raft_entities(_served_class("fetch", 17, "request")))


def _served_class(api: str, version: int, kind: str) -> type:
    return next(c for c in _served(kind) if c.__module__ == f"kio.schema.{api}.v{version}.{kind}")


# ---------------------------------------------------------------------------- the unmodeled fields


_AIMED: dict[str, Any] = {
    **dict.fromkeys(("topic_name", "topic", "name"), METADATA_TOPIC),
    "topic_id": METADATA_TOPIC_ID,
    **dict.fromkeys(("partition_index", "partition", "index"), i32(0)),
}
"""Where every Raft entity names `__cluster_metadata`-0 (a listener's name too: harmless)."""


def _typical(cls: type) -> Any:
    """An entity of `cls` with every field set (no null, one element per array, the metadata topic)."""
    hints = typing.get_type_hints(cls)
    values: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        hint = hints[f.name]
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        inner = next((typing.get_args(a)[0] for a in (hint, *args) if typing.get_origin(a) is tuple), None)
        nested = next((a for a in (hint, *args) if dataclasses.is_dataclass(a)), None)
        if isinstance(inner, type) and dataclasses.is_dataclass(inner):
            values[f.name] = (_typical(inner),)
        elif inner is None and isinstance(nested, type):
            values[f.name] = _typical(nested)
        elif f.name in _AIMED:
            values[f.name] = _AIMED[f.name]
        else:
            values[f.name] = _value(f, hint, 3)
    return cls(**values)


def _value(f: dataclasses.Field[Any], hint: Any, n: int) -> Any:
    kind = str(f.metadata.get("kafka_type"))
    base = next((a for a in (hint, *typing.get_args(hint)) if a is not type(None) and not typing.get_args(a)), hint)
    if typing.get_origin(hint) is tuple:
        return (typing.get_args(hint)[0](n),)
    if kind in ("int8", "int16", "int32", "int64", "uint16"):
        return base(n)
    return {
        "bool": n % 2 == 0,
        "string": f"s{n}",
        "uuid": uuid.UUID(int=n + 100),
        "error_code": ErrorCode.none if n == 3 else ErrorCode.not_leader_or_follower,
        "timedelta_i32": i32Timedelta.parse(datetime.timedelta(milliseconds=n)),
        "records": Records(b"" if n == 3 else b"\x01"),
    }[kind]


def _leaves(entity: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], dataclasses.Field[Any], Any]]:
    hints = typing.get_type_hints(type(entity))
    for f in dataclasses.fields(entity):
        value = getattr(entity, f.name)
        if dataclasses.is_dataclass(value):
            yield from _leaves(value, (*path, f.name))
        elif isinstance(value, tuple) and value and dataclasses.is_dataclass(value[0]):
            yield from _leaves(value[0], (*path, f.name))
        else:
            yield (*path, f.name), f, hints[f.name]


def _replaced(entity: Any, path: tuple[str, ...], value: Any) -> Any:
    head, *rest = path
    current = getattr(entity, head)
    if not rest:
        return dataclasses.replace(entity, **{head: value})
    if isinstance(current, tuple):
        return dataclasses.replace(entity, **{head: (_replaced(current[0], tuple(rest), value), *current[1:])})
    return dataclasses.replace(entity, **{head: _replaced(current, tuple(rest), value)})


def _unmodeled(entity_name: str, path: tuple[str, ...]) -> bool:
    return any(f"{scope}.{part}" in raft_reading.UNMODELED for part in path for scope in (entity_name, "*"))


def _misstated(kind: str) -> list[str]:
    """The fields whose place in UNMODELED is wrong: read by Kafka but listed, or ignored but not listed."""
    kafka_read, node_read = (read_request, _node_request) if kind == "request" else (read_response, _node_response)
    wrong: list[str] = []
    for cls in _served(kind):
        base = _typical(cls)
        kafka, node = _kafka_reading(kafka_read, base), _node_reading(node_read, base)
        assert not isinstance(kafka, Refused), (cls, kafka)
        for path, f, hint in _leaves(base):
            if path[-1] == "records" and cls.__name__ == "FetchResponse":
                continue  # record batches: judged by the properties above
            changed = _replaced(base, path, _value(f, hint, 4))
            ignored = _kafka_reading(kafka_read, changed) == kafka
            if ignored != _unmodeled(cls.__name__, path):
                wrong.append(f"{cls.__name__}v{cls.__version__}.{'.'.join(path)}: read={not ignored}")
            if ignored:
                assert _node_reading(node_read, changed) == node, (cls, path)
    return wrong


@pytest.mark.parametrize("kind", ["request", "response"])
def test_unmodeled_names_exactly_the_fields_kafkas_reading_ignores(kind: str) -> None:
    """Every field of every served entity changes Kafka's reading, or is in UNMODELED (and then the
    node's reading ignores it too) — the list of unmodeled fields is neither short nor stale."""
    assert _misstated(kind) == []


def test_a_stale_or_missing_unmodeled_entry_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(raft_reading.UNMODELED, "FetchRequest.rack_id")
    assert _misstated("request") == [f"FetchRequestv{v}.rack_id: read=False" for v in wire.FETCH_VERSIONS]
    monkeypatch.setitem(raft_reading.UNMODELED, "VoteRequest.pre_vote", "planted")
    assert "VoteRequestv2.topics.partitions.pre_vote: read=True" in _misstated("request")
