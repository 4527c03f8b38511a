"""A node's own SASL login to another node's listener (SaslHandshake v1 + SaslAuthenticate), run on
every new connection of a `ProtocolClient` before its first request."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest

from kraftlab.node.security.authenticator import PLAIN
from kraftlab.node.security.scram import MECHANISMS, AuthenticationFailed, ScramClient
from kraftlab.node.security.tokens import TOKEN_AUTH_EXTENSION

Exchange = Callable[[Any], Awaitable[Any]]


@dataclass(frozen=True)
class SaslLogin:
    mechanism: str
    username: str
    password: str
    token: bool = False
    """Log in with a delegation token (username = token id, password = its base64 HMAC): SCRAM's
    `tokenauth=true` extension."""

    async def __call__(self, exchange: Exchange) -> None:
        handshake = await exchange(SaslHandshakeRequest(mechanism=self.mechanism))
        if handshake.error_code != ErrorCode.none:
            code = ErrorCode(handshake.error_code).name.upper()
            raise AuthenticationFailed(f"SaslHandshake {self.mechanism}: {code} "
                                       f"(enabled: {', '.join(handshake.mechanisms)})")
        if self.mechanism == PLAIN:
            await self._step(exchange, f"\x00{self.username}\x00{self.password}".encode())
            return
        extensions = {TOKEN_AUTH_EXTENSION: "true"} if self.token else None
        client = ScramClient(MECHANISMS[self.mechanism], self.username, self.password, extensions)
        server_first = await self._step(exchange, client.first())
        client.verify(await self._step(exchange, client.final(server_first)))

    async def _step(self, exchange: Exchange, token: bytes) -> bytes:
        response = await exchange(SaslAuthenticateRequest(auth_bytes=token))
        if response.error_code != ErrorCode.none:
            raise AuthenticationFailed(f"{self.mechanism} login as {self.username!r}: "
                                       f"{ErrorCode(response.error_code).name.upper()}: {response.error_message}")
        return bytes(response.auth_bytes)
