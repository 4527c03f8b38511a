"""CreateAcls / DeleteAcls / AlterUserScramCredentials on the controller: records, replay, snapshots."""

from __future__ import annotations

from controller_harness import Harness
from kio.schema.alter_user_scram_credentials.v0.request import (
    AlterUserScramCredentialsRequest,
    ScramCredentialDeletion,
    ScramCredentialUpsertion,
)
from kio.schema.create_acls.v3.request import AclCreation, CreateAclsRequest
from kio.schema.delete_acls.v3.request import DeleteAclsFilter, DeleteAclsRequest
from kio.schema.errors import ErrorCode

from kraftlab.node.metadata.image import MetadataImage
from kraftlab.node.security.acl import AclBinding
from kraftlab.node.security.scram import SCRAM_SHA_256, ScramClient, ScramServer, salted_password

TOPIC, LITERAL, PREFIXED, READ, WRITE, ALLOW, DENY = 2, 3, 4, 3, 4, 3, 2


def creation(name: str, op: int = READ, perm: int = ALLOW, pattern: int = LITERAL, principal: str = "User:alice",
             rtype: int = TOPIC) -> AclCreation:
    return AclCreation(resource_type=rtype, resource_name=name, resource_pattern_type=pattern, principal=principal,
                       host="*", operation=op, permission_type=perm)


def delete_filter(name: str | None = None, pattern: int = 1, op: int = 1) -> DeleteAclsFilter:
    return DeleteAclsFilter(resource_type_filter=1, resource_name_filter=name, pattern_type_filter=pattern,
                            principal_filter=None, host_filter=None, operation=op, permission_type=1)


def test_create_acls_stores_each_binding_once_and_refuses_invalid_ones(h: Harness) -> None:
    resp = h.run(CreateAclsRequest(creations=(creation("orders"), creation("orders"), creation("x", op=1),
                                              creation("ord", WRITE, DENY, PREFIXED))))
    assert [r.error_code for r in resp.results] == [ErrorCode.none, ErrorCode.none, ErrorCode.invalid_request,
                                                    ErrorCode.none]
    assert sorted(b.resource_name for b in h.image().acls.values()) == ["ord", "orders"]
    again = h.run(CreateAclsRequest(creations=(creation("orders"),)))
    assert again.results[0].error_code == ErrorCode.none and len(h.image().acls) == 2
    assert h.active().committed_image.acls == h.image().acls


def test_delete_acls_removes_what_each_filter_matches_once(h: Harness) -> None:
    h.run(CreateAclsRequest(creations=(creation("orders"), creation("orders", WRITE),
                                       creation("ord", pattern=PREFIXED))))
    resp = h.run(DeleteAclsRequest(filters=(delete_filter("orders", op=WRITE), delete_filter("orders", 2),
                                            delete_filter(op=0))))
    first, second, bad = resp.filter_results
    assert [(m.resource_name, m.operation) for m in first.matching_acls] == [("orders", WRITE)]
    assert sorted((m.resource_name, m.pattern_type) for m in second.matching_acls) == [("ord", PREFIXED),
                                                                                       ("orders", LITERAL)]
    assert bad.error_code == ErrorCode.invalid_request
    assert h.image().acls == {}


def _upsert(user: str, password: str, iterations: int = 4096, mech: int = 1) -> ScramCredentialUpsertion:
    salt = b"0123456789abcdef"
    return ScramCredentialUpsertion(name=user, mechanism=mech, iterations=iterations, salt=salt,
                                    salted_password=salted_password(SCRAM_SHA_256, password, salt, iterations))


def test_scram_upsert_stores_keys_a_login_checks_and_deletion_removes_them(h: Harness) -> None:
    resp = h.run(AlterUserScramCredentialsRequest(deletions=(), upsertions=(_upsert("alice", "alice-secret"),)))
    assert [(r.user, r.error_code) for r in resp.results] == [("alice", ErrorCode.none)]
    cred = h.image().scram[("alice", 1)]
    assert cred.iterations == 4096 and b"alice-secret" not in cred.stored_key + cred.server_key
    server = ScramServer(SCRAM_SHA_256, lambda mech, first: h.image().scram.get((first.user, 1)))
    client = ScramClient(SCRAM_SHA_256, "alice", "alice-secret")
    client.verify(server.step(client.final(server.step(client.first()))))
    resp = h.run(AlterUserScramCredentialsRequest(deletions=(ScramCredentialDeletion(name="alice", mechanism=1),),
                                                  upsertions=()))
    assert resp.results[0].error_code == ErrorCode.none and h.image().scram == {}


def test_scram_refusals_are_per_user_and_change_nothing_for_that_user(h: Harness) -> None:
    resp = h.run(AlterUserScramCredentialsRequest(
        deletions=(ScramCredentialDeletion(name="ghost", mechanism=1),
                   ScramCredentialDeletion(name="bob", mechanism=1)),
        upsertions=(_upsert("bob", "pw"), _upsert("carol", "pw", iterations=100), _upsert("dave", "pw", mech=9),
                    _upsert("", "pw"), _upsert("erin", "pw"))))
    codes = {r.user: r.error_code for r in resp.results}
    # bob's first change (a deletion of nothing) is judged first: RESOURCE_NOT_FOUND, as in Kafka
    assert codes == {"ghost": ErrorCode.resource_not_found, "bob": ErrorCode.resource_not_found,
                     "carol": ErrorCode.unacceptable_credential, "dave": ErrorCode.unsupported_sasl_mechanism,
                     "": ErrorCode.unacceptable_credential, "erin": ErrorCode.none}
    assert set(h.image().scram) == {("erin", 1)}


def test_a_user_is_altered_at_most_once_per_request_whatever_the_mechanisms(h: Harness) -> None:
    """ScramControlManager.alterCredentials keys a request's changes by user name: a second change of
    the same user (another mechanism, or a deletion and an upsertion) is DUPLICATE_RESOURCE."""
    resp = h.run(AlterUserScramCredentialsRequest(deletions=(), upsertions=(
        _upsert("alice", "pw", mech=1), _upsert("alice", "pw", mech=2), _upsert("bob", "pw"))))
    assert {r.user: r.error_code for r in resp.results} == {"alice": ErrorCode.duplicate_resource,
                                                            "bob": ErrorCode.none}
    resp = h.run(AlterUserScramCredentialsRequest(deletions=(ScramCredentialDeletion(name="bob", mechanism=1),),
                                                  upsertions=(_upsert("bob", "pw2", mech=2),)))
    assert {r.user: r.error_code for r in resp.results} == {"bob": ErrorCode.duplicate_resource}
    assert set(h.image().scram) == {("bob", 1)}


def test_acls_and_credentials_survive_a_snapshot_and_a_failover(h3: Harness) -> None:
    h3.run(CreateAclsRequest(creations=(creation("orders"),)))
    h3.run(AlterUserScramCredentialsRequest(deletions=(), upsertions=(_upsert("alice", "pw"),)))
    image = h3.active().committed_image
    again = MetadataImage.from_records(image.to_records())
    assert again == image and again.semantic_digest() == image.semantic_digest()
    assert list(again.acls.values()) == [AclBinding(TOPIC, "orders", LITERAL, "User:alice", "*", READ, ALLOW)]
    h3.elect(2)
    assert h3.active().committed_image.acls == image.acls and h3.active().committed_image.scram == image.scram


def test_a_standby_answers_not_controller_on_every_item(h3: Harness) -> None:
    resp = h3.run(CreateAclsRequest(creations=(creation("a"), creation("b"))), to=2)
    assert [r.error_code for r in resp.results] == [ErrorCode.not_controller] * 2
