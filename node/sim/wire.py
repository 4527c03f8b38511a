"""Kafka's wire format inside the simulators: a request or response is encoded with Kafka's
schema (kio) and decoded back, as a real connection would carry it, and the receiver gets the
decoded copy — the cluster simulator's broker, controller and client messages always, the Raft
simulator's messages (through the node's own Raft codec, `node.raft.wire`) when asked.

A message Kafka's schema cannot carry (a field of the wrong type, a nested entity left as a
dict, a value out of its type's range) is a violation here instead of an error only a real
client would see; a field that does not survive the round trip is lost here as it would be there.
"""

from __future__ import annotations

from typing import Any

from kraftlab.node.protocol.codec import decode_exact, encode_entity
from kraftlab.node.protocol.errors import ProtocolError
from kraftlab.node.raft import messages as m
from kraftlab.node.raft import wire as raft_wire


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
    return copy


def raft_through_the_wire(env: m.Envelope) -> m.Envelope:
    """A Raft message as its receiver gets it over a real connection: the core's message mapped to
    Kafka's entity (`node.raft.wire`), encoded, decoded and mapped back. A transport's
    `RequestFailed` is no message on the wire and passes as it is."""
    message = env.message
    if isinstance(message, m.RequestFailed):
        return env
    if m.is_request(message):
        entity = raft_wire.request_to_wire(message, None, env.dst)  # type: ignore[arg-type]  # is_request above
        back: m.Message = raft_wire.request_from_wire(through_the_wire(entity, f"node {env.src}'s request"))
    else:
        entity = raft_wire.response_to_wire(message)  # type: ignore[arg-type]  # not a request: a response
        back = raft_wire.response_from_wire(through_the_wire(entity, f"node {env.src}'s response"))
    return m.Envelope(env.src, env.dst, back, env.ref)
