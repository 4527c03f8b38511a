"""ApiVersions negotiation for a client: learn the server's ranges, then pick versions from them.

Starts with the newest ApiVersions version this library knows; a server that does not know it
answers UNSUPPORTED_VERSION with its own ApiVersions range, and the request is retried once with the
highest version both sides know (Kafka's client does the same).
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode
from kio.static.protocol import RequestPayload

from kraftlab.node.protocol.api_versions import API_VERSIONS_RANGE, pick_version, ranges_from_response
from kraftlab.node.protocol.client import ProtocolClient
from kraftlab.node.protocol.errors import UnsupportedVersion
from kraftlab.node.protocol.headers import API_VERSIONS_KEY, request_schema

SOFTWARE_NAME = "kraftlab"
SOFTWARE_VERSION = "0.1.0"
_FIRST_VERSION_WITH_SOFTWARE = 3


def api_versions_request(version: int) -> RequestPayload:
    """An ApiVersionsRequest of ``version`` naming this software (v3+)."""
    request_type = request_schema(API_VERSIONS_KEY, version)
    if version >= _FIRST_VERSION_WITH_SOFTWARE:
        # a v3+ ApiVersionsRequest has these fields; the schema lookup is typed for any request
        return request_type(client_software_name=SOFTWARE_NAME, client_software_version=SOFTWARE_VERSION)  # type: ignore[call-arg]
    return request_type()


async def fetch_api_versions(client: ProtocolClient) -> dict[int, tuple[int, int]]:
    """The server's served api keys → (min, max) version."""
    lo, hi = API_VERSIONS_RANGE
    response = await client.send(api_versions_request(hi))
    error = response.error_code  # type: ignore[union-attr]  # every ApiVersionsResponse has one
    if error == ErrorCode.unsupported_version:
        version = pick_version(ranges_from_response(response), API_VERSIONS_KEY, lo, hi)
        response = await client.send(api_versions_request(version))
        error = response.error_code  # type: ignore[union-attr]  # every ApiVersionsResponse has one
    if error != ErrorCode.none:
        raise UnsupportedVersion(f"ApiVersions failed with {ErrorCode(error).name}")
    return ranges_from_response(response)


async def negotiate(client: ProtocolClient, wanted: dict[int, tuple[int, int]]) -> dict[int, int]:
    """For each api key → (our min, our max) in ``wanted``, the highest version the server also serves."""
    server = await fetch_api_versions(client)
    return {api_key: pick_version(server, api_key, lo, hi) for api_key, (lo, hi) in wanted.items()}
