"""`kraftlab serve`: an index of runs with verdicts, reports and files served, nothing outside."""

from __future__ import annotations

import threading
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from kraftlab.serve import make_server
from kraftlab.store import new_run, write_json


def test_index_lists_runs_with_verdicts_and_serves_files(tmp_path: Path) -> None:
    store = tmp_path / "store"
    good = new_run("topics-partition", {"workload": "topics", "nemesis": "partition"}, store=store)
    write_json(good.results, {"valid": True})
    good.report.write_text("<html>the report</html>")
    bad = new_run("isr-kill", {"workload": "isr"}, store=store)
    write_json(bad.results, {"valid": False})
    (tmp_path / "secret.txt").write_text("outside the store")
    server = make_server(store, port=0)
    t = threading.Thread(target=server.serve_forever, daemon=True)
    t.start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        index = urllib.request.urlopen(base + "/").read().decode()
        assert "topics-partition" in index and "isr-kill" in index
        assert "<b>valid</b>" in index and "<b>INVALID</b>" in index
        rel = good.path.relative_to(store).as_posix()
        assert f"/{rel}/report.html" in index
        assert urllib.request.urlopen(f"{base}/{rel}/report.html").read() == b"<html>the report</html>"
        with pytest.raises(urllib.error.HTTPError):
            urllib.request.urlopen(base + "/../secret.txt")
    finally:
        server.shutdown()
        server.server_close()
