"""SCRAM credentials on the active controller: AlterUserScramCredentials (Kafka's ScramControlManager).

Per user, as Kafka's ScramControlManager.alterCredentials: the user's first change (deletions
before upsertions) is judged — a user name must not be empty (UNACCEPTABLE_CREDENTIAL), the
mechanism must be
SCRAM-SHA-256 or -512 (UNSUPPORTED_SASL_MECHANISM), an upsertion needs a salt, a salted password
and 4096..16384 iterations (UNACCEPTABLE_CREDENTIAL), and a deletion must name a stored
credential (RESOURCE_NOT_FOUND) — and if it is acceptable, any other change of the same user in the
request, whatever its mechanism, makes the user's answer DUPLICATE_RESOURCE and nothing of it is
applied (a user is altered at most once per request). An upsertion is stored as Kafka stores it — salt, StoredKey,
ServerKey, iterations (a UserScramCredentialRecord); a deletion is a
RemoveUserScramCredentialRecord. The request's records are one batch.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kraftlab.node.controller.messages import error_name
from kraftlab.node.controller.write import Outcome, Write
from kraftlab.node.metadata.records import RemoveUserScramCredentialRecord, UserScramCredentialRecord
from kraftlab.node.security.scram import BY_CODE, MAX_ITERATIONS, MIN_ITERATIONS, credential_from_salted


class _Refused(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


def _check_upsertion(u: Any) -> None:
    mech = BY_CODE.get(int(u.mechanism))
    if mech is None:
        raise _Refused(ErrorCode.unsupported_sasl_mechanism, f"unknown SCRAM mechanism {u.mechanism}")
    if u.iterations < MIN_ITERATIONS:
        raise _Refused(ErrorCode.unacceptable_credential, f"Too few iterations: at least {MIN_ITERATIONS}")
    if u.iterations > MAX_ITERATIONS:
        raise _Refused(ErrorCode.unacceptable_credential, f"Too many iterations: at most {MAX_ITERATIONS}")
    if not u.salt or not u.salted_password:
        raise _Refused(ErrorCode.unacceptable_credential, "a credential needs a salt and a salted password")


def alter_user_scram_credentials(w: Write, req: Any) -> Outcome:
    users: dict[str, list[tuple[str, Any]]] = {}
    for d in req.deletions:
        users.setdefault(d.name, []).append(("delete", d))
    for u in req.upsertions:
        users.setdefault(u.name, []).append(("upsert", u))
    results, decisions = [], []
    for user, changes in users.items():
        code, message = ErrorCode.none, None
        try:
            if not user:
                raise _Refused(ErrorCode.unacceptable_credential, "Username must not be empty")
            kind, c = changes[0]  # the user's first change is judged; any other is a second alteration
            if kind == "upsert":
                _check_upsertion(c)
            elif int(c.mechanism) not in BY_CODE:
                raise _Refused(ErrorCode.unsupported_sasl_mechanism, f"unknown SCRAM mechanism {c.mechanism}")
            elif (user, int(c.mechanism)) not in w.image.scram:
                raise _Refused(ErrorCode.resource_not_found,
                               "Attempt to delete a user credential that does not exist")
            if len(changes) > 1:
                raise _Refused(ErrorCode.duplicate_resource,
                               "A user credential cannot be altered twice in the same request")
        except _Refused as exc:
            code, message = exc.code, str(exc)
        else:
            for kind, c in changes:
                mech = int(c.mechanism)
                if kind == "delete":
                    w.emit(RemoveUserScramCredentialRecord(name=user, mechanism=mech))
                    continue
                cred = credential_from_salted(BY_CODE[mech], bytes(c.salt), bytes(c.salted_password), c.iterations)
                w.emit(UserScramCredentialRecord(
                    name=user, mechanism=mech, salt=cred.salt, stored_key=cred.stored_key,
                    server_key=cred.server_key, iterations=cred.iterations,
                ))
        results.append({"user": user, "error_code": code, "error_message": message})
        decisions.append({"api": "AlterUserScramCredentials", "user": user, "error": error_name(code)})
    return Outcome({"results": results}, decisions)
