"""Checks that turn a missing prerequisite into an error a user can act on (what, and the fix)."""

from __future__ import annotations

import os
import shutil


class SetupError(Exception):
    """Something the user must fix on this machine; the message says what and how."""


def require_root(what: str) -> None:
    if os.geteuid() != 0:
        raise SetupError(f"{what} needs root (it creates namespaces, links and iptables rules); run it with sudo")


def require_commands(commands: dict[str, str]) -> None:
    """`commands` maps an executable to the Debian package that provides it."""
    missing = sorted({pkg for cmd, pkg in commands.items() if shutil.which(cmd) is None})
    if missing:
        names = ", ".join(cmd for cmd, pkg in commands.items() if pkg in missing and shutil.which(cmd) is None)
        raise SetupError(f"missing {names}: install with `apt-get install -y {' '.join(missing)}`")
