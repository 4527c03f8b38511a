"""The control socket appears only once it accepts connections, so waiting for its file is enough."""

from __future__ import annotations

import os
import socket
import threading
from pathlib import Path
from typing import Any

import pytest

from kraftlab.nemesis.diskfs.control import request, serve

trio = pytest.importorskip("trio")


class _Fs:
    """A Controlled that holds nothing: the test asks only for `status`."""

    faults: Any = None

    def crash(self) -> Any:
        return {}

    def status(self) -> dict[str, Any]:
        return {"pending": 0}

    def fail(self, rule: Any) -> None:
        pass


def _serve_in_thread(path: str) -> tuple[threading.Thread, list[Any]]:
    holder: list[Any] = []

    async def main() -> None:
        with trio.CancelScope() as scope:
            holder.append((trio.lowlevel.current_trio_token(), scope))
            await serve(_Fs(), path, scope.cancel)

    t = threading.Thread(target=trio.run, args=(main,), daemon=True)
    t.start()
    return t, holder


def test_the_socket_file_appears_only_when_it_accepts(tmp_path: Path) -> None:
    for i in range(20):
        path = str(tmp_path / f"c{i}.sock")
        thread, holder = _serve_in_thread(path)
        while not os.path.exists(path):
            assert thread.is_alive(), "the server stopped before its socket appeared"
        # The first connect after the file appears must be accepted (not ECONNREFUSED).
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.connect(path)
        assert request(path, {"cmd": "status"}) == {"ok": True, "pending": 0}
        token, scope = holder[0]
        token.run_sync_soon(scope.cancel)
        thread.join(10)
        assert not thread.is_alive()
    # No staging name is left behind beside the sockets.
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(f"c{i}.sock" for i in range(20))
