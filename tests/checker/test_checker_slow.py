"""Slow checks of the big external histories (nightly): kv c50 without partitioning ends within
its budget (a verdict or unknown, never a wrong verdict) and stays under its memory budget."""

from __future__ import annotations

import resource

import pytest

from kraftlab.checker.formats import read_history
from kraftlab.checker.history import pair_ops
from kraftlab.checker.linear.budget import Budget, rss_bytes
from kraftlab.checker.linear.race import race
from kraftlab.checker.reference import DEFAULT_DIR, load_manifest

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not (DEFAULT_DIR / "manifest.json").exists(), reason="no external histories")]

BIG = [r for r in load_manifest() if r.model == "kv" and r.n_ops >= 1000] if (
    DEFAULT_DIR / "manifest.json").exists() else []


@pytest.mark.parametrize("ref", BIG, ids=[r.path.name for r in BIG])
def test_big_kv_without_partitioning_ends_within_budget(ref) -> None:  # type: ignore[no-untyped-def]
    ops = pair_ops(read_history(ref.path, ref.reader_format))
    limit = 1_900_000_000 - rss_bytes()  # the budget counts what the search adds
    res = race(ops, ref.build(partitioned=False), Budget(seconds=30, max_rss_bytes=limit), workers=1)
    assert res.valid in (ref.expected, "unknown"), res.reason
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 < 2_000_000_000
