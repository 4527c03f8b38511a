"""Kafka's wire format inside the simulators: a request or response is encoded with Kafka's
schema (kio) and decoded back, as a real connection would carry it, and the receiver gets the
decoded copy — the cluster simulator's broker, controller and client messages always, the Raft
simulator's messages (through the node's own Raft codec, `node.raft.wire`) when asked.

A message Kafka's schema cannot carry (a field of the wrong type, a nested entity left as a
dict, a value out of its type's range) is a violation here instead of an error only a real
client would see; a field that does not survive the round trip is lost here as it would be there.

Two rules of Kafka's responses are judged on the way (`response_rules`): no response asks its
client to back off (a throttle time above zero) — the simulators configure no quota, and Kafka
throttles only a client over its quota — and a response refusing the whole request (a top-level
error code) says nothing else: Kafka answers such a request with the response's defaults and the
error (`new XResponseData().setErrorCode(code)`), so a field set beside the error is a claim the
node made about a request it did not carry out — save the few Kafka itself fills in first
(`_ECHOED`: a refused UpdateRaftVoter names the current leader, as `RaftUtil.updateVoterResponse`
does for every answer — judged by `node.sim.answer_fields`; a refused CreateDelegationToken names
its owner and requester, as Kafka's `CreateDelegationTokenResponse.prepareResponse` and its
controller do; a refused ElectLeaders carries the error on every partition asked, as
`ElectLeadersRequest.getErrorResponse` does — v0 has no top-level error code). A timestamp of 0 ms
(the epoch) is a default.
"""

from __future__ import annotations

import dataclasses
import datetime
import uuid
from typing import Any

from kraftlab.node.protocol.codec import decode_exact, encode_entity
from kraftlab.node.protocol.errors import ProtocolError
from kraftlab.node.raft import messages as m
from kraftlab.node.raft import wire as raft_wire
from kraftlab.node.sim.control_reading import judge_batches
from kraftlab.node.sim.raft_reading import as_kafka_reads_it


class WireViolation(AssertionError):
    pass


def through_the_wire(entity: Any, what: str) -> Any:
    """`entity` as the receiver of its bytes decodes it; `what` names it in a violation."""
    if not hasattr(type(entity), "__version__"):
        return entity  # not a Kafka protocol entity (a simulator-internal message)
    try:
        copy = decode_exact(type(entity), encode_entity(entity))
    except ProtocolError as exc:
        raise WireViolation(f"{what}: {type(entity).__name__} does not go through Kafka's wire format: {exc}") from exc
    if copy != entity:
        raise WireViolation(f"{what}: {type(entity).__name__} changed on the wire: sent {entity!r}, received {copy!r}")
    response_rules(copy, what)
    return copy


_FREE = ("error_code", "error_message", "throttle_time")  # what a refusal may set
_ECHOED = {"CreateDelegationTokenResponse": ("principal_type", "principal_name", "token_requester_principal_type",
                                             "token_requester_principal_name"),
           "ElectLeadersResponse": ("replica_election_results",),
           "UpdateRaftVoterResponse": ("current_leader",)}
"""Fields Kafka sets in a refusal too, by response."""
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


def _kafka_default(f: dataclasses.Field[Any]) -> Any:
    """Kafka's value of a field nobody set: the schema's default, else zero, empty, false or null
    (the generated `...Data` classes' initial values)."""
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return _ZERO


_ZERO = object()


def _is_zero(value: Any) -> bool:
    if isinstance(value, uuid.UUID):
        return value.int == 0
    if isinstance(value, datetime.datetime):
        return value == _EPOCH
    return value is None or (not value and not isinstance(value, datetime.timedelta)) or value == datetime.timedelta(0)


def response_rules(entity: Any, what: str) -> None:
    """The two rules above, for a Kafka response entity (anything else passes)."""
    name = type(entity).__name__
    if not name.endswith("Response") or not dataclasses.is_dataclass(entity):
        return
    throttle = getattr(entity, "throttle_time", None)
    if isinstance(throttle, datetime.timedelta) and throttle > datetime.timedelta(0):
        raise WireViolation(f"{what}: {name} asks its client to back off {throttle} though no quota is set")
    code = getattr(entity, "error_code", None)
    if not isinstance(code, int) or code == 0:
        return
    for f in dataclasses.fields(entity):
        if f.name in _FREE or f.name in _ECHOED.get(name, ()):
            continue
        value, default = getattr(entity, f.name), _kafka_default(f)
        if (default is _ZERO and not _is_zero(value)) or (default is not _ZERO and value != default):
            raise WireViolation(f"{what}: {name} refuses the request ({code!r}) but sets {f.name}={value!r} "
                                f"(Kafka answers a refusal with the defaults: {f.name} unset)")


def raft_through_the_wire(env: m.Envelope) -> m.Envelope:
    """A Raft message as its receiver gets it over a real connection: the core's message mapped to
    Kafka's entity (`node.raft.wire`), encoded and decoded, and read back by Kafka's schema
    (`node.sim.raft_reading`, which must agree with the node's own codec and with what was sent;
    a Fetch answer's control batches by `node.sim.control_reading`).
    A transport's `RequestFailed` is no message on the wire and passes as it is."""
    message = env.message
    if isinstance(message, m.RequestFailed):
        return env
    if m.is_request(message):
        entity = raft_wire.request_to_wire(message, None, env.dst)  # type: ignore[arg-type]  # is_request above
        copy = through_the_wire(entity, what := f"node {env.src}'s request")
        back: m.Message = raft_wire.request_from_wire(copy)
    else:
        entity = raft_wire.response_to_wire(message)  # type: ignore[arg-type]  # not a request: a response
        copy = through_the_wire(entity, what := f"node {env.src}'s response")
        back = raft_wire.response_from_wire(copy)
    back = as_kafka_reads_it(message, copy, back, what)
    if isinstance(back, m.FetchResponse):
        judge_batches(back.batches)  # control batches hold Kafka's control records
    return m.Envelope(env.src, env.dst, back, env.ref)
