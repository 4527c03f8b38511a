"""The kraftlab CLI: exit codes for bad arguments and help."""

from __future__ import annotations

import pytest

from kraftlab.cli import EXIT_BAD_ARGS, main


def test_no_command_is_bad_arguments(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == EXIT_BAD_ARGS


def test_unknown_command_exits_254() -> None:
    with pytest.raises(SystemExit) as exc:
        main(["no-such-command"])
    assert exc.value.code == EXIT_BAD_ARGS
