"""Each listener's security from Kafka's keys, and the node's own logins to other nodes.

Server side, per listener (`listener.security.protocol.map`):
- PLAINTEXT: everyone is `User:ANONYMOUS`;
- SSL: TLS (`ssl.keystore.*` as PEM: `ssl.keystore.type=PEM` with `ssl.keystore.location` or the
  inline `ssl.keystore.certificate.chain` + `ssl.keystore.key`; `ssl.truststore.location` or
  `ssl.truststore.certificates`), `ssl.client.auth=required|requested|none`; the principal is the
  client certificate's subject;
- SASL_PLAINTEXT / SASL_SSL: a SASL login (`sasl.enabled.mechanisms`, or
  `listener.name.<name>.sasl.enabled.mechanisms`): PLAIN against the `user_<name>="<password>"`
  entries of the listener's JAAS config (`listener.name.<name>.plain.sasl.jaas.config`, else
  `sasl.jaas.config`), SCRAM-SHA-256/512 against the committed metadata.
Delegation tokens log in on SCRAM listeners with `tokenauth=true` (`delegation.token.secret.key`).
Authorization: `authorizer.class.name` (Kafka's StandardAuthorizer; unset: none), `super.users`
(`User:a;User:b`), `allow.everyone.if.no.acl.found`.

Client side (`login_for`): a broker logging in to the controllers (`controller.listener.names`,
`sasl.mechanism.controller.protocol`) or to another broker (`inter.broker.listener.name`,
`sasl.mechanism.inter.broker.protocol`) uses the `username`/`password` of that listener's JAAS
config for the mechanism, and the truststore (and keystore, for mTLS) on SSL.
"""

from __future__ import annotations

import contextlib
import os
import re
import ssl
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from kraftlab.node.config import ConfigError, NodeConfig
from kraftlab.node.metadata.image import MetadataImage
from kraftlab.node.protocol.guard import ConnectionGuard, GuardFactory, Peer
from kraftlab.node.security.acl import CLUSTER_NAME, AclOperation, ResourceType
from kraftlab.node.security.authenticator import PLAIN, SaslAuthenticator
from kraftlab.node.security.authorizer import STANDARD_AUTHORIZER_CLASS, AllowAll, Authorizer, StandardAuthorizer
from kraftlab.node.security.client_login import SaslLogin
from kraftlab.node.security.scram import MECHANISMS, ScramCredential
from kraftlab.node.security.session import SaslSession, TlsSession
from kraftlab.node.security.tokens import TokenConfig, TokenConfigError, token_credential

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SUPPORTED_MECHANISMS = (PLAIN, *MECHANISMS)
_JAAS_OPTION = re.compile(r'([A-Za-z0-9_.-]+)\s*=\s*"((?:[^"\\]|\\.)*)"')


def jaas_options(text: str) -> dict[str, str]:
    """The `key="value"` options of a JAAS login-module line (Kafka's `sasl.jaas.config`)."""
    return {k: v.replace('\\"', '"') for k, v in _JAAS_OPTION.findall(text)}


class ImageCredentials:
    """SCRAM credentials and delegation tokens from a metadata image the node keeps current (a
    CredentialStore). A token logs in while it is in the image and neither its expiry nor its max
    time has passed on this node's wall clock; without `delegation.token.secret.key` none does."""

    def __init__(self, image: Callable[[], MetadataImage | None], tokens: TokenConfig | None = None,
                 wall_ms: Callable[[], int] = lambda: int(time.time() * 1000)) -> None:
        self._image = image
        self._tokens = tokens or TokenConfig()
        self._wall_ms = wall_ms

    def scram_credential(self, user: str, mechanism: str) -> ScramCredential | None:
        image = self._image()
        mech = MECHANISMS.get(mechanism)
        if image is None or mech is None:
            return None
        return image.scram.get((user, mech.code))

    def token_credential(self, token_id: str, mechanism: str) -> tuple[ScramCredential, str] | None:
        image = self._image()
        mech = MECHANISMS.get(mechanism)
        secret = self._tokens.secret_key
        token = image.delegation_tokens.get(token_id) if image is not None else None
        if token is None or mech is None or secret is None:
            return None
        now = self._wall_ms()
        if token.expiration_timestamp < now or token.max_timestamp < now:
            return None
        return token_credential(secret, token_id, mech), token.owner


