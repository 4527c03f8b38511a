"""End to end on loopback: three `kraft-node start` processes elect, commit, survive SIGKILL of the
leader and restarts of every node without losing an acknowledged record."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

import pytest

from kraftlab.node.journal import read_journal
from kraftlab.testing.kraftnode import KRAFT_NODE, ProcessCluster, read_log_values

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]


def is_subsequence(small: list[bytes], big: list[bytes | None]) -> bool:
    it = iter(big)
    return all(any(x == y for y in it) for x in small)


def test_three_voters_failover_and_restarts_lose_nothing(tmp_path: Path) -> None:
    c = ProcessCluster(tmp_path)
    acked: list[bytes] = []

    def append(tag: str) -> None:
        value = tag.encode()
        c.append_committed([value])
        acked.append(value)

    try:
        c.start_all()
        leader, epoch = c.wait_leader()
        for k in range(10):
            append(f"a{k}")

        out = subprocess.run(
            [KRAFT_NODE, "describe-quorum", "--bootstrap-controller", f"127.0.0.1:{c.ports[leader]}"],
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert out.returncode == 0, out.stderr
        q = json.loads(out.stdout)
        assert q["leader"] == leader and q["epoch"] == epoch
        assert sorted(v["id"] for v in q["voters"]) == c.ids
        assert q["high_watermark"] >= 11  # LeaderChangeMessage + 10 records

        c.kill(leader, signal.SIGKILL)
        _, new_epoch = c.wait_leader(exclude=leader)
        assert new_epoch > epoch
        for k in range(5):
            append(f"b{k}")

        c.start(leader)  # the old leader comes back as a follower
        for k in range(5):
            append(f"c{k}")

        c.close()  # SIGKILL every node, then restart them all
        c.start_all()
        c.wait_leader()
        append("d0")

        for i in c.ids:
            assert c.kill(i, signal.SIGTERM) == 0, (tmp_path / f"n{i}.log").read_text()[-2000:]
    finally:
        c.close()

    logs = {i: read_log_values(c.meta_dir(i)) for i in c.ids}
    longest = max(logs.values(), key=len)
    for i, values in logs.items():
        assert values == longest[: len(values)], f"node {i} diverges"
    holding = [i for i, values in logs.items() if is_subsequence(acked, values)]
    assert len(holding) >= 2, f"acknowledged records missing on a majority: {holding}"

    for i in c.ids:
        journal = read_journal(c.journal(i))
        starts = [e for e in journal if e["ev"] == "start"]
        assert len(starts) >= 2 and all(e["node"] == i for e in journal)
        assert any(e["ev"] == "role" and e["role"] == "follower" for e in journal)
    old = read_journal(c.journal(leader))
    assert any(e["ev"] == "role" and e["role"] == "leader" and e["epoch"] == epoch for e in old)
