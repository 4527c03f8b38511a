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

    def parser(wanted: object = None) -> argparse.ArgumentParser:
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

    def parser(wanted: object = None) -> argparse.ArgumentParser:
        p = argparse.ArgumentParser()
        p.add_subparsers().add_parser("forks").set_defaults(func=forks)
        return p

    monkeypatch.setattr(cli, "build_parser", parser)
    assert cli.main(["forks"]) == 0


HEAVY = ("matplotlib", "networkx", "numpy", "pyroute2", "kio", "kraftlab.workloads", "kraftlab.checker",
         "kraftlab.nemesis", "kraftlab.runner", "kraftlab.report",
         "crc32c", "importlib.metadata")  # crc32c looks its own version up on import: about 40 ms
"""What `--help` must not load: the cost of the commands, paid only when one runs."""


def _modules_after(code: str) -> set[str]:
    import json
    import subprocess
    import sys

    probe = (f"import sys, json, contextlib, io\n"
             f"with contextlib.suppress(SystemExit), contextlib.redirect_stdout(io.StringIO()):\n"
             f"    {code}\n"
             f"print(json.dumps(sorted(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120)
    return set(json.loads(out.stdout.splitlines()[-1]))


@pytest.mark.parametrize("code", [
    "from kraftlab.cli import main; main(['--help'])",
    "from kraftlab.cli import main; main([])",
    "from kraftlab.node.cli import main; main(['--help'])",
])
def test_help_loads_no_heavy_module(code: str) -> None:
    loaded = _modules_after(code)
    heavy = sorted(m for m in loaded if any(m == h or m.startswith(h + ".") for h in HEAVY))
    if "node.cli" in code:  # the node's own CLI may use kio (its wire types) but nothing of the suite's
        heavy = [m for m in heavy if not m.startswith("kio")]
    assert heavy == []


def test_top_level_help_lists_every_command_with_its_summary(capsys: pytest.CaptureFixture[str]) -> None:
    import importlib
    import pkgutil

    from kraftlab import commands

    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    for info in pkgutil.iter_modules(commands.__path__):
        module = importlib.import_module(f"kraftlab.commands.{info.name}")
        assert info.name.replace("_", "-") in out
        assert " ".join(module.HELP.split()[:4]) in " ".join(out.split())


def test_a_command_still_parses_its_own_arguments() -> None:
    from kraftlab.cli import build_parser

    args = build_parser(["nemesis"]).parse_args(["nemesis", "--lab", "x", "heal"])
    assert args.command == "nemesis" and callable(args.func)
