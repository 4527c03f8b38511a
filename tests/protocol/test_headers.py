"""Request/response headers (v1/v2, v0/v1, the ApiVersions quirk) and size-prefixed framing."""

from __future__ import annotations

import asyncio
import random
import struct

import pytest
from kio.index import load_request_schema
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.api_versions.v4.response import ApiVersionsResponse as ApiVersionsResponseV4
from kio.schema.errors import ErrorCode
from kio.schema.index import api_key_map, schema_name_map
from kio.schema.metadata.v4.request import MetadataRequest as MetadataRequestV4
from kio.schema.metadata.v12.response import MetadataResponse as MetadataResponseV12
from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2
from kio.static.primitive import i16, i32

from kraftlab.node.protocol.api_versions import ApiRange, build_api_versions_response, unsupported_api_versions_response
from kraftlab.node.protocol.codec import encode_entity
from kraftlab.node.protocol.errors import EncodingError, FrameTooLarge, MalformedFrame, TruncatedFrame, UnsupportedApi
from kraftlab.node.protocol.framing import frame, read_frame
from kraftlab.node.protocol.headers import (
    encode_request,
    encode_request_header,
    encode_response,
    parse_request_body,
    parse_request_header,
    parse_response,
    request_header_type,
)
from protocol.entities import EntityFactory, zero_entity


def _requests() -> list[tuple[int, int]]:
    return [(key, v) for key, name in sorted(api_key_map.items()) for v in sorted(schema_name_map[name])]


def test_every_request_round_trips_with_the_header_its_flexibility_calls_for() -> None:
    factory = EntityFactory(random.Random(2), absurd=True)
    for api_key, version in _requests():
        request_type = load_request_schema(api_key, version)
        request = factory.entity(request_type)
        data = encode_request(request, 1234, "client-é")
        (size,) = struct.unpack(">i", data[:4])
        assert size == len(data) - 4
        parsed = parse_request_header(data[4:])
        assert (parsed.api_key, parsed.api_version, parsed.correlation_id) == (api_key, version, 1234)
        assert parsed.client_id == "client-é"
        assert parsed.header_version == (2 if request_type.__flexible__ else 1)
        assert parse_request_body(parsed, request_type) == request


def test_request_header_bytes_match_kafkas_layout() -> None:
    v1 = encode_request(MetadataRequestV4(topics=None, allow_auto_topic_creation=True), 7, "ab")[4:]
    # api key 3, version 4, correlation id 7, client id as int16 length + bytes; then the body
    assert v1[:12] == struct.pack(">hhih", 3, 4, 7, 2) + b"ab"
    v2 = encode_request(ApiVersionsRequest(client_software_name="x", client_software_version="1"), 7, None)[4:]
    # v2: the same fields (client id still a legacy nullable string: -1), then an empty tagged-field section
    assert v2[:11] == struct.pack(">hhih", 18, 3, 7, -1) + b"\x00"
    assert v2[11:] == b"\x02x\x021\x00"


@pytest.mark.parametrize("header_type", [RequestHeaderV1, RequestHeaderV2])
def test_the_hand_rolled_request_header_agrees_with_kio(header_type: type[RequestHeaderV1 | RequestHeaderV2]) -> None:
    rng = random.Random(header_type.__version__)
    api_key, api_version = (3, 4) if header_type is RequestHeaderV1 else (3, 12)
    for client_id in (None, "", "kraftlab", "é日本" * 50, "x" * 32767):
        correlation_id = rng.randint(-(2**31), 2**31 - 1)
        ours = encode_request_header(api_key, api_version, correlation_id, client_id)
        kios = encode_entity(
            header_type(
                request_api_key=i16(api_key),
                request_api_version=i16(api_version),
                correlation_id=i32(correlation_id),
                client_id=client_id,
            )
        )
        assert ours == kios
        parsed = parse_request_header(ours + b"body")
        assert (parsed.correlation_id, parsed.client_id, parsed.body_offset) == (correlation_id, client_id, len(ours))
    with pytest.raises(EncodingError):
        encode_request_header(3, 4, 1, "x" * 32768)


def test_a_client_id_that_is_not_utf8_is_read_leniently_like_java_does() -> None:
    parsed = parse_request_header(struct.pack(">hhih", 3, 4, 1, 2) + b"\xff\xfe")
    assert parsed.client_id == "\ufffd\ufffd"


