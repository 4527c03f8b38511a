"""SASL logins, SCRAM credentials and ACLs with unmodified real clients (confluent-kafka / librdkafka and
kafka-python) against one controller and two brokers configured with Kafka's keys only: every
listener SASL_PLAINTEXT (brokers log in to the controller and to each other with PLAIN), the
StandardAuthorizer with the admin as super user."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from kraftlab.node.config import render_properties
from kraftlab.node.journal import read_journal
from kraftlab.node.protocol.client import ProtocolClient
from kraftlab.node.raft import messages as m
from kraftlab.node.raft import wire
from kraftlab.node.security.bootstrap import parse_add_scram, write_bootstrap
from kraftlab.node.security.client_login import SaslLogin
from kraftlab.testing.kraftnode import ProcessCluster

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.timeout(300),
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
]

JAAS_ADMIN = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
              'password="admin-secret" user_admin="admin-secret";')
SECURITY = {
    "listener.security.protocol.map": "CONTROLLER:SASL_PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,PLAINTEXT:PLAINTEXT",
    "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
    "sasl.mechanism.controller.protocol": "PLAIN",
    "sasl.mechanism.inter.broker.protocol": "PLAIN",
    "listener.name.controller.plain.sasl.jaas.config": JAAS_ADMIN,
    "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS_ADMIN,
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "super.users": "User:admin",
}


def eventually(check: Callable[[], Any], timeout: float = 30.0, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            result = check()
            if result:
                return result
        except Exception as e:
            last = e
        time.sleep(0.2)
    raise AssertionError(f"{what} not reached within {timeout}s (last error: {last})")


BOOT_USER = f"boot-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[ProcessCluster]:
    c = ProcessCluster(tmp_path, n=1, brokers=2, config=SECURITY)
    # what `kraft-node format --add-scram` leaves (KIP-900; the CLI itself is tested in tests/security)
    write_bootstrap(c.meta_dir(c.ids[0]), [parse_add_scram(f"SCRAM-SHA-512=[name={BOOT_USER},password=boot-pw]")],
                    int(time.time() * 1000))
    for i in c.broker_ids:  # the brokers' one listener is SASL_PLAINTEXT, also between brokers
        text = c.configs[i].read_text().replace("PLAINTEXT://", "SASL_PLAINTEXT://")
        c.configs[i].write_text(text + render_properties({"inter.broker.listener.name": "SASL_PLAINTEXT"}))
    try:
        c.start_all()
        yield c
    finally:
        c.close()


def _confluent(c: ProcessCluster, mechanism: str, user: str, password: str, errors: list[Any] | None = None) -> Any:
    from confluent_kafka.admin import AdminClient

    config: dict[str, Any] = {
        "bootstrap.servers": c.bootstrap, "broker.address.family": "v4", "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password,
    }
    if errors is not None:
        config["error_cb"] = errors.append
    return AdminClient(config)


def _refused_login(c: ProcessCluster, mechanism: str, user: str, password: str) -> None:
    """librdkafka reports the broker's SASL_AUTHENTICATION_FAILED as an _AUTHENTICATION error and serves nothing."""
    from confluent_kafka import KafkaError, KafkaException

    errors: list[Any] = []
    client = _confluent(c, mechanism, user, password, errors)
    with pytest.raises(KafkaException):
        client.list_topics(timeout=5)
    client.poll(0.5)
    assert any(e.code() == KafkaError._AUTHENTICATION for e in errors), errors


def _controller_answer(
    c: ProcessCluster, user: str, password: str, message: Any, mechanism: str = "SCRAM-SHA-256"
) -> Any:
    """The error of a Raft request sent to the controller's SASL listener as `user`."""

    async def ask() -> Any:
        port = next(iter(c.ports.values()))
        async with ProtocolClient("127.0.0.1", port, login=SaslLogin(mechanism, user, password)) as client:
            return wire.response_from_wire(await client.send(wire.request_to_wire(message, c.cluster_id))).error

    return asyncio.run(ask())


