"""The logs an end-to-end test prints when it fails: each node's state and log tail, an unreadable
host named with its error, and the test's own failure raised unchanged."""

from __future__ import annotations

from typing import cast

import pytest
from node_logs import logs_on_failure, node_logs

from kraftlab.deploy import Deployment


class _Paths:
    def __init__(self, node: str) -> None:
        self.log = f"/w/{node}/kraft-node.log"


class _Deployment:
    """Two nodes: n1 exited with a traceback in its log, n2's host cannot be reached."""

    def nodes(self) -> list[str]:
        return ["n1", "n2"]

    def running(self, node: str) -> bool:
        if node == "n2":
            raise OSError("n2: no route to host")
        return False

    def paths(self, node: str) -> _Paths:
        return _Paths(node)

    def log_tail(self, node: str, lines: int = 20) -> str:
        return "Traceback (most recent call last):\nOSError: [Errno 5] Input/output error"


def test_node_logs_name_each_node_and_survive_an_unreadable_host() -> None:
    text = node_logs(cast(Deployment, _Deployment()))
    assert "--- n1 (not running), last 60 lines of /w/n1/kraft-node.log:" in text
    assert "OSError: [Errno 5] Input/output error" in text
    assert "--- n2: its log could not be read: n2: no route to host" in text


def test_a_failure_prints_the_logs_and_is_raised_unchanged(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(AssertionError, match="n3 stopped"), logs_on_failure(cast(Deployment, _Deployment())):
        raise AssertionError("n3 stopped")
    err = capsys.readouterr().err
    assert err.startswith("node logs at the failure:\n--- n1 (not running)")


def test_a_passing_body_prints_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    with logs_on_failure(cast(Deployment, _Deployment())):
        pass
    assert capsys.readouterr().err == ""
