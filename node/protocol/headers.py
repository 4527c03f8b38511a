"""Request and response headers, and whole request/response messages, over kio's schemas.

Header versions follow Kafka: request header v1 for non-flexible API versions, v2 (with tagged
fields) for flexible ones; response header v0 / v1 likewise, except that ApiVersions responses always
use header v0 (so a client that sent a too-new version can still read the error). kio's generated
classes carry this in ``__header_schema__``. A request header's ``client_id`` is always a legacy
nullable string, also in v2.
"""

from __future__ import annotations

import logging
import struct
from dataclasses import dataclass
from functools import cache

from kio.index import UnknownAPIKey, UnknownEntity, load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.schema.index import api_key_map, schema_name_map
from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2
from kio.static.constants import EntityType
from kio.static.protocol import RequestPayload, ResponsePayload

from kraftlab.node.protocol.bounds import skip_tagged_fields
from kraftlab.node.protocol.codec import decode_entity, decode_exact, encode_entity
from kraftlab.node.protocol.errors import EncodingError, MalformedFrame, UnsupportedApi
from kraftlab.node.protocol.framing import frame

log = logging.getLogger(__name__)

API_VERSIONS_KEY = 18
_FIRST_FLEXIBLE_API_VERSIONS = 3
_MAX_CLIENT_ID_BYTES = 2**15 - 1
_REQUEST_PREFIX = struct.Struct(">hhih")  # api key, api version, correlation id, client id length
_CORRELATION_ID = struct.Struct(">i")
_ERROR_CODE = struct.Struct(">h")
_NO_TAGGED_FIELDS = b"\x00"

RequestHeader = RequestHeaderV1 | RequestHeaderV2


