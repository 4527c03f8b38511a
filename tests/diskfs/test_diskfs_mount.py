"""The filesystem mounted for real: POSIX durability at a crash, injected errors and delays, and the
clean-up of a mount whose process was killed."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kraftlab.control.mounts import diskfs_mounts, unmount
from kraftlab.nemesis.diskfs.durability import STASH
from kraftlab.node.storage.atomic import fsync_dir, write_atomically
from kraftlab.testing.diskfs_mounts import mounted

from . import needs_fuse

pytestmark = needs_fuse


def _append(path: Path, data: bytes, *, sync: bool) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, data)
        if sync:
            os.fdatasync(fd)
    finally:
        os.close(fd)


def test_a_crash_drops_what_was_never_fsynced(tmp_path: Path) -> None:
    with mounted(tmp_path) as m:
        d = m.mountpoint / "__cluster_metadata-0"
        d.mkdir()
        fsync_dir(m.mountpoint)
        seg = d / "00000000000000000000.log"
        _append(seg, b"committed|", sync=True)
        fsync_dir(d)
        _append(seg, b"unflushed", sync=False)
        (d / "00000000000000000010.log").write_bytes(b"named by the dir fsync below, data never synced")
        write_atomically(d / "quorum-state", b'{"leaderEpoch": 3}')  # tmp, fsync, rename, fsync dir
        (d / "00000000000000000019.log").write_bytes(b"rolled, never synced")
        assert seg.read_bytes() == b"committed|unflushed"
        status = m.ctl(cmd="status")
        assert status["files_not_durable"] >= 1
        report = m.ctl(cmd="crash")
        assert seg.read_bytes() == b"committed|"
        assert sorted(os.listdir(d)) == ["00000000000000000000.log", "00000000000000000010.log", "quorum-state"]
        assert (d / "00000000000000000010.log").read_bytes() == b""
        assert (d / "quorum-state").read_bytes() == b'{"leaderEpoch": 3}'
        assert report["bytes_dropped"] >= len(b"unflushed")
        assert "__cluster_metadata-0/00000000000000000019.log" in report["entries_removed"]
        assert STASH not in os.listdir(m.mountpoint)


def test_a_rename_into_place_without_fsyncs_comes_undone(tmp_path: Path) -> None:
    with mounted(tmp_path) as m:
        qs = m.mountpoint / "quorum-state"
        write_atomically(qs, b"epoch 1")
        tmp = m.mountpoint / "quorum-state.tmp"
        tmp.write_bytes(b"epoch 2")
        os.replace(tmp, qs)  # KAFKA-15312's pattern: no fsync of the file, none of the directory
        assert qs.read_bytes() == b"epoch 2"
        m.ctl(cmd="crash")
        assert qs.read_bytes() == b"epoch 1"
        assert sorted(os.listdir(m.mountpoint)) == ["quorum-state"]


def test_a_file_read_before_the_crash_is_not_served_from_a_stale_cache(tmp_path: Path) -> None:
    with mounted(tmp_path) as m:
        f = m.mountpoint / "f"
        write_atomically(f, b"A" * 8192)
        with open(f, "r+b") as h:
            h.seek(4096)
            h.write(b"B" * 10)
        assert f.read_bytes()[4096:4106] == b"B" * 10
        m.ctl(cmd="crash")
        assert f.read_bytes() == b"A" * 8192
        assert os.stat(f).st_size == 8192


def test_injected_errors_hit_the_chosen_files_and_operations(tmp_path: Path) -> None:
    with mounted(tmp_path) as m:
        log, qs = m.mountpoint / "a.log", m.mountpoint / "quorum-state"
        write_atomically(log, b"x")
        write_atomically(qs, b"y")
        m.ctl(cmd="fail", ops=["fsync"], glob="*.log", errno="EIO")
        fd = os.open(log, os.O_WRONLY | os.O_APPEND)
        try:
            os.write(fd, b"more")
            with pytest.raises(OSError) as err:
                os.fsync(fd)
            assert err.value.errno == errno.EIO
        finally:
            os.close(fd)
        write_atomically(qs, b"z")  # another file: untouched
        m.ctl(cmd="fail", ops=["write"], glob="quorum-state*", errno="ENOSPC")
        with pytest.raises(OSError) as err:
            write_atomically(qs, b"w")
        assert err.value.errno == errno.ENOSPC
        assert m.ctl(cmd="status")["errors_injected"] == 2
        m.ctl(cmd="clear")
        write_atomically(qs, b"v")
        m.ctl(cmd="crash")  # the failed fsync made nothing durable
        assert log.read_bytes() == b"x" and qs.read_bytes() == b"v"


def test_a_read_rule_reaches_a_file_whose_pages_the_kernel_holds(tmp_path: Path) -> None:
    """A node reads its open segments from the page cache: a read rule drops the cached pages of the
    files it names, so the next read meets the error instead of being served from memory."""
    with mounted(tmp_path) as m:
        seg = m.mountpoint / "00000000000000000000.log"
        write_atomically(seg, b"committed" * 100)
        fd = os.open(seg, os.O_RDONLY)
        try:
            assert os.pread(fd, 9, 0) == b"committed"  # now cached
            m.ctl(cmd="fail", ops=["read"], glob="*.log", errno="EIO")
            with pytest.raises(OSError) as err:
                os.pread(fd, 9, 0)
            assert err.value.errno == errno.EIO
            m.ctl(cmd="clear")
            assert os.pread(fd, 9, 9) == b"committed"
        finally:
            os.close(fd)
        assert {e["op"] for e in m.ctl(cmd="injected")["errors"]} == {"read"}  # the kernel may retry


def test_an_fsync_delay_slows_fsyncs_only(tmp_path: Path) -> None:
    with mounted(tmp_path) as m:
        f = m.mountpoint / "f"
        m.ctl(cmd="delay", glob="*", ms=300)
        t = time.monotonic()
        f.write_bytes(b"no fsync")
        assert time.monotonic() - t < 0.25
        t = time.monotonic()
        write_atomically(f, b"with fsyncs")  # the file's and the directory's
        assert time.monotonic() - t >= 0.55


def test_a_killed_filesystem_leaves_a_mount_that_unmount_removes(tmp_path: Path) -> None:
    with mounted(tmp_path) as m:
        m.process.send_signal(signal.SIGKILL)
        m.process.wait(5)
        assert diskfs_mounts(m.mountpoint) == [str(m.mountpoint.resolve())]
        with pytest.raises(OSError) as err:
            os.listdir(m.mountpoint)
        assert err.value.errno == errno.ENOTCONN
        assert unmount(str(m.mountpoint))
        assert diskfs_mounts(m.mountpoint) == [] and os.listdir(m.mountpoint) == []


def test_the_command_line_talks_to_the_control_socket(tmp_path: Path) -> None:
    with mounted(tmp_path) as m:
        cli = [sys.executable, "-m", "kraftlab.nemesis.diskfs", "ctl", m.control]
        ok = subprocess.run([*cli, '{"cmd": "status"}'], capture_output=True, text=True, timeout=30)
        assert ok.returncode == 0 and '"crashes": 0' in ok.stdout
        bad = subprocess.run([*cli, '{"cmd": "fail", "errno": "EPERM"}'], capture_output=True, text=True, timeout=30)
        assert bad.returncode == 1 and "errno" in bad.stderr
        notjson = subprocess.run([*cli, "crash"], capture_output=True, text=True, timeout=30)
        assert notjson.returncode == 254


def test_a_crash_during_a_delayed_fsync_makes_nothing_durable(tmp_path: Path) -> None:
    """A slow disk's power loss: the fsync held when the power goes never returns success, and what it
    would have made durable is gone."""
    import threading

    with mounted(tmp_path) as m:
        f = m.mountpoint / "seg.log"
        _append(f, b"durable|", sync=True)
        fsync_dir(m.mountpoint)
        m.ctl(cmd="delay", glob="*.log", ms=800)
        outcome: list[BaseException | None] = []

        def held_fsync() -> None:
            try:
                _append(f, b"in flight", sync=True)
                outcome.append(None)
            except OSError as exc:
                outcome.append(exc)

        t = threading.Thread(target=held_fsync)
        t.start()
        time.sleep(0.3)  # the write is done, its fsync held
        report = m.ctl(cmd="crash")
        t.join(5)
        assert len(outcome) == 1 and isinstance(outcome[0], OSError) and outcome[0].errno == errno.EIO
        assert report["bytes_dropped"] == len(b"in flight")
        m.ctl(cmd="clear")
        assert f.read_bytes() == b"durable|"
        m.ctl(cmd="crash")
        assert f.read_bytes() == b"durable|"  # the late fsync made nothing durable after the crash
