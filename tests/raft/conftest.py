"""Fixtures of the raft tests."""

from raft_harness import make_core

__all__ = ["make_core"]
