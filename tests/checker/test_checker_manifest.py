"""Agreement with the upstream verdicts on every file of the external history manifest."""

from __future__ import annotations

import pytest

from kraftlab.checker.formats import read_history
from kraftlab.checker.history import pair_ops
from kraftlab.checker.linear.budget import Budget
from kraftlab.checker.linear.race import race
from kraftlab.checker.reference import DEFAULT_DIR, load_manifest

pytestmark = pytest.mark.skipif(not (DEFAULT_DIR / "manifest.json").exists(), reason="no external histories here")

REFS = load_manifest() if (DEFAULT_DIR / "manifest.json").exists() else []


def test_manifest_is_complete() -> None:
    assert len(REFS) >= 180
    assert all(r.path.is_file() for r in REFS)


@pytest.mark.parametrize("ref", REFS, ids=[str(r.path.relative_to(DEFAULT_DIR)) for r in REFS])
def test_agrees_with_upstream_verdict(ref) -> None:  # type: ignore[no-untyped-def]
    ops = pair_ops(read_history(ref.path, ref.reader_format))
    result = race(ops, ref.build(partitioned=True), Budget(seconds=60), workers=1)
    assert result.valid is ref.expected, f"{ref.path}: got {result.valid} ({result.reason}), want {ref.expected}"


SMALL_KV = [r for r in REFS if r.model == "kv" and r.n_ops < 1000]


@pytest.mark.parametrize("ref", SMALL_KV, ids=[r.path.name for r in SMALL_KV])
def test_kv_without_partitioning_agrees(ref) -> None:  # type: ignore[no-untyped-def]
    ops = pair_ops(read_history(ref.path, ref.reader_format))
    result = race(ops, ref.build(partitioned=False), Budget(seconds=60))
    assert result.partitions == 1
    assert result.valid is ref.expected
