"""SCRAM (RFC 5802/7677) both sides, and PLAIN, against RFC 7677's test vector and each other."""

from __future__ import annotations

import base64

import pytest

from kraftlab.node.security.authenticator import InMemoryCredentials, PlainExchange, SaslAuthenticator
from kraftlab.node.security.scram import (
    SCRAM_SHA_256,
    SCRAM_SHA_512,
    AuthenticationFailed,
    ScramClient,
    ScramMechanism,
    ScramServer,
    make_credential,
)


def test_rfc7677_example_exchange() -> None:
    """RFC 7677 section 3: user `user`, password `pencil`, 4096 iterations."""
    salt = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
    cred = make_credential(SCRAM_SHA_256, "pencil", 4096, salt)
    server = ScramServer(SCRAM_SHA_256, lambda mech, first: cred, nonce="%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0")
    first = server.step(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO")
    assert first == b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    final = server.step(b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                        b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
    assert final == b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
    assert server.complete


@pytest.mark.parametrize("mech", [SCRAM_SHA_256, SCRAM_SHA_512])
def test_client_and_server_agree_and_a_wrong_password_fails(mech: ScramMechanism) -> None:
    cred = make_credential(mech, "alice-secret")
    server = ScramServer(mech, lambda m, first: cred if first.user == "alice" else None)
    client = ScramClient(mech, "alice", "alice-secret")
    client.verify(server.step(client.final(server.step(client.first()))))
    assert server.complete and server.user == "alice"

    server = ScramServer(mech, lambda m, first: cred)
    client = ScramClient(mech, "alice", "wrong")
    server_first = server.step(client.first())
    with pytest.raises(AuthenticationFailed):
        server.step(client.final(server_first))
    assert not server.complete


def test_unknown_users_tampered_nonces_and_garbage_fail() -> None:
    cred = make_credential(SCRAM_SHA_256, "pw")
    with pytest.raises(AuthenticationFailed):
        ScramServer(SCRAM_SHA_256, lambda m, f: None).step(ScramClient(SCRAM_SHA_256, "nobody", "pw").first())
    server = ScramServer(SCRAM_SHA_256, lambda m, f: cred)
    client = ScramClient(SCRAM_SHA_256, "u", "pw")
    final = client.final(server.step(client.first()))
    with pytest.raises(AuthenticationFailed):
        server.step(final.replace(b"r=", b"r=X", 1))
    for junk in (b"", b"\xff\xfe", b"p=,,", b"n,,r=only"):
        with pytest.raises(AuthenticationFailed):
            ScramServer(SCRAM_SHA_256, lambda m, f: cred).step(junk)


def test_user_names_are_unescaped_and_extensions_read() -> None:
    seen = {}

    def lookup(mech: str, first: object) -> None:
        seen["first"] = first
        return None

    with pytest.raises(AuthenticationFailed):
        ScramServer(SCRAM_SHA_256, lookup).step(b"n,,n=a=2Cb=3Dc,r=abc,tokenauth=true")
    first = seen["first"]
    assert first.user == "a,b=c" and first.extensions == {"tokenauth": "true"}  # type: ignore[attr-defined]


def test_plain_checks_the_jaas_users() -> None:
    ok = PlainExchange({"admin": "admin-secret"})
    assert ok.step(b"\x00admin\x00admin-secret") == b"" and ok.complete and ok.principal == "User:admin"
    for token in (b"\x00admin\x00nope", b"\x00ghost\x00x", b"other\x00admin\x00admin-secret", b"admin"):
        with pytest.raises(AuthenticationFailed):
            PlainExchange({"admin": "admin-secret"}).step(token)


def test_the_authenticator_offers_only_enabled_mechanisms() -> None:
    store = InMemoryCredentials({("alice", "SCRAM-SHA-256"): make_credential(SCRAM_SHA_256, "pw")})
    auth = SaslAuthenticator(("SCRAM-SHA-256",), store)
    assert auth.start("PLAIN") is None and auth.start("GSSAPI") is None
    exchange = auth.start("SCRAM-SHA-256")
    assert exchange is not None
    client = ScramClient(SCRAM_SHA_256, "alice", "pw")
    client.verify(exchange.step(client.final(exchange.step(client.first()))))
    assert exchange.complete and exchange.principal == "User:alice"
