"""The handler registry: which api keys and version ranges an endpoint serves, and who handles them.

A handler receives the decoded request entity and a ``RequestContext`` and returns the response
entity (or ``None`` for a request Kafka answers with nothing, such as Produce with acks=0), either
directly or as an awaitable. ApiVersions (key 18) is always registered and answered from the registry.
"""

from __future__ import annotations

from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import Protocol, TypeAlias

from kio.static.protocol import RequestPayload, ResponsePayload

from kraftlab.node.protocol.api_versions import (
    API_VERSIONS_RANGE,
    ApiRange,
    Feature,
    FinalizedFeatures,
    answer_api_versions,
)
from kraftlab.node.protocol.errors import UnsupportedApi
from kraftlab.node.protocol.headers import API_VERSIONS_KEY, has_schema, request_schema

HandlerResult: TypeAlias = ResponsePayload | Awaitable[ResponsePayload | None] | None


@dataclass(frozen=True, slots=True)
class RequestContext:
    """What a handler may know about the request besides its body."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    peer: str
    listener: str = ""
    principal: str = "User:ANONYMOUS"
    """Who sent it: the listener's SASL login or TLS client certificate (node.protocol.guard)."""
    token_authenticated: bool = False
    """The principal logged in with a delegation token."""


class Handler(Protocol):
    """Serves one api: sync or async, returns the response entity of the request's version."""

    def __call__(self, request: RequestPayload, context: RequestContext, /) -> HandlerResult: ...


@dataclass(frozen=True, slots=True)
class ApiEntry:
    """One registered api."""

    api_key: int
    min_version: int
    max_version: int
    handler: Handler


@dataclass
class ApiRegistry:
    """Handlers by api key with their supported version ranges."""

    supported_features: tuple[Feature, ...] = ()
    finalized_features: FinalizedFeatures = field(default_factory=FinalizedFeatures)
    api_versions_range: tuple[int, int] = API_VERSIONS_RANGE  # narrower to behave like an older server
    _entries: dict[int, ApiEntry] = field(default_factory=dict)

    def __post_init__(self) -> None:
        lo, hi = self.api_versions_range
        if not API_VERSIONS_RANGE[0] <= lo <= hi <= API_VERSIONS_RANGE[1]:
            raise ValueError(f"ApiVersions range {lo}..{hi} outside {API_VERSIONS_RANGE}")
        self._entries[API_VERSIONS_KEY] = ApiEntry(API_VERSIONS_KEY, lo, hi, self._api_versions)

    def register(self, api_key: int, min_version: int, max_version: int, handler: Handler) -> None:
        """Serve ``api_key`` versions ``min_version..max_version`` (inclusive) with ``handler``."""
        if api_key == API_VERSIONS_KEY:
            raise ValueError("ApiVersions is answered by the registry itself")
        if api_key in self._entries:
            raise ValueError(f"api key {api_key} is already registered")
        if not 0 <= min_version <= max_version:
            raise ValueError(f"bad version range {min_version}..{max_version}")
        for version in range(min_version, max_version + 1):
            if not has_schema(api_key, version):  # schemas load when a request first needs them
                raise UnsupportedApi(f"unknown api key {api_key} version {version}")
        self._entries[api_key] = ApiEntry(api_key, min_version, max_version, handler)

    def supports(self, api_key: int, api_version: int) -> bool:
        entry = self._entries.get(api_key)
        return entry is not None and entry.min_version <= api_version <= entry.max_version

    def lookup(self, api_key: int, api_version: int) -> tuple[type[RequestPayload], Handler]:
        """The request class and handler for a request; ``UnsupportedApi`` if not served."""
        entry = self._entries.get(api_key)
        if entry is None:
            raise UnsupportedApi(f"api key {api_key} is not served here")
        if not entry.min_version <= api_version <= entry.max_version:
            raise UnsupportedApi(
                f"api key {api_key} version {api_version} is not served here "
                f"(supported {entry.min_version}..{entry.max_version})"
            )
        return request_schema(api_key, api_version), entry.handler

    def ranges(self) -> tuple[ApiRange, ...]:
        """(api key, min version, max version) of every served api, by api key."""
        return tuple(ApiRange(e.api_key, e.min_version, e.max_version) for _, e in sorted(self._entries.items()))

    def _api_versions(self, request: RequestPayload, context: RequestContext) -> ResponsePayload:
        return answer_api_versions(request, self.ranges(), self.supported_features, self.finalized_features)
