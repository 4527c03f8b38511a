"""The in-memory Kafka fake's SCRAM credentials (workloads.fake_kafka): AlterUserScramCredentials
v0 over a credential store, and SaslHandshake v1 + SaslAuthenticate v2 (SCRAM-SHA-256/512, the
node's SCRAM server) per connection, as a broker's SASL_PLAINTEXT listener answers them.

Correct by default; the planted bug `login-after-delete` keeps every deleted credential for logins.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass, field
from typing import Any

from kio.schema.alter_user_scram_credentials.v0 import request as alter_req
from kio.schema.alter_user_scram_credentials.v0 import response as alter_resp
from kio.schema.errors import ErrorCode
from kio.schema.sasl_authenticate.v2 import request as auth_req
from kio.schema.sasl_authenticate.v2 import response as auth_resp
from kio.schema.sasl_handshake.v1 import request as hs_req
from kio.schema.sasl_handshake.v1 import response as hs_resp
from kio.static.primitive import i32Timedelta, i64Timedelta

from kraftlab.node.security.scram import (
    BY_CODE,
    MECHANISMS,
    AuthenticationFailed,
    ClientFirst,
    ScramCredential,
    ScramServer,
    credential_from_salted,
)

ZERO = i32Timedelta.parse(datetime.timedelta(0))
NO_LIFETIME = i64Timedelta.parse(datetime.timedelta(0))
WRITES = (alter_req.AlterUserScramCredentialsRequest,)
SASL = (hs_req.SaslHandshakeRequest, auth_req.SaslAuthenticateRequest)
SERVED = {51: 0}
BUGS = frozenset({"login-after-delete"})


@dataclass
class FakeScram:
    bugs: frozenset[str] = frozenset()
    credentials: dict[tuple[str, str], ScramCredential] = field(default_factory=dict)
    deleted: dict[tuple[str, str], ScramCredential] = field(default_factory=dict)
    _exchanges: dict[int, ScramServer | str] = field(default_factory=dict)  # connection → its SASL state

    def alter(self, req: Any) -> Any:
        results = []
        for d in req.deletions:
            key = (d.name, BY_CODE[int(d.mechanism)].name)
            if key in self.credentials:
                self.deleted[key] = self.credentials.pop(key)
                results.append(self._result(d.name, ErrorCode.none))
            else:
                results.append(self._result(d.name, ErrorCode.resource_not_found))
        for u in req.upsertions:
            mech = BY_CODE[int(u.mechanism)]
            self.credentials[(u.name, mech.name)] = credential_from_salted(mech, u.salt, u.salted_password,
                                                                           int(u.iterations))
            self.deleted.pop((u.name, mech.name), None)
            results.append(self._result(u.name, ErrorCode.none))
        return alter_resp.AlterUserScramCredentialsResponse(throttle_time=ZERO, results=tuple(results))

    @staticmethod
    def _result(user: str, code: ErrorCode) -> Any:
        return alter_resp.AlterUserScramCredentialsResult(user=user, error_code=code, error_message=None)

    def _lookup(self, mechanism: str, first: ClientFirst) -> ScramCredential | None:
        found = self.credentials.get((first.user, mechanism))
        if found is None and "login-after-delete" in self.bugs:
            found = self.deleted.get((first.user, mechanism))
        return found

    def sasl(self, req: Any, conn: Any) -> Any:
        if isinstance(req, hs_req.SaslHandshakeRequest):
            ok = req.mechanism in MECHANISMS
            if ok:
                self._exchanges[id(conn)] = req.mechanism
            code = ErrorCode.none if ok else ErrorCode.unsupported_sasl_mechanism
            return hs_resp.SaslHandshakeResponse(error_code=code, mechanisms=tuple(sorted(MECHANISMS)))
        state = self._exchanges.get(id(conn))
        if isinstance(state, str):
            state = self._exchanges[id(conn)] = ScramServer(MECHANISMS[state], self._lookup)
        if state is None:
            return self._auth(ErrorCode.illegal_sasl_state, "no SaslHandshake on this connection")
        try:
            token = state.step(bytes(req.auth_bytes))
        except AuthenticationFailed as e:
            self._exchanges.pop(id(conn), None)
            return self._auth(ErrorCode.sasl_authentication_failed, str(e))
        return self._auth(ErrorCode.none, None, token)

    @staticmethod
    def _auth(code: ErrorCode, message: str | None, token: bytes = b"") -> Any:
        return auth_resp.SaslAuthenticateResponse(error_code=code, error_message=message, auth_bytes=token,
                                                  session_lifetime=NO_LIFETIME)


def error_response(req: Any, code: ErrorCode) -> Any:
    """`req` refused as a whole with `code` (NOT_CONTROLLER from a controller that does not lead)."""
    users = [d.name for d in req.deletions] + [u.name for u in req.upsertions]
    return alter_resp.AlterUserScramCredentialsResponse(throttle_time=ZERO, results=tuple(
        FakeScram._result(u, code) for u in users))
