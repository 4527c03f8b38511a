"""Round trips of every kio schema through the bounds-checked codec, and its rejection of hostile bytes."""

from __future__ import annotations

import random
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.index import load_request_schema, load_response_schema
from kio.schema.index import api_key_map, schema_name_map
from kio.static.protocol import Entity

from kraftlab.node.protocol.bounds import check_bounds, read_uvarint
from kraftlab.node.protocol.codec import decode_entity, decode_exact, encode_entity
from kraftlab.node.protocol.errors import EncodingError, MalformedFrame
from protocol.entities import EntityFactory


def _all_payload_types() -> list[type[Entity]]:
    types: list[type[Entity]] = []
    for api_key, name in sorted(api_key_map.items()):
        for version in sorted(schema_name_map[name]):
            types.append(load_request_schema(api_key, version))
            types.append(load_response_schema(api_key, version))
    return types


ALL_TYPES = _all_payload_types()


def test_the_schema_set_is_large_and_mixed() -> None:
    assert len(ALL_TYPES) > 500
    assert any(t.__flexible__ for t in ALL_TYPES) and any(not t.__flexible__ for t in ALL_TYPES)


@pytest.mark.parametrize("absurd", [False, True])
def test_every_api_and_version_round_trips(absurd: bool) -> None:
    factory = EntityFactory(random.Random(11 + absurd), absurd=absurd)
    checked = 0
    for entity_type in ALL_TYPES:
        for _ in range(3):
            entity = factory.entity(entity_type)
            data = encode_entity(entity)
            assert check_bounds(entity_type, data, 0, len(data)) == len(data), entity_type
            assert decode_exact(entity_type, data) == entity, entity_type
            checked += 1
    assert checked == 3 * len(ALL_TYPES)


def test_decode_entity_returns_the_offset_after_the_entity() -> None:
    from kio.schema.api_versions.v3.request import ApiVersionsRequest

    entity = ApiVersionsRequest(client_software_name="a", client_software_version="1")
    data = b"\x07\x07" + encode_entity(entity) + b"tail"
    decoded, end = decode_entity(ApiVersionsRequest, data, 2)
    assert decoded == entity
    assert data[end:] == b"tail"


def test_every_proper_prefix_of_an_encoding_is_rejected() -> None:
    factory = EntityFactory(random.Random(5))
    rng = random.Random(6)
    for entity_type in rng.sample(ALL_TYPES, 120):
        data = encode_entity(factory.entity(entity_type))
        for cut in {0, len(data) // 2, len(data) - 1} if data else set():
            with pytest.raises(MalformedFrame):
                decode_exact(entity_type, data[:cut])


def test_trailing_bytes_are_rejected() -> None:
    from kio.schema.metadata.v12.request import MetadataRequest

    data = encode_entity(MetadataRequest(topics=None, include_topic_authorized_operations=False))
    assert decode_exact(MetadataRequest, data).topics is None
    with pytest.raises(MalformedFrame, match="trailing"):
        decode_exact(MetadataRequest, data + b"\x00")


def test_a_huge_nested_compact_array_count_is_rejected_before_the_native_decoder() -> None:
    # These bytes once made kio's native reader abort the process while allocating 263 GB.
    from kio.schema.initialize_share_group_state.v0.response import InitializeShareGroupStateResponse

    data = bytes.fromhex("17fe66cb83d792a54d6444e75a78f6ef0c8df2e8df7a046d4d")
    with pytest.raises(MalformedFrame, match="array of"):
        decode_exact(InitializeShareGroupStateResponse, data)


def test_legacy_array_count_above_the_remaining_bytes_is_rejected() -> None:
    from kio.schema.metadata.v4.request import MetadataRequest

    with pytest.raises(MalformedFrame, match="array of 2147483647 items"):
        decode_exact(MetadataRequest, struct.pack(">i", 2**31 - 1) + b"\x00" * 10)


def test_null_in_a_non_nullable_field_is_rejected() -> None:
    from kio.schema.create_topics.v7.request import CreateTopicsRequest

    # topics = null (compact count 0), timeout 0, validate_only false, no tagged fields
    with pytest.raises(MalformedFrame, match="non-nullable array"):
        decode_exact(CreateTopicsRequest, b"\x00" + b"\x00" * 4 + b"\x00" + b"\x00")


def test_varints_longer_than_five_bytes_are_rejected() -> None:
    assert read_uvarint(b"\xff\xff\xff\xff\x0f", 0, 5) == (2**32 - 1, 5)
    with pytest.raises(MalformedFrame, match="longer than 5"):
        read_uvarint(b"\xff\xff\xff\xff\xff\x01", 0, 6)
    with pytest.raises(MalformedFrame, match="past the end"):
        read_uvarint(b"\xff", 0, 1)


def test_an_unencodable_value_raises_encoding_error() -> None:
    from kio.schema.metadata.v4.request import MetadataRequest, MetadataRequestTopic
    from kio.schema.types import TopicName

    with pytest.raises(EncodingError):
        encode_entity(
            MetadataRequest(
                topics=(MetadataRequestTopic(name=TopicName("x" * 40_000)),), allow_auto_topic_creation=True
            )
        )


@settings(max_examples=400)
@given(
    index=st.integers(0, len(ALL_TYPES) - 1),
    data=st.binary(max_size=64),
    prefix=st.sampled_from([b"", b"\xff\xff\xff\x7f", b"\x8f\xff\xff\xff\x0f"]),
)
def test_arbitrary_bytes_either_decode_or_raise_malformed_frame(index: int, data: bytes, prefix: bytes) -> None:
    """Never another exception (nor a crash); what does decode is a real entity that round-trips."""
    entity_type = ALL_TYPES[index]
    try:
        entity = decode_exact(entity_type, prefix + data)
    except MalformedFrame:
        return
    assert decode_exact(entity_type, encode_entity(entity)) == entity


def test_unknown_tagged_fields_are_skipped_at_every_depth() -> None:
    """KIP-482: a reader skips tags it does not know (kio's native reader refuses them; the codec cuts them out)."""
    from kio.schema.api_versions.v3.response import ApiVersionsResponse

    from kraftlab.node.protocol.api_versions import ApiRange, Feature, build_api_versions_response

    expected = build_api_versions_response(3, (ApiRange(18, 0, 4),), supported=(Feature("x", 1, 2),))
    feature = "0278" + "0001" + "0002"  # name "x", min 1, max 2
    features_plain = "02" + feature + "00"
    features_tagged = "02" + feature + "01" + "05" + "02" + "abcd"  # the entry carries unknown tag 5
    for api_key_tags, features, extra_top in (
        ("00", features_plain, ""),  # no unknown tag anywhere: kio's own encoding
        ("01" + "07" + "00", features_plain, ""),  # unknown tag 7 in a nested array entry
        ("00", features_tagged, ""),  # unknown tag inside known tag 0: its size must shrink too
        ("00", features_plain, "09" + "01" + "ff"),  # an unknown top-level tag after a known one
    ):
        top_count = "02" if extra_top else "01"
        data = bytes.fromhex(
            "0000"  # error code
            + "02" + "0012" + "0000" + "0004" + api_key_tags  # api keys: ApiVersions 0..4
            + "00000000"  # throttle time
            + top_count + "00" + f"{len(features) // 2:02x}" + features + extra_top
        )  # fmt: skip
        assert decode_exact(ApiVersionsResponse, data) == expected, data.hex()
    assert encode_entity(expected).hex().endswith("01" + "00" + f"{len(features_plain) // 2:02x}" + features_plain)