@dataclass(frozen=True, slots=True)
class RequestFrame:
    """A received request frame whose header is decoded; the body starts at ``body_offset``."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    header_version: int
    payload: bytes
    body_offset: int


def has_schema(api_key: int, api_version: int) -> bool:
    """Whether kio has the request and response schemas of an api key/version, from kio's index alone
    (importing a schema module is what costs: a server checks its whole version ranges at start-up)."""
    versions = schema_name_map.get(api_key_map.get(api_key, ""), {})
    entities = versions.get(api_version, {})
    return EntityType.request in entities and EntityType.response in entities


@cache
def request_schema(api_key: int, api_version: int) -> type[RequestPayload]:
    """The kio request class of an api key/version; ``UnsupportedApi`` if kio does not know it (cached:
    kio resolves it by import path, slowly)."""
    try:
        return load_request_schema(api_key, api_version)
    except (UnknownAPIKey, UnknownEntity):
        raise UnsupportedApi(f"unknown api key {api_key} version {api_version}") from None


@cache
def response_schema(api_key: int, api_version: int) -> type[ResponsePayload]:
    """The kio response class of an api key/version; ``UnsupportedApi`` if kio does not know it (cached)."""
    try:
        return load_response_schema(api_key, api_version)
    except (UnknownAPIKey, UnknownEntity):
        raise UnsupportedApi(f"unknown api key {api_key} version {api_version}") from None


def request_header_type(api_key: int, api_version: int) -> type[RequestHeader]:
    """The header class of a request. ApiVersions is known for every version, even future ones,
    so that a too-new ApiVersions request can be answered with UNSUPPORTED_VERSION."""
    if api_key == API_VERSIONS_KEY:
        return RequestHeaderV2 if api_version >= _FIRST_FLEXIBLE_API_VERSIONS else RequestHeaderV1
    return request_schema(api_key, api_version).__header_schema__


def parse_request_header(payload: bytes) -> RequestFrame:
    """Decode the header of a request frame's payload (the bytes after the size prefix).

    Hand-rolled (the header is on every request's path): api key, version and correlation id, a
    legacy nullable client id (decoded leniently, as Kafka's Java strings are), then in v2 a
    tagged-field section.
    """
    end = len(payload)
    if end < _REQUEST_PREFIX.size:
        raise MalformedFrame(f"request of {end} bytes is shorter than a request header")
    api_key, api_version, correlation_id, id_length = _REQUEST_PREFIX.unpack_from(payload)
    header_version = int(request_header_type(api_key, api_version).__version__)
    pos = _REQUEST_PREFIX.size
    client_id: str | None = None
    if id_length >= 0:
        if id_length > end - pos:
            raise MalformedFrame(f"client id of {id_length} bytes but only {end - pos} remain")
        client_id = payload[pos : pos + id_length].decode("utf-8", errors="replace")
        pos += id_length
    elif id_length != -1:
        raise MalformedFrame(f"negative client id length {id_length}")
    if header_version == 2:
        pos = skip_tagged_fields(payload, pos, end)
    return RequestFrame(api_key, api_version, correlation_id, client_id, header_version, payload, pos)


def parse_request_body(request: RequestFrame, request_type: type[RequestPayload]) -> RequestPayload:
    """Decode the body of ``request`` as ``request_type``.

    Bytes after the body are ignored, as Kafka's request parsing does: librdkafka, for one, sends
    Metadata v12 requests with three extra bytes, and a real broker answers them.
    """
    body, end = decode_entity(request_type, request.payload, request.body_offset)
    if end != len(request.payload):
        log.debug("ignoring %d bytes after %s", len(request.payload) - end, request_type.__name__)
    return body


def encode_request_header(api_key: int, api_version: int, correlation_id: int, client_id: str | None) -> bytes:
    """Request header v1 or v2 (whichever the api version calls for) as bytes."""
    header_version = int(request_header_type(api_key, api_version).__version__)
    encoded = b"" if client_id is None else client_id.encode()
    if len(encoded) > _MAX_CLIENT_ID_BYTES:
        raise EncodingError(f"client id of {len(encoded)} bytes does not fit an int16 length")
    try:
        prefix = _REQUEST_PREFIX.pack(api_key, api_version, correlation_id, -1 if client_id is None else len(encoded))
    except struct.error as exc:
        raise EncodingError(f"request header: {exc}") from exc
    return prefix + encoded + (_NO_TAGGED_FIELDS if header_version == 2 else b"")


def encode_request(request: RequestPayload, correlation_id: int, client_id: str | None) -> bytes:
    """A whole size-prefixed request frame; the api key and version come from the entity's class."""
    header = encode_request_header(int(request.__api_key__), int(request.__version__), correlation_id, client_id)
    return frame(header + encode_entity(request))


def encode_response(response: ResponsePayload, correlation_id: int) -> bytes:
    """A whole size-prefixed response frame with the header version the response's class prescribes."""
    try:
        header = _CORRELATION_ID.pack(correlation_id)
    except struct.error as exc:
        raise EncodingError(f"response header: {exc}") from exc
    if response.__header_schema__.__flexible__:
        header += _NO_TAGGED_FIELDS
    return frame(header + encode_entity(response))


def peek_correlation_id(payload: bytes) -> int:
    """The correlation id that starts every response header."""
    if len(payload) < _CORRELATION_ID.size:
        raise MalformedFrame(f"response of {len(payload)} bytes has no correlation id")
    return int(_CORRELATION_ID.unpack_from(payload)[0])


def parse_response(payload: bytes, request_type: type[RequestPayload]) -> tuple[int, ResponsePayload]:
    """Decode a response to a request of ``request_type``; return (correlation id, response).

    An ApiVersions response carrying UNSUPPORTED_VERSION is decoded as v0, whatever version was sent:
    that is what a Kafka server answers to a version it does not know.
    """
    api_key, api_version = int(request_type.__api_key__), int(request_type.__version__)
    response_type = response_schema(api_key, api_version)
    correlation_id = peek_correlation_id(payload)
    offset = _CORRELATION_ID.size
    if response_type.__header_schema__.__flexible__:
        offset = skip_tagged_fields(payload, offset, len(payload))
    if api_key == API_VERSIONS_KEY and len(payload) >= offset + _ERROR_CODE.size:
        (error_code,) = _ERROR_CODE.unpack_from(payload, offset)
        if error_code == ErrorCode.unsupported_version:
            response_type = response_schema(api_key, 0)
    return correlation_id, decode_exact(response_type, payload, offset)
