"""The durability bench (bench/bench_durability_mutants.py) names its bugs by mutant id: each id must
still name a mutant of today's storage code, and that mutant must be the bug it is described as (a
dropped fsync), so a run of the bench never judges a different change than the one it reports."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"


@pytest.fixture(scope="module")
def bench():  # type: ignore[no-untyped-def]
    sys.path.insert(0, str(BENCH))
    try:
        import bench_durability_mutants

        yield bench_durability_mutants
    finally:
        sys.path.remove(str(BENCH))


def test_each_named_bug_is_a_dropped_fsync_of_todays_storage_code(bench) -> None:  # type: ignore[no-untyped-def]
    for name, (mutant_id, what) in bench.BUGS.items():
        m = bench.find(mutant_id)
        assert m.kind == "drop-call" and "fsync" in m.detail, (name, m.detail)
        assert what and m.file.startswith("node/storage/")


def test_bad_arguments_are_refused(bench, capsys: pytest.CaptureFixture[str]) -> None:  # type: ignore[no-untyped-def]
    assert bench.main(["--bugs", "no-such-bug"]) == 254
    assert bench.main(["--seeds", "x"]) == 254
    assert "bugs are" in capsys.readouterr().err
