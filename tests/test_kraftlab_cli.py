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


def test_sigterm_is_an_interrupt_and_the_handler_is_restored(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """A command stopped by SIGTERM unwinds like Ctrl-C (its `finally` blocks run: labs removed,
    verdict written) and exits 255 saying why; the process's SIGTERM handler is put back."""
    import argparse
    import os
    import signal
    import time

    from kraftlab import cli

    cleaned: list[bool] = []

    def stops_itself(_: argparse.Namespace) -> int:
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)
            return 0
        finally:
            cleaned.append(True)

    def parser() -> argparse.ArgumentParser:
        p = argparse.ArgumentParser()
        p.add_subparsers().add_parser("stops-itself").set_defaults(func=stops_itself)
        return p

    monkeypatch.setattr(cli, "build_parser", parser)
    before = signal.getsignal(signal.SIGTERM)
    began = time.monotonic()
    assert cli.main(["stops-itself"]) == cli.EXIT_CRASHED
    assert time.monotonic() - began < 4
    assert cleaned == [True]
    assert "stopped by signal SIGTERM" in capsys.readouterr().err
    assert signal.getsignal(signal.SIGTERM) is before


def test_a_forked_child_still_dies_of_sigterm(monkeypatch: pytest.MonkeyPatch) -> None:
    """Children forked by a command (pyroute2's namespace helpers, isolated checkers) inherit the
    handler; their parents stop them with SIGTERM, which must still end them (an interrupt raised in a
    namespace helper hung `lab up`)."""
    import argparse
    import os
    import signal
    import time

    from kraftlab import cli

    def forks(_: argparse.Namespace) -> int:
        pid = os.fork()
        if pid == 0:
            try:
                time.sleep(10)
            finally:
                os._exit(3)  # reached only if SIGTERM raised instead of ending the child
        time.sleep(0.2)
        os.kill(pid, signal.SIGTERM)
        _, status = os.waitpid(pid, 0)
        return 0 if os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGTERM else 1

    def parser() -> argparse.ArgumentParser:
        p = argparse.ArgumentParser()
        p.add_subparsers().add_parser("forks").set_defaults(func=forks)
        return p

    monkeypatch.setattr(cli, "build_parser", parser)
    assert cli.main(["forks"]) == 0
