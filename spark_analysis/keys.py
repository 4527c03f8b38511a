"""Partition keys as strings: a reversible JSON encoding (Parquet columns and Spark group keys
must be plain values) and a stable bucket number per key (which Parquet file a key lives in).

Model keys are hashable, so they never contain lists: tuples are encoded as JSON arrays and
decoded back into tuples. The key None (a history that cannot be split) is encoded as null.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Hashable
from typing import Any


def _plain(k: Any) -> Any:
    if isinstance(k, tuple | frozenset):
        return [_plain(x) for x in (sorted(k, key=repr) if isinstance(k, frozenset) else k)]
    return k


def _tuples(v: Any) -> Any:
    return tuple(_tuples(x) for x in v) if isinstance(v, list) else v


_encode = json.JSONEncoder(sort_keys=True, default=str).encode


def encode_key(key: Hashable | None) -> str | None:
    return None if key is None else _encode(_plain(key))


def decode_key(text: str | None) -> Hashable | None:
    return None if text is None else _tuples(json.loads(text))


def bucket_of(encoded: str | None, buckets: int) -> int:
    """Stable across processes and machines (unlike hash())."""
    return 0 if encoded is None else zlib.crc32(encoded.encode()) % buckets
