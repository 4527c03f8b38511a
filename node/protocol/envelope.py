"""Kafka's Envelope (API 58, KIP-590): a broker forwards a client's request to the active controller
with the client's principal, so the controller acts for the client, not for the broker (pure).

`request_data` is the inner request's header and body (no size prefix), `request_principal` the
principal as Kafka's DefaultKafkaPrincipalBuilder serializes it (a 2-byte version, then
DefaultPrincipalData: type, name, token_authenticated), `client_host_address` the client's IP
bytes; the answer's `response_data` is the inner response's header and body.
"""

from __future__ import annotations

import ipaddress
import struct
from dataclasses import dataclass
from typing import Any

from kio.schema.default_principal_data.v0.data import DefaultPrincipalData
from kio.schema.envelope.v0.request import EnvelopeRequest
from kio.schema.envelope.v0.response import EnvelopeResponse
from kio.schema.errors import ErrorCode

from kraftlab.node.protocol.codec import decode_exact, encode_entity
from kraftlab.node.protocol.errors import MalformedFrame
from kraftlab.node.protocol.headers import (
    encode_request,
    encode_response,
    parse_request_body,
    parse_request_header,
    parse_response,
    request_schema,
)

_VERSION = struct.Struct(">h")
_PREFIX = 4  # the size prefix encode_request/encode_response put before a frame


@dataclass(frozen=True, slots=True)
class Opened:
    """An Envelope's inner request and who sent it."""

    request: Any
    principal: str
    token_authenticated: bool
    correlation_id: int
    client_id: str | None
    host: str


def _principal_bytes(principal: str, token_authenticated: bool) -> bytes:
    kind, _, name = principal.partition(":")
    data = DefaultPrincipalData(type_=kind, name=name, token_authenticated=token_authenticated)
    return _VERSION.pack(0) + encode_entity(data)


def wrap(request: Any, principal: str, token_authenticated: bool, host: str, client_id: str | None,
         correlation_id: int = 0) -> EnvelopeRequest:
    try:
        address = ipaddress.ip_address(host).packed
    except ValueError:
        address = b""
    return EnvelopeRequest(
        request_data=encode_request(request, correlation_id, client_id)[_PREFIX:],
        request_principal=_principal_bytes(principal, token_authenticated),
        client_host_address=address,
    )


def open_envelope(envelope: Any) -> Opened:
    """The inner request; MalformedFrame if any part does not decode."""
    frame = parse_request_header(bytes(envelope.request_data))
    body = parse_request_body(frame, request_schema(frame.api_key, frame.api_version))
    raw = bytes(envelope.request_principal or b"")
    if len(raw) < _VERSION.size or _VERSION.unpack_from(raw)[0] != 0:
        raise MalformedFrame("Envelope: no version 0 principal")
    data = decode_exact(DefaultPrincipalData, raw, _VERSION.size)
    address = bytes(envelope.client_host_address)
    host = str(ipaddress.ip_address(address)) if len(address) in (4, 16) else ""
    return Opened(body, f"{data.type_}:{data.name}", bool(data.token_authenticated), frame.correlation_id,
                  frame.client_id, host)


def seal(response: Any, correlation_id: int) -> EnvelopeResponse:
    return EnvelopeResponse(response_data=encode_response(response, correlation_id)[_PREFIX:],
                            error_code=ErrorCode.none)


def refuse(code: ErrorCode) -> EnvelopeResponse:
    return EnvelopeResponse(response_data=None, error_code=code)


def unseal(response: Any, request: Any) -> Any | None:
    """The inner response to `request`, or None when the Envelope itself failed."""
    if response.error_code != ErrorCode.none or response.response_data is None:
        return None
    return parse_response(bytes(response.response_data), type(request))[1]
