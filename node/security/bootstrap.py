"""SCRAM credentials bootstrapped at format time (KIP-900): `kraft-node format --add-scram
'SCRAM-SHA-256=[name=alice,password=alice-secret]'` (optionally `iterations=8192`) writes them as
UserScramCredentialRecords into `<metadata.log.dir>/bootstrap.checkpoint` (the snapshot file format);
the first controller to become active on an empty metadata log writes them with the bootstrap
metadata.version, so a secured cluster can be logged in to before anyone could create a user.
"""

from __future__ import annotations

import re
from pathlib import Path

from kraftlab.node.metadata.records import (
    MetadataRecord,
    RecordFormatError,
    UserScramCredentialRecord,
    decode,
    to_log_record,
)
from kraftlab.node.raft.ports import OffsetAndEpoch
from kraftlab.node.security.scram import MAX_ITERATIONS, MECHANISMS, MIN_ITERATIONS, make_credential
from kraftlab.node.storage.atomic import write_atomically
from kraftlab.node.storage.errors import StorageError
from kraftlab.node.storage.snapshots import decode_snapshot, encode_snapshot

BOOTSTRAP_FILE = "bootstrap.checkpoint"
_ADD_SCRAM = re.compile(r"^\s*(?P<mech>[A-Z0-9-]+)\s*=\s*\[(?P<body>.*)\]\s*$")


class BootstrapError(ValueError):
    """A bad --add-scram argument or an unreadable bootstrap file; the message says which."""


def parse_add_scram(text: str) -> UserScramCredentialRecord:
    match = _ADD_SCRAM.match(text)
    if match is None:
        raise BootstrapError(f"--add-scram {text!r}: expected MECHANISM=[name=USER,password=PASSWORD]")
    mech = MECHANISMS.get(match["mech"])
    if mech is None:
        raise BootstrapError(f"--add-scram {text!r}: unknown mechanism {match['mech']} "
                             f"(one of {', '.join(MECHANISMS)})")
    fields: dict[str, str] = {}
    for part in match["body"].split(","):
        key, sep, value = part.partition("=")
        if not sep:
            raise BootstrapError(f"--add-scram {text!r}: {part!r} is not key=value")
        fields[key.strip().lower()] = value.strip().strip('"')
    unknown = set(fields) - {"name", "password", "iterations"}
    if unknown or "name" not in fields or "password" not in fields or not fields["name"]:
        raise BootstrapError(f"--add-scram {text!r}: needs name= and password= (and optionally iterations=)")
    try:
        iterations = int(fields.get("iterations", str(MIN_ITERATIONS)))
    except ValueError:
        raise BootstrapError(f"--add-scram {text!r}: iterations must be an integer") from None
    if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
        raise BootstrapError(f"--add-scram {text!r}: iterations must be {MIN_ITERATIONS}..{MAX_ITERATIONS}")
    cred = make_credential(mech, fields["password"], iterations)
    return UserScramCredentialRecord(name=fields["name"], mechanism=mech.code, salt=cred.salt,
                                     stored_key=cred.stored_key, server_key=cred.server_key, iterations=iterations)


def write_bootstrap(metadata_dir: Path, records: list[MetadataRecord], now_ms: int) -> Path:
    path = Path(metadata_dir) / BOOTSTRAP_FILE
    data = encode_snapshot(OffsetAndEpoch(0, 0), [to_log_record(r) for r in records], now_ms)
    write_atomically(path, data)
    return path


def read_bootstrap(metadata_dir: Path) -> list[MetadataRecord]:
    """The bootstrap records, or none without a bootstrap file; BootstrapError if it cannot be read."""
    path = Path(metadata_dir) / BOOTSTRAP_FILE
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise BootstrapError(f"cannot read {path}: {exc}") from None
    try:
        return [decode(r.value) for r in decode_snapshot(data, str(path)) if r.value is not None]
    except (StorageError, RecordFormatError) as exc:
        raise BootstrapError(f"{path}: {exc}") from None
