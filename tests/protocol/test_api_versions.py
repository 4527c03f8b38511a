"""ApiVersions answers built from a registry, and version picking."""

from __future__ import annotations

import pytest
from kio.schema.api_versions.v0.request import ApiVersionsRequest as ApiVersionsRequestV0
from kio.schema.api_versions.v3.request import ApiVersionsRequest as ApiVersionsRequestV3
from kio.schema.errors import ErrorCode

from kraftlab.node.protocol.api_versions import (
    ApiRange,
    Feature,
    FinalizedFeatures,
    answer_api_versions,
    build_api_versions_response,
    pick_version,
    ranges_from_response,
)
from kraftlab.node.protocol.errors import UnsupportedApi, UnsupportedVersion
from kraftlab.node.protocol.registry import ApiRegistry
from protocol.handlers import example_registry

RANGES = (ApiRange(3, 0, 12), ApiRange(18, 0, 4), ApiRange(19, 2, 7))


@pytest.mark.parametrize("version", range(5))
def test_every_version_lists_the_ranges(version: int) -> None:
    response = build_api_versions_response(version, RANGES)
    assert response.__version__ == version
    assert response.error_code == ErrorCode.none
    assert ranges_from_response(response) == {3: (0, 12), 18: (0, 4), 19: (2, 7)}


def test_features_appear_from_v3() -> None:
    features = (Feature("metadata.version", 1, 20),)
    finalized = FinalizedFeatures(epoch=7, levels=(Feature("metadata.version", 20, 20),))
    response = build_api_versions_response(3, RANGES, supported=features, finalized=finalized)
    assert [(f.name, f.min_version, f.max_version) for f in response.supported_features] == [
        ("metadata.version", 1, 20)
    ]
    assert response.finalized_features_epoch == 7
    assert response.finalized_features[0].max_version_level == 20


def test_invalid_client_software_gets_invalid_request() -> None:
    ok = answer_api_versions(
        ApiVersionsRequestV3(client_software_name="librdkafka", client_software_version="2.4.0"), RANGES
    )
    assert ok.error_code == ErrorCode.none
    for name, version in (("", "1"), ("bad name", "1"), ("x", "-1"), ("x", "1.")):
        bad = answer_api_versions(
            ApiVersionsRequestV3(client_software_name=name, client_software_version=version), RANGES
        )
        assert bad.error_code == ErrorCode.invalid_request, (name, version)
        assert bad.api_keys == ()
    assert answer_api_versions(ApiVersionsRequestV0(), RANGES).error_code == ErrorCode.none


def test_pick_version_takes_the_highest_common_version() -> None:
    server = {3: (0, 12), 19: (2, 7)}
    assert pick_version(server, 3, 0, 20) == 12
    assert pick_version(server, 3, 1, 4) == 4
    assert pick_version(server, 19, 0, 2) == 2
    with pytest.raises(UnsupportedVersion):
        pick_version(server, 19, 0, 1)
    with pytest.raises(UnsupportedVersion):
        pick_version(server, 60, 0, 1)


def test_the_registry_serves_api_versions_and_refuses_bad_registrations() -> None:
    registry = example_registry()
    assert registry.ranges() == RANGES
    assert registry.supports(18, 4) and not registry.supports(18, 5) and not registry.supports(3, 13)
    with pytest.raises(UnsupportedApi):
        registry.lookup(3, 13)
    with pytest.raises(UnsupportedApi):
        registry.lookup(60, 0)
    with pytest.raises(ValueError, match="already registered"):
        registry.register(3, 0, 1, lambda request, context: None)
    with pytest.raises(ValueError, match="ApiVersions"):
        registry.register(18, 0, 1, lambda request, context: None)
    with pytest.raises(UnsupportedApi):  # kio has no CreateTopics v0
        ApiRegistry().register(19, 0, 7, lambda request, context: None)