def test_a_header_v2_with_tagged_fields_is_skipped_to_the_body() -> None:
    header = struct.pack(">hhih", 3, 12, 9, -1) + b"\x02" + b"\x00\x01z" + b"\x05\x00"
    parsed = parse_request_header(header + b"BODY")
    assert parsed.payload[parsed.body_offset :] == b"BODY"
    with pytest.raises(MalformedFrame):  # a tagged field claiming more bytes than there are
        parse_request_header(struct.pack(">hhih", 3, 12, 9, -1) + b"\x01\x00\x7f")


def test_api_versions_requests_of_unknown_versions_still_have_a_header() -> None:
    assert request_header_type(18, 99).__version__ == 2
    assert request_header_type(18, 2).__version__ == 1
    assert request_header_type(18, -5).__version__ == 1
    with pytest.raises(UnsupportedApi):
        request_header_type(3, 99)
    with pytest.raises(UnsupportedApi):
        request_header_type(-1, 0)


def test_short_and_garbled_headers_are_malformed() -> None:
    with pytest.raises(MalformedFrame):
        parse_request_header(b"\x00\x12\x00")
    with pytest.raises(MalformedFrame):  # client id claims 100 bytes
        parse_request_header(struct.pack(">hhih", 3, 4, 1, 100) + b"abc")


def test_api_versions_responses_use_header_v0_even_when_flexible() -> None:
    response = build_api_versions_response(4, (ApiRange(18, 0, 4),))
    assert isinstance(response, ApiVersionsResponseV4)
    data = encode_response(response, 99)
    assert data[4:8] == struct.pack(">i", 99)
    assert data[8:10] == b"\x00\x00"  # straight into the body's error code: no tagged-field byte
    correlation_id, decoded = parse_response(data[4:], load_request_schema(18, 4))
    assert (correlation_id, decoded) == (99, response)


def test_other_flexible_responses_use_header_v1() -> None:
    response = zero_entity(MetadataResponseV12, brokers=(), topics=())
    data = encode_response(response, 5)
    assert data[4:9] == struct.pack(">i", 5) + b"\x00"  # correlation id + empty tagged fields
    assert parse_response(data[4:], load_request_schema(3, 12)) == (5, response)


def test_an_unsupported_version_answer_is_read_as_v0_whatever_was_sent() -> None:
    data = encode_response(unsupported_api_versions_response((ApiRange(3, 0, 12), ApiRange(18, 0, 3))), 8)
    correlation_id, response = parse_response(data[4:], load_request_schema(18, 4))
    assert correlation_id == 8
    assert response.__version__ == 0
    assert response.error_code == ErrorCode.unsupported_version
    assert [(k.api_key, k.min_version, k.max_version) for k in response.api_keys] == [(18, 0, 3)]


async def _frames(data: bytes, max_bytes: int, eof: bool = True) -> list[bytes | None]:
    reader = asyncio.StreamReader()
    reader.feed_data(data)
    if eof:
        reader.feed_eof()
    out: list[bytes | None] = []
    while True:
        payload = await read_frame(reader, max_bytes)
        out.append(payload)
        if payload is None:
            return out


def test_frames_are_read_back_one_by_one_until_a_clean_end() -> None:
    data = frame(b"one") + frame(b"") + frame(b"three")
    assert asyncio.run(_frames(data, 100)) == [b"one", b"", b"three", None]


def test_a_frame_of_exactly_the_maximum_size_is_accepted_and_one_more_byte_is_not() -> None:
    assert asyncio.run(_frames(frame(b"x" * 10), 10)) == [b"x" * 10, None]
    with pytest.raises(FrameTooLarge, match="larger than the maximum 10"):
        asyncio.run(_frames(frame(b"x" * 11), 10))


def test_a_negative_size_is_rejected() -> None:
    with pytest.raises(FrameTooLarge, match="negative"):
        asyncio.run(_frames(struct.pack(">i", -1), 10))


@pytest.mark.parametrize("data", [b"\x00\x00", struct.pack(">i", 5) + b"abc"])
def test_a_stream_ending_inside_a_frame_is_truncated(data: bytes) -> None:
    with pytest.raises(TruncatedFrame):
        asyncio.run(_frames(data, 100))
