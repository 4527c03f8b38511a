"""SASL on a real listener (loopback): the server's SaslSession guard and the node's own SaslLogin."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from kio.schema.describe_cluster.v0.request import DescribeClusterRequest
from kio.schema.errors import ErrorCode
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest

from kraftlab.node.controller.messages import respond
from kraftlab.node.protocol.client import ProtocolClient
from kraftlab.node.protocol.errors import ConnectFailed, ConnectionLost
from kraftlab.node.protocol.guard import Peer
from kraftlab.node.protocol.registry import ApiRegistry, RequestContext
from kraftlab.node.protocol.server import ProtocolServer
from kraftlab.node.security.authenticator import InMemoryCredentials, SaslAuthenticator
from kraftlab.node.security.client_login import SaslLogin
from kraftlab.node.security.scram import SCRAM_SHA_512, make_credential
from kraftlab.node.security.session import SaslSession, register_sasl_apis

DESCRIBE_CLUSTER = 60


def run(scenario: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(asyncio.wait_for(scenario(), 30))


def _server(principals: list[str], sasl: bool = True) -> ProtocolServer:
    registry = ApiRegistry()
    register_sasl_apis(registry)

    def describe(request: Any, context: RequestContext) -> Any:
        principals.append(context.principal)
        return respond(request, {"error_code": ErrorCode.none, "cluster_id": "c"})

    registry.register(DESCRIBE_CLUSTER, 0, 0, describe)
    store = InMemoryCredentials({("alice", "SCRAM-SHA-512"): make_credential(SCRAM_SHA_512, "alice-secret")})
    auth = SaslAuthenticator(("PLAIN", "SCRAM-SHA-512"), store, {"admin": "admin-secret"})

    def guard(peer: Peer) -> SaslSession:
        return SaslSession(auth, peer)

    return ProtocolServer(registry, guard_factory=guard if sasl else None)


@pytest.mark.parametrize(("mechanism", "user", "password", "principal"), [
    ("SCRAM-SHA-512", "alice", "alice-secret", "User:alice"),
    ("PLAIN", "admin", "admin-secret", "User:admin"),
])
def test_a_login_names_the_principal_of_every_later_request(mechanism: str, user: str, password: str,
                                                             principal: str) -> None:
    async def scenario() -> None:
        seen: list[str] = []
        login = SaslLogin(mechanism, user, password)
        async with _server(seen) as server, ProtocolClient("127.0.0.1", server.port, login=login) as c:
            for _ in range(2):
                response = await c.send(DescribeClusterRequest(include_cluster_authorized_operations=False))
                assert response.cluster_id == "c"
        assert seen == [principal, principal]

    run(scenario)


@pytest.mark.parametrize(("mechanism", "user", "password"), [
    ("SCRAM-SHA-512", "alice", "wrong"), ("SCRAM-SHA-512", "nobody", "x"), ("PLAIN", "admin", "wrong"),
    ("SCRAM-SHA-256", "alice", "alice-secret"),
])
def test_a_failed_login_is_refused_and_serves_nothing(mechanism: str, user: str, password: str) -> None:
    async def scenario() -> None:
        seen: list[str] = []
        login = SaslLogin(mechanism, user, password)
        async with _server(seen) as server, ProtocolClient("127.0.0.1", server.port, login=login) as c:
            with pytest.raises(ConnectFailed, match=r"SASL_AUTHENTICATION_FAILED|UNSUPPORTED_SASL_MECHANISM"):
                await c.send(DescribeClusterRequest(include_cluster_authorized_operations=False))
        assert seen == []

    run(scenario)


def test_a_request_before_the_login_closes_the_connection() -> None:
    async def scenario() -> None:
        seen: list[str] = []
        async with _server(seen) as server, ProtocolClient("127.0.0.1", server.port) as c:
            with pytest.raises(ConnectionLost):
                await c.send(DescribeClusterRequest(include_cluster_authorized_operations=False))
        assert seen == []

    run(scenario)


def test_a_plaintext_listener_answers_a_handshake_illegal_sasl_state() -> None:
    async def scenario() -> None:
        seen: list[str] = []
        async with _server(seen, sasl=False) as server, ProtocolClient("127.0.0.1", server.port) as c:
            response = await c.send(SaslHandshakeRequest(mechanism="PLAIN"))
            assert response.error_code == ErrorCode.illegal_sasl_state
            await c.send(DescribeClusterRequest(include_cluster_authorized_operations=False))
        assert seen == ["User:ANONYMOUS"]

    run(scenario)