def test_confluent_scram_login_acls_and_refusals(cluster: ProcessCluster) -> None:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import (
        AclBinding,
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        NewTopic,
        ResourcePatternType,
        ResourceType,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialDeletion,
        UserScramCredentialUpsertion,
    )

    c = cluster
    admin = _confluent(c, "PLAIN", "admin", "admin-secret")
    # both brokers registered and unfenced: they logged in to the controller
    eventually(lambda: len(admin.list_topics(timeout=5).brokers) == 2, what="two brokers listed to the admin")
    booted = _confluent(c, "SCRAM-SHA-512", BOOT_USER, "boot-pw")  # bootstrapped at format time
    assert len(eventually(lambda: booted.list_topics(timeout=5).brokers, what="the bootstrap user logged in")) == 2

    user = f"alice-{uuid.uuid4().hex[:8]}"
    prefix = f"sec-{uuid.uuid4().hex[:6]}-"
    upsert = UserScramCredentialUpsertion(user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096),
                                          b"alice-secret")
    admin.alter_user_scram_credentials([upsert])[user].result(timeout=30)
    described = eventually(lambda: admin.describe_user_scram_credentials([user])[user].result(timeout=10),
                           what="the credential described")
    assert [(i.mechanism, i.iterations) for i in described.scram_credential_infos] == [
        (ScramMechanism.SCRAM_SHA_256, 4096)]

    alice = _confluent(c, "SCRAM-SHA-256", user, "alice-secret")
    eventually(lambda: alice.list_topics(timeout=5).brokers, what="alice logged in")  # SCRAM login works

    _refused_login(c, "SCRAM-SHA-256", user, "not-her-password")

    topic = prefix + "orders"
    refused = alice.create_topics([NewTopic(topic, 1, 1)], operation_timeout=20)[topic]
    with pytest.raises(KafkaException, match="TOPIC_AUTHORIZATION_FAILED"):
        refused.result(timeout=30)

    grant = AclBinding(ResourceType.TOPIC, prefix, ResourcePatternType.PREFIXED, f"User:{user}", "*",
                       AclOperation.CREATE, AclPermissionType.ALLOW)
    admin.create_acls([grant])[grant].result(timeout=30)
    mine = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, f"User:{user}", None,
                            AclOperation.ANY, AclPermissionType.ANY)
    assert eventually(lambda: admin.describe_acls(mine).result(timeout=10) == [grant], what="the ACL described")

    def created() -> bool:  # the brokers apply the committed ACL a fetch later
        alice.create_topics([NewTopic(topic, 1, 1)], operation_timeout=20)[topic].result(timeout=30)
        return True

    eventually(created, what="alice's topic created after the grant")
    # the brokers journalled both decisions, the allowed one naming the ACL that allowed it (docs/contracts.md)
    decisions = [e for i in c.broker_ids for e in read_journal(c.journal(i))
                 if e["ev"] == "authz" and e["principal"] == f"User:{user}" and e["operation"] == "CREATE"
                 and e["resource"] == topic]
    assert any(not e["allowed"] for e in decisions)
    assert any(e["allowed"] and e["acl"] == [2, prefix, 4, f"User:{user}", "*", 5, 3] for e in decisions)
    assert topic in admin.list_topics(timeout=10).topics

    deleted = admin.delete_acls([mine])[mine].result(timeout=30)
    assert deleted == [grant]
    assert eventually(lambda: admin.describe_acls(mine).result(timeout=10) == [], what="the ACL gone")

    # alice may log in to the controllers' listener too, but not take part in the quorum
    assert _controller_answer(c, user, "alice-secret", m.FetchRequest(
        epoch=0, fetch_offset=0, last_fetched_epoch=0, replica_id=99)) == m.Errors.CLUSTER_AUTHORIZATION_FAILED
    assert _controller_answer(c, user, "alice-secret", m.DescribeQuorumRequest()) == (
        m.Errors.CLUSTER_AUTHORIZATION_FAILED)
    assert _controller_answer(c, "admin", "admin-secret", m.DescribeQuorumRequest(), "PLAIN") == m.Errors.NONE

    admin.alter_user_scram_credentials([UserScramCredentialDeletion(user, ScramMechanism.SCRAM_SHA_256)])[
        user].result(timeout=30)
    time.sleep(1.0)  # the deletion reaches both brokers' images
    _refused_login(c, "SCRAM-SHA-256", user, "alice-secret")
    admin.delete_topics([topic], operation_timeout=20)[topic].result(timeout=30)


def test_kafka_python_scram_login_and_acls(cluster: ProcessCluster) -> None:
    from kafka.admin import (
        ACL,
        ACLFilter,
        ACLOperation,
        ACLPermissionType,
        ACLResourcePatternType,
        KafkaAdminClient,
        ResourcePattern,
        ResourcePatternFilter,
        ResourceType,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )
    from kafka.errors import KafkaError

    c = cluster

    def client(mechanism: str, user: str, password: str) -> KafkaAdminClient:
        return KafkaAdminClient(bootstrap_servers=c.bootstrap, security_protocol="SASL_PLAINTEXT",
                                sasl_mechanism=mechanism, sasl_plain_username=user, sasl_plain_password=password,
                                request_timeout_ms=10_000)

    admin = eventually(lambda: client("PLAIN", "admin", "admin-secret"), what="admin connected")
    try:
        eventually(lambda: len(admin.describe_cluster()["brokers"]) == 2, what="two brokers")
        user = f"bob-{uuid.uuid4().hex[:8]}"
        upsert = UserScramCredentialUpsertion(user, ScramMechanism.SCRAM_SHA_512, "pw-b", iterations=8192)
        assert admin.alter_user_scram_credentials([upsert]) == {user: None}
        described = eventually(lambda: admin.describe_user_scram_credentials([user])[user]["credential_infos"],
                               what="bob's credential described")
        assert described == [{"mechanism": ScramMechanism.SCRAM_SHA_512, "iterations": 8192}]
        bob = eventually(lambda: client("SCRAM-SHA-512", user, "pw-b"), what="bob logged in with SCRAM")
        bob.close()
        with pytest.raises(KafkaError):
            client("SCRAM-SHA-512", user, "wrong").close()

        name = f"kp-{uuid.uuid4().hex[:8]}"
        acl = ACL(f"User:{user}", "*", ACLOperation.READ, ACLPermissionType.ALLOW,
                  ResourcePattern(ResourceType.TOPIC, name))
        result = admin.create_acls([acl])
        assert result["failed"] == [] and len(result["succeeded"]) == 1
        flt = ACLFilter(f"User:{user}", None, ACLOperation.ANY, ACLPermissionType.ANY,
                        ResourcePatternFilter(ResourceType.ANY, None, ACLResourcePatternType.ANY))
        found = eventually(lambda: admin.describe_acls(flt)[0], what="bob's ACL described")
        assert [(a.principal, a.operation, a.resource_pattern.resource_name) for a in found] == [
            (f"User:{user}", ACLOperation.READ, name)]
        deleted = admin.delete_acls([flt])
        assert len(deleted[0][1]) == 1
    finally:
        admin.close()
