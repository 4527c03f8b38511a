"""ApiVersions: building the answer from a set of served version ranges, and picking a common version.

Kafka's rules: the response has the request's version, except that a request of a version the
server does not know gets a v0 body with UNSUPPORTED_VERSION and ApiVersions' own range (so the
client can retry with a version both know); v3+ requests with an invalid client software name or
version get INVALID_REQUEST.
"""

from __future__ import annotations

import datetime
import importlib
import re
from dataclasses import dataclass, fields
from functools import lru_cache
from typing import NamedTuple

from kio.schema.errors import ErrorCode
from kio.static.primitive import i16, i32Timedelta, i64
from kio.static.protocol import RequestPayload, ResponsePayload

from kraftlab.node.protocol.errors import UnsupportedVersion
from kraftlab.node.protocol.headers import API_VERSIONS_KEY, response_schema

API_VERSIONS_RANGE = (0, 4)  # the ApiVersions versions kio 0.6.5 has schemas for
_SOFTWARE_PATTERN = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")


class ApiRange(NamedTuple):
    """A served api key and its inclusive version range."""

    api_key: int
    min_version: int
    max_version: int


class Feature(NamedTuple):
    """A supported feature (ApiVersions v3+): name and inclusive version range."""

    name: str
    min_version: int
    max_version: int


@dataclass(frozen=True, slots=True)
class FinalizedFeatures:
    """Cluster-wide finalized feature levels (ApiVersions v3+); epoch -1 means unknown."""

    epoch: int = -1
    levels: tuple[Feature, ...] = ()


@lru_cache(maxsize=256)  # answered on every connection; the entities are immutable
def build_api_versions_response(
    version: int,
    ranges: tuple[ApiRange, ...],
    error: ErrorCode = ErrorCode.none,
    supported: tuple[Feature, ...] = (),
    finalized: FinalizedFeatures | None = None,
) -> ResponsePayload:
    """An ApiVersionsResponse of ``version`` listing ``ranges`` (and features from v3)."""
    response_type = response_schema(API_VERSIONS_KEY, version)
    module = importlib.import_module(response_type.__module__)  # holds the nested entity classes
    values: dict[str, object] = {
        "error_code": error,
        "api_keys": tuple(
            module.ApiVersion(api_key=i16(r.api_key), min_version=i16(r.min_version), max_version=i16(r.max_version))
            for r in ranges
        ),
    }
    names = {f.name for f in fields(response_type)}
    if "throttle_time" in names:
        values["throttle_time"] = i32Timedelta.parse(datetime.timedelta(0))
    if "supported_features" in names:
        values["supported_features"] = tuple(
            module.SupportedFeatureKey(name=f.name, min_version=i16(f.min_version), max_version=i16(f.max_version))
            for f in supported
        )
        final = finalized or FinalizedFeatures()
        values["finalized_features_epoch"] = i64(final.epoch)
        values["finalized_features"] = tuple(
            module.FinalizedFeatureKey(
                name=f.name, min_version_level=i16(f.min_version), max_version_level=i16(f.max_version)
            )
            for f in final.levels
        )
    return response_type(**values)


def unsupported_api_versions_response(ranges: tuple[ApiRange, ...]) -> ResponsePayload:
    """Kafka's answer to an ApiVersions request of an unknown version: v0, UNSUPPORTED_VERSION."""
    own = tuple(r for r in ranges if r.api_key == API_VERSIONS_KEY)
    return build_api_versions_response(0, own, ErrorCode.unsupported_version)


def answer_api_versions(
    request: RequestPayload,
    ranges: tuple[ApiRange, ...],
    supported: tuple[Feature, ...] = (),
    finalized: FinalizedFeatures | None = None,
) -> ResponsePayload:
    """The response to a decoded ApiVersions request of a supported version."""
    version = int(request.__version__)
    name = getattr(request, "client_software_name", None)
    software_version = getattr(request, "client_software_version", None)
    if name is not None and not (
        _SOFTWARE_PATTERN.fullmatch(name) and _SOFTWARE_PATTERN.fullmatch(software_version or "")
    ):
        return build_api_versions_response(version, (), ErrorCode.invalid_request)
    return build_api_versions_response(version, ranges, ErrorCode.none, supported, finalized)


def pick_version(server: dict[int, tuple[int, int]], api_key: int, min_version: int, max_version: int) -> int:
    """The highest version of ``api_key`` in both ``min_version..max_version`` and the server's range."""
    if api_key not in server:
        raise UnsupportedVersion(f"the server does not serve api key {api_key}")
    lo, hi = server[api_key]
    best = min(hi, max_version)
    if best < max(lo, min_version):
        raise UnsupportedVersion(f"api key {api_key}: server supports {lo}..{hi}, client {min_version}..{max_version}")
    return best


def ranges_from_response(response: ResponsePayload) -> dict[int, tuple[int, int]]:
    """api key → (min, max) from a decoded ApiVersionsResponse."""
    keys = response.api_keys  # type: ignore[union-attr]  # every ApiVersionsResponse has them
    return {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in keys}
