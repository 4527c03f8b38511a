"""The mutation benchmark's line map measured in shards: balanced by time, merged without loss."""

from __future__ import annotations

import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import bench_mutants  # noqa: E402 — bench/ is not a package


def test_shards_balance_the_files_by_their_tests_time() -> None:
    files = ["a.py", "b.py", "c.py", "d.py", "new.py"]
    durations = {"a.py::t1": 50.0, "a.py::t2": 10.0, "b.py::t": 40.0, "c.py::t": 20.0, "d.py::t": 15.0,
                 "gone.py::t": 99.0}
    groups = bench_mutants.shard_tests(files, durations, 2)
    assert sorted(f for g in groups for f in g) == files  # each file once, none lost
    weights = [sum(s for n, s in durations.items() if n.split("::")[0] in g) + g.count("new.py") for g in groups]
    # Longest first, each to the lighter shard: a (60) | b (40) + c (20); d (15) to the first of the
    # tie, the untimed file (1 s) to the other.
    assert sorted(weights) == [61.0, 75.0]
    assert max(weights) - min(weights) <= 60.0  # never worse than the heaviest file
    assert bench_mutants.shard_tests(files, {}, 1) == [files]
    assert len(bench_mutants.shard_tests(["a.py"], {}, 4)) == 1  # no empty shards


def test_merged_maps_keep_every_test_and_the_union_of_each_lines_tests() -> None:
    one = {"tests": {"a.py::t": 1.0}, "lines": {"node/x.py": {"3": ["<import>"], "7": ["a.py::t"]}}}
    two = {"tests": {"b.py::t": 2.0}, "lines": {"node/x.py": {"3": ["<import>"], "7": ["b.py::t"], "10": ["b.py::t"]},
                                                 "node/y.py": {"1": ["b.py::t"]}}}
    merged = bench_mutants.merge_line_maps([one, two])
    assert merged["tests"] == {"a.py::t": 1.0, "b.py::t": 2.0}
    assert merged["lines"] == {"node/x.py": {"3": ["<import>"], "7": ["a.py::t", "b.py::t"], "10": ["b.py::t"]},
                               "node/y.py": {"1": ["b.py::t"]}}
    assert list(merged["lines"]["node/x.py"]) == ["3", "7", "10"]  # lines in number order
