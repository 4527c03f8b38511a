"""SSH backend errors that need no sshd: each a HostError naming the host."""

from __future__ import annotations

from pathlib import Path

import paramiko
import pytest

from kraftlab.control.host import HostError
from kraftlab.control.nodesfile import NodeEntry
from kraftlab.control.ssh import SshHost


def test_no_sftp_channel_is_a_host_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    host = SshHost(NodeEntry("n1", "127.0.0.1", 22, "root", str(tmp_path / "key"), {}))
    monkeypatch.setattr(host, "transport", lambda: object())
    monkeypatch.setattr(paramiko.SFTPClient, "from_transport", classmethod(lambda cls, t: None))
    (tmp_path / "f").write_text("x")
    with pytest.raises(HostError, match="n1: the SSH server opened no SFTP channel"):
        host.put(str(tmp_path / "f"), "/tmp/f")