@dataclass
class NodeSecurity:
    """Every listener's security, the authorizer and the node's client logins."""

    config: NodeConfig
    authorizer: Authorizer
    image: Callable[[], MetadataImage | None] = lambda: None
    controller_client: tuple[SaslLogin | None, ssl.SSLContext | None] = (None, None)
    """How this node connects to the controllers' listener (Raft peers, a broker's requests)."""
    tokens: TokenConfig = field(default_factory=TokenConfig)
    """Delegation tokens (`delegation.token.*`)."""
    wall_ms: Callable[[], int] = lambda: int(time.time() * 1000)
    """The node's wall clock (the process sets its skewable clock), for token expiry at login."""
    _ssl: dict[str, ssl.SSLContext] = field(default_factory=dict)

    @classmethod
    def from_config(cls, config: NodeConfig) -> NodeSecurity:
        raw = config.raw
        name = (raw.get("authorizer.class.name") or "").strip()
        authorizer: Authorizer
        if not name:
            authorizer = AllowAll()
        elif name in (STANDARD_AUTHORIZER_CLASS, "kafka.security.authorizer.AclAuthorizer"):
            supers = frozenset(p.strip() for p in (raw.get("super.users") or "").split(";") if p.strip())
            allow = (raw.get("allow.everyone.if.no.acl.found") or "false").strip().lower() == "true"
            authorizer = StandardAuthorizer(supers, allow)
        else:
            raise ConfigError(f"authorizer.class.name: {name} is not supported (only {STANDARD_AUTHORIZER_CLASS})")
        try:
            tokens = TokenConfig.from_properties(raw)
        except TokenConfigError as e:
            raise ConfigError(str(e)) from None
        security = cls(config, authorizer, tokens=tokens)
        for endpoint in config.listeners:
            security.mechanisms(endpoint.name)  # validates
            if security.protocol(endpoint.name) in ("SSL", "SASL_SSL"):
                security._ssl[endpoint.name] = security._server_ssl(endpoint.name)
        security.controller_client = security.controller_login()
        return security

    # ---- keys ----------------------------------------------------------------------------------

    def protocol(self, listener: str) -> str:
        return self.config.security_protocol_map.get(listener, "PLAINTEXT")

    def _key(self, listener: str, key: str) -> str | None:
        """A listener's own `listener.name.<name>.<key>`, else the node-wide `<key>`."""
        raw = self.config.raw
        value = raw.get(f"listener.name.{listener.lower()}.{key}")
        if value is None or not value.strip():
            value = raw.get(key)
        return value.strip() if value is not None and value.strip() else None

    def mechanisms(self, listener: str) -> tuple[str, ...]:
        if not self.protocol(listener).startswith("SASL_"):
            return ()
        text = self._key(listener, "sasl.enabled.mechanisms")
        if text is None:
            raise ConfigError(f"sasl.enabled.mechanisms: listener {listener} is SASL; name its mechanisms "
                              f"({', '.join(SUPPORTED_MECHANISMS)})")
        names = tuple(m.strip().upper() for m in text.split(",") if m.strip())
        for m in names:
            if m not in SUPPORTED_MECHANISMS:
                raise ConfigError(f"sasl.enabled.mechanisms: {m} is not supported ({', '.join(SUPPORTED_MECHANISMS)})")
        return names

    def jaas(self, listener: str, mechanism: str) -> dict[str, str]:
        text = self._key(listener, f"{mechanism.lower()}.sasl.jaas.config") or self._key(listener, "sasl.jaas.config")
        return jaas_options(text or "")

    # ---- server side ---------------------------------------------------------------------------

    def allows_on_cluster(self, principal: str, peer: str, describe: bool = False) -> bool:
        """CLUSTER_ACTION (or DESCRIBE) on the cluster, by the committed ACLs (super users always)."""
        if not self.authorizer.enabled:
            return True
        image = self.image()
        acls = image.acls.values() if image is not None else ()
        op = AclOperation.DESCRIBE if describe else AclOperation.CLUSTER_ACTION
        host = peer.rsplit(":", 1)[0]
        return self.authorizer.authorize(acls, principal, host, op, ResourceType.CLUSTER, CLUSTER_NAME).allowed

    def guard_factory(self, listener: str) -> GuardFactory | None:
        protocol = self.protocol(listener)
        if protocol == "PLAINTEXT":
            return None
        if protocol == "SSL":
            return TlsSession
        mechanisms = self.mechanisms(listener)
        plain_users: Mapping[str, str] = {}
        if PLAIN in mechanisms:
            plain_users = {k[5:]: v for k, v in self.jaas(listener, PLAIN).items() if k.startswith("user_")}
        credentials = ImageCredentials(lambda: self.image(), self.tokens, lambda: self.wall_ms())
        authenticator = SaslAuthenticator(mechanisms, credentials, plain_users)

        def factory(peer: Peer) -> ConnectionGuard:
            return SaslSession(authenticator, peer, listener)

        return factory

    def ssl_context(self, listener: str) -> ssl.SSLContext | None:
        return self._ssl.get(listener)

    def _server_ssl(self, listener: str) -> ssl.SSLContext:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self._load_keystore(ctx, listener, required=True)
        client_auth = (self._key(listener, "ssl.client.auth") or "none").lower()
        if client_auth not in ("required", "requested", "none"):
            raise ConfigError(f"ssl.client.auth: {client_auth!r} is not required, requested or none")
        if client_auth != "none":
            self._load_truststore(ctx, listener, required=True)
            ctx.verify_mode = ssl.CERT_REQUIRED if client_auth == "required" else ssl.CERT_OPTIONAL
        return ctx

    def _load_keystore(self, ctx: ssl.SSLContext, listener: str, required: bool) -> None:
        kind = (self._key(listener, "ssl.keystore.type") or "PEM").upper()
        if kind != "PEM":
            raise ConfigError(f"ssl.keystore.type: only PEM is supported, got {kind}")
        password = self._key(listener, "ssl.key.password") or self._key(listener, "ssl.keystore.password")
        location = self._key(listener, "ssl.keystore.location")
        chain = self._key(listener, "ssl.keystore.certificate.chain")
        key = self._key(listener, "ssl.keystore.key")
        try:
            if location:
                ctx.load_cert_chain(location, password=password)
            elif chain and key:
                _load_inline_chain(ctx, chain, key, password)
            elif required:
                raise ConfigError(f"ssl.keystore.location: listener {listener} needs a PEM keystore "
                                  "(or ssl.keystore.certificate.chain and ssl.keystore.key)")
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(f"ssl.keystore: listener {listener}: cannot load the key and chain: {exc}") from None

    def _load_truststore(self, ctx: ssl.SSLContext, listener: str, required: bool) -> None:
        location = self._key(listener, "ssl.truststore.location")
        inline = self._key(listener, "ssl.truststore.certificates")
        try:
            if location:
                ctx.load_verify_locations(cafile=location)
            elif inline:
                ctx.load_verify_locations(cadata=inline)
            elif required:
                raise ConfigError(f"ssl.truststore.location: listener {listener} needs a PEM truststore")
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(f"ssl.truststore: listener {listener}: cannot load the certificates: {exc}") from None

    # ---- client side ---------------------------------------------------------------------------

    def login_for(self, listener: str, mechanism_key: str) -> SaslLogin | None:
        """The SASL login this node uses on `listener` (None unless it is SASL)."""
        if not self.protocol(listener).startswith("SASL_"):
            return None
        mechanism = (self.config.raw.get(mechanism_key) or "").strip().upper()
        if mechanism not in SUPPORTED_MECHANISMS:
            raise ConfigError(f"{mechanism_key}: listener {listener} is SASL; set it to one of "
                              f"{', '.join(SUPPORTED_MECHANISMS)}")
        options = self.jaas(listener, mechanism)
        if "username" not in options or "password" not in options:
            raise ConfigError(f"listener.name.{listener.lower()}.{mechanism.lower()}.sasl.jaas.config: "
                              "needs username=\"…\" and password=\"…\" for this node's own login")
        return SaslLogin(mechanism, options["username"], options["password"])

    def client_ssl(self, listener: str) -> ssl.SSLContext | None:
        if self.protocol(listener) not in ("SSL", "SASL_SSL"):
            return None
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.check_hostname = False  # listeners are addressed by IP in labs; the chain is still verified
        self._load_truststore(ctx, listener, required=True)
        self._load_keystore(ctx, listener, required=False)
        return ctx

    def controller_login(self) -> tuple[SaslLogin | None, ssl.SSLContext | None]:
        name = self.config.controller_listener_names[0]
        return self.login_for(name, "sasl.mechanism.controller.protocol"), self.client_ssl(name)


def _load_inline_chain(ctx: ssl.SSLContext, chain: str, key: str, password: str | None) -> None:
    """`load_cert_chain` reads files only: the inline PEM goes through a private temporary file."""
    fd, path = tempfile.mkstemp(prefix="kraft-node-keystore-", suffix=".pem")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(key.strip() + "\n" + chain.strip() + "\n")
        ctx.load_cert_chain(path, password=password)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(path)
