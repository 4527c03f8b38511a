"""Delegation tokens end to end against one controller and two brokers with Kafka's keys only
(every listener SASL_PLAINTEXT, the StandardAuthorizer, `delegation.token.secret.key` on every
node): a SCRAM user creates a token on a broker (forwarded in an Envelope, so the controller acts
for that user), describes it, logs in with it (SCRAM with `tokenauth=true`: neither librdkafka nor
kafka-python offers the delegation token APIs or the SCRAM extension, so the node's own client
speaks them) as the token's owner, renews it, and once it is expired the login is refused.
"""

from __future__ import annotations

import asyncio
import datetime
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kio.schema.create_acls.v3.request import AclCreation, CreateAclsRequest
from kio.schema.create_delegation_token.v3.request import CreatableRenewers, CreateDelegationTokenRequest
from kio.schema.create_topics.v7.request import CreatableTopic, CreateTopicsRequest
from kio.schema.describe_delegation_token.v3.request import DescribeDelegationTokenRequest
from kio.schema.errors import ErrorCode
from kio.schema.expire_delegation_token.v2.request import ExpireDelegationTokenRequest
from kio.schema.renew_delegation_token.v2.request import RenewDelegationTokenRequest
from test_e2e_security import SECURITY, eventually

from kraftlab.node.config import render_properties
from kraftlab.node.protocol.client import ProtocolClient
from kraftlab.node.security.acl import AclOperation, AclPermission, PatternType, ResourceType
from kraftlab.node.security.bootstrap import parse_add_scram, write_bootstrap
from kraftlab.node.security.client_login import SaslLogin
from kraftlab.node.security.tokens import token_hmac, token_password
from kraftlab.testing.kraftnode import ProcessCluster

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.timeout(300),
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
]

SECRET = f"secret-{uuid.uuid4().hex}"
USER = f"tok-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[ProcessCluster]:
    c = ProcessCluster(tmp_path, n=1, brokers=2, config={**SECURITY, "delegation.token.secret.key": SECRET})
    write_bootstrap(c.meta_dir(c.ids[0]), [parse_add_scram(f"SCRAM-SHA-512=[name={USER},password=pw]")],
                    int(time.time() * 1000))
    for i in c.broker_ids:
        text = c.configs[i].read_text().replace("PLAINTEXT://", "SASL_PLAINTEXT://")
        c.configs[i].write_text(text + render_properties({"inter.broker.listener.name": "SASL_PLAINTEXT"}))
    try:
        c.start_all()
        yield c
    finally:
        c.close()


def ask(c: ProcessCluster, broker: int, login: SaslLogin, request: Any) -> Any:
    async def run() -> Any:
        async with ProtocolClient("127.0.0.1", c.broker_ports[broker], login=login, request_timeout=20) as client:
            return await client.send(request)

    return asyncio.run(run())


def ms(ts: datetime.datetime) -> int:
    return round(ts.timestamp() * 1000)


def test_a_token_is_created_described_used_to_log_in_renewed_and_expired(cluster: ProcessCluster) -> None:
    c = cluster
    b1, b2 = c.broker_ids
    user = SaslLogin("SCRAM-SHA-512", USER, "pw")
    admin = SaslLogin("PLAIN", "admin", "admin-secret")
    created = eventually(lambda: ask(c, b1, user, CreateDelegationTokenRequest(
        owner_principal_type=None, owner_principal_name=None,
        renewers=(CreatableRenewers(principal_type="User", principal_name="admin"),),
        max_lifetime=datetime.timedelta(hours=2))), what="a token created (the brokers are up)")
    assert created.error_code == ErrorCode.none, created
    assert (created.principal_name, created.token_requester_principal_name) == (USER, USER)
    assert bytes(created.hmac) == token_hmac(SECRET, created.token_id)  # Kafka's HMAC of the id
    assert ms(created.max_timestamp) - ms(created.issue_timestamp) == 2 * 3600 * 1000

    described = eventually(lambda: ask(c, b2, user, DescribeDelegationTokenRequest(owners=None)).tokens,
                           what="the token described on the other broker")
    assert [(t.token_id, bytes(t.hmac), t.principal_name) for t in described] == [
        (created.token_id, bytes(created.hmac), USER)]
    assert ask(c, b2, SaslLogin("SCRAM-SHA-512", USER, "pw"), DescribeDelegationTokenRequest(owners=())).tokens == ()

    token = SaslLogin("SCRAM-SHA-512", created.token_id, token_password(bytes(created.hmac)), token=True)
    for broker in (b1, b2):  # the token logs in on both brokers, as its owner
        refused = eventually(lambda b=broker: ask(c, b, token, DescribeDelegationTokenRequest(owners=None)),
                             what="a login with the token")
        # Kafka's rule for a token-authenticated session: no token requests
        assert refused.error_code == ErrorCode.delegation_token_request_not_allowed
    topic = f"tok-{uuid.uuid4().hex[:8]}"
    create_topic = CreateTopicsRequest(
        topics=(CreatableTopic(name=topic, num_partitions=1, replication_factor=1, assignments=(), configs=()),),
        timeout=datetime.timedelta(seconds=20), validate_only=False)
    assert ask(c, b1, token, create_topic).topics[0].error_code == ErrorCode.topic_authorization_failed
    grant = ask(c, b1, admin, CreateAclsRequest(creations=(AclCreation(
        resource_type=ResourceType.TOPIC, resource_name=topic, resource_pattern_type=PatternType.LITERAL,
        principal=f"User:{USER}", host="*", operation=AclOperation.CREATE, permission_type=AclPermission.ALLOW),)))
    assert grant.results[0].error_code == ErrorCode.none
    # the token session is its owner: the owner's ACL lets it create the topic (once the broker has the ACL)
    eventually(lambda: ask(c, b1, token, create_topic).topics[0].error_code == ErrorCode.none,
               what="the token's owner allowed to create the topic")
    with pytest.raises(Exception, match="SASL_AUTHENTICATION_FAILED"):
        ask(c, b1, SaslLogin("SCRAM-SHA-512", created.token_id, token_password(b"\x00" * 64), token=True),
            DescribeDelegationTokenRequest(owners=None))

    mac = bytes(created.hmac)
    renewed = ask(c, b2, admin, RenewDelegationTokenRequest(hmac=mac, renew_period=datetime.timedelta(minutes=30)))
    assert renewed.error_code == ErrorCode.none  # a renewer
    assert ms(created.issue_timestamp) < ms(renewed.expiry_timestamp) <= ms(created.max_timestamp)
    other = ask(c, b1, SaslLogin("SCRAM-SHA-512", USER, "pw"), ExpireDelegationTokenRequest(
        hmac=b"\x01" * 64, expiry_time_period=datetime.timedelta(milliseconds=-1)))
    assert other.error_code == ErrorCode.delegation_token_not_found
    expired = ask(c, b1, user, ExpireDelegationTokenRequest(hmac=mac,
                                                            expiry_time_period=datetime.timedelta(milliseconds=-1)))
    assert expired.error_code == ErrorCode.none

    def login_refused() -> bool:
        try:
            ask(c, b2, token, DescribeDelegationTokenRequest(owners=None))
        except Exception as e:
            return "SASL_AUTHENTICATION_FAILED" in str(e)
        return False

    eventually(login_refused, what="the expired token refused")
    assert ask(c, b1, user, DescribeDelegationTokenRequest(owners=None)).tokens == ()
