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


def test_a_command_that_fails_to_import_does_not_break_the_others(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import importlib

    from kraftlab import cli

    real = importlib.import_module

    def fake(name: str, *a: object, **k: object):
        if name == "kraftlab.commands.serve":
            raise ImportError("no module named 'missing_dependency'")
        return real(name, *a, **k)

    monkeypatch.setattr(cli.importlib, "import_module", fake)
    assert main(["serve"]) == cli.EXIT_CRASHED
    assert "missing_dependency" in capsys.readouterr().err
    assert main(["serve", "--port", "1"]) == cli.EXIT_CRASHED
    assert "missing_dependency" in capsys.readouterr().err
    # the other commands still parse and run
    with pytest.raises(SystemExit) as exc:
        main(["analyze", "--help"])
    assert exc.value.code == 0
