"""The end-to-end zoo's rotating CI subset: today's shard of the planted bugs (one bug a day by
default, every bug within `len(PLANS)` days), run as `kraftlab zoo --shard K/N` on fresh
five-namespace labs; each bug must be found within its budget and the labs must be gone.

`KRAFTLAB_ZOO_SHARD=K/N` picks another shard (e.g. `2/16`); the nightly job runs the full zoo.
"""

from __future__ import annotations

import datetime
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from kraftlab.control.leftovers import find
from kraftlab.control.netns import lab_prefix
from kraftlab.zoo import PLANS, select


def todays_shard(today: datetime.date, n: int) -> tuple[int, int]:
    return today.toordinal() % n, n


def shard() -> tuple[int, int]:
    text = os.environ.get("KRAFTLAB_ZOO_SHARD")
    if text:
        k, n = (int(x) for x in text.split("/"))
        return k, n
    return todays_shard(datetime.date.today(), len(PLANS))


def test_every_bug_has_its_day() -> None:
    n = len(PLANS)
    days = [datetime.date(2026, 1, 1) + datetime.timedelta(days=d) for d in range(n)]
    assert sorted(b for d in days for b in select([], todays_shard(d, n))) == sorted(PLANS)


@pytest.mark.slow
@pytest.mark.e2e
@pytest.mark.netns
@pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root")
def test_todays_shard_is_found_end_to_end(tmp_path: Path) -> None:
    k, n = shard()
    env = {**os.environ, "KRAFTLAB_STATE_DIR": str(tmp_path / "labs"), "KRAFTLAB_STORE": str(tmp_path / "store")}
    proc = subprocess.run([sys.executable, "-m", "kraftlab.cli", "zoo", "--shard", f"{k}/{n}", "--no-control",
                           "--attempt-time", "30", "--budget", "150", "--store", str(tmp_path / "store")],
                          env=env, capture_output=True, text=True, timeout=900)
    labs = [json.loads(t.read_text()).get("lab") for t in (tmp_path / "store").glob("zoo-*/*/test.json")]
    left = [lab for lab in labs if lab and find(re.escape(lab_prefix(lab)))]
    for lab in left:
        subprocess.run([sys.executable, "-m", "kraftlab.cli", "clean", "--lab", lab], env=env, capture_output=True,
                       timeout=300)
    assert labs and not left, f"labs left behind: {left}"
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    for bug in select([], (k, n)):
        assert any(line.startswith(bug) and " yes " in line for line in proc.stdout.splitlines()), proc.stdout
