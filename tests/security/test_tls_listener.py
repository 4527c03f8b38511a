"""TLS listeners from Kafka's PEM keys: SSL with client certificates (mTLS principal) and SASL_SSL."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from certs import ThrowawayCA
from kio.schema.describe_cluster.v0.request import DescribeClusterRequest
from kio.schema.errors import ErrorCode

from kraftlab.node.config import ConfigError, config_from_properties
from kraftlab.node.controller.messages import respond
from kraftlab.node.protocol.client import ProtocolClient
from kraftlab.node.protocol.errors import ConnectFailed, RequestError
from kraftlab.node.protocol.registry import ApiRegistry, RequestContext
from kraftlab.node.protocol.server import ProtocolServer
from kraftlab.node.security.client_login import SaslLogin
from kraftlab.node.security.listeners import NodeSecurity
from kraftlab.node.security.session import register_sasl_apis

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
        'password="admin-secret" user_admin="admin-secret";')


def run(scenario: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(asyncio.wait_for(scenario(), 30))


def _security(
    tmp_path: Path, protocol: str, client_auth: str, inline: bool = False
) -> tuple[NodeSecurity, ThrowawayCA]:
    ca = ThrowawayCA(tmp_path)
    server_file, chain, key = ca.issue("broker-1")
    props = {
        "process.roles": "broker", "node.id": "2", "controller.quorum.voters": "1@127.0.0.1:9093",
        "controller.listener.names": "CONTROLLER", "listeners": "SECURE://127.0.0.1:9092",
        "inter.broker.listener.name": "SECURE",
        "listener.security.protocol.map": f"SECURE:{protocol},CONTROLLER:PLAINTEXT",
        "ssl.keystore.type": "PEM", "ssl.truststore.type": "PEM", "ssl.client.auth": client_auth,
        "sasl.enabled.mechanisms": "PLAIN", "listener.name.secure.plain.sasl.jaas.config": JAAS,
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
    }
    if inline:
        props |= {"ssl.keystore.certificate.chain": chain, "ssl.keystore.key": key,
                  "ssl.truststore.certificates": ca.ca_pem}
    else:
        props |= {"ssl.keystore.location": str(server_file), "ssl.truststore.location": str(ca.ca_file)}
    return NodeSecurity.from_config(config_from_properties(props)), ca


def _server(security: NodeSecurity, seen: list[str]) -> ProtocolServer:
    registry = ApiRegistry()
    register_sasl_apis(registry)

    def describe(request: Any, context: RequestContext) -> Any:
        seen.append(context.principal)
        return respond(request, {"error_code": ErrorCode.none, "cluster_id": "c"})

    registry.register(60, 0, 0, describe)
    return ProtocolServer(registry, guard_factory=security.guard_factory("SECURE"),
                          ssl_context=security.ssl_context("SECURE"))


def _client_ssl(ca: ThrowawayCA, cn: str | None) -> Any:
    import ssl

    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.load_verify_locations(cafile=str(ca.ca_file))
    if cn is not None:
        ctx.load_cert_chain(str(ca.issue(cn)[0]))
    return ctx


@pytest.mark.parametrize("inline", [False, True])
def test_mtls_principal_is_the_certificate_subject(tmp_path: Path, inline: bool) -> None:
    security, ca = _security(tmp_path, "SSL", "required", inline)

    async def scenario() -> None:
        seen: list[str] = []
        async with _server(security, seen) as server:
            async with ProtocolClient("127.0.0.1", server.port, ssl_context=_client_ssl(ca, "alice")) as c:
                await c.send(DescribeClusterRequest(include_cluster_authorized_operations=False))
            async with ProtocolClient("127.0.0.1", server.port, ssl_context=_client_ssl(ca, None)) as c:
                with pytest.raises(RequestError):  # required: no certificate, no connection
                    await c.send(DescribeClusterRequest(include_cluster_authorized_operations=False))
            async with ProtocolClient("127.0.0.1", server.port) as c:  # plaintext against TLS
                with pytest.raises(RequestError):
                    await c.send(DescribeClusterRequest(include_cluster_authorized_operations=False))
        assert seen == ["User:CN=alice,O=kraftlab"]

    run(scenario)


def test_sasl_ssl_logs_in_over_tls_and_the_node_uses_its_own_client_settings(tmp_path: Path) -> None:
    security, _ = _security(tmp_path, "SASL_SSL", "none")
    login = security.login_for("SECURE", "sasl.mechanism.inter.broker.protocol")
    client_ssl = security.client_ssl("SECURE")
    assert login is not None and client_ssl is not None

    async def scenario() -> None:
        seen: list[str] = []
        async with _server(security, seen) as server:
            async with ProtocolClient("127.0.0.1", server.port, ssl_context=client_ssl, login=login) as c:
                await c.send(DescribeClusterRequest(include_cluster_authorized_operations=False))
            wrong = SaslLogin("PLAIN", "admin", "nope")
            async with ProtocolClient("127.0.0.1", server.port, ssl_context=client_ssl, login=wrong) as c:
                with pytest.raises(ConnectFailed):
                    await c.send(DescribeClusterRequest(include_cluster_authorized_operations=False))
        assert seen == ["User:admin"]

    run(scenario)


def test_bad_security_keys_are_clear_errors(tmp_path: Path) -> None:
    base = {"process.roles": "broker", "node.id": "2", "controller.quorum.voters": "1@127.0.0.1:9093",
            "controller.listener.names": "CONTROLLER", "listeners": "SASL_PLAINTEXT://127.0.0.1:9092",
            "inter.broker.listener.name": "SASL_PLAINTEXT"}
    cases = [
        ({}, "sasl.enabled.mechanisms"),
        ({"sasl.enabled.mechanisms": "GSSAPI"}, "GSSAPI is not supported"),
        ({"sasl.enabled.mechanisms": "PLAIN", "authorizer.class.name": "x.Y"}, "authorizer.class.name"),
    ]
    for extra, message in cases:
        with pytest.raises(ConfigError, match=message):
            NodeSecurity.from_config(config_from_properties(base | extra))
    ssl_props = base | {"listeners": "SSL://127.0.0.1:9092", "inter.broker.listener.name": "SSL",
                        "ssl.keystore.location": str(tmp_path / "missing.pem")}
    with pytest.raises(ConfigError, match=r"ssl\.keystore"):
        NodeSecurity.from_config(config_from_properties(ssl_props))
