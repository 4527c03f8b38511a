"""The `kraftlab` command line: discovers one module per subcommand in `kraftlab.commands`.

Each command module defines `HELP` (its one-line summary) and `register(subparsers) -> None`,
which adds its parser and sets `func=handler` on it; a handler takes the parsed
`argparse.Namespace` and returns an exit code. Only the command being run is imported and
registered: the others are listed by their `HELP`, read from their source without importing
them, so `kraftlab --help` answers without loading plotting, checkers or workloads. Exit codes
are the run's verdict: 0 valid, 1 invalid, 2 unknown, 254 bad arguments, 255 the run itself crashed.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import pkgutil
import signal
import sys
import traceback
from collections.abc import Collection
from pathlib import Path
from typing import NoReturn

from kraftlab import commands
from kraftlab.exits import EXIT_BAD_ARGS, EXIT_CRASHED, EXIT_INVALID, EXIT_UNKNOWN, EXIT_VALID  # noqa: F401


class _Parser(argparse.ArgumentParser):
    """argparse that exits with 254 (bad arguments) instead of 2 (which means `unknown`)."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(EXIT_BAD_ARGS, f"{self.prog}: error: {message}\n")


def build_parser(wanted: Collection[str] | None = None) -> argparse.ArgumentParser:
    """The parser; `wanted` names the commands registered in full (None: every one). The others
    appear by their `HELP` only (a command without a readable `HELP` is registered in full)."""
    parser = _Parser(prog="kraftlab", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
        name = info.name.replace("_", "-")
        summary = None if wanted is None or name in wanted else _static_help(info)
        if summary is not None:
            sub.add_parser(name, help=summary, add_help=False)
            continue
        try:
            module = importlib.import_module(f"kraftlab.commands.{info.name}")
        except ImportError as exc:  # one broken command must not take the others down
            _register_broken(sub, info.name, exc)
            continue
        register = getattr(module, "register", None)
        if register is not None:
            register(sub)
    return parser


def _static_help(info: pkgutil.ModuleInfo) -> str | None:
    """A command module's module-level `HELP = "..."`, read from its source (None if it has none)."""
    try:
        path = Path(getattr(info.module_finder, "path", "")) / f"{info.name}.py"
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return None
    for node in tree.body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                and node.targets[0].id == "HELP" and isinstance(node.value, ast.Constant)
                and isinstance(node.value.value, str)):
            return node.value.value
    return None


def _command_in(argv: list[str]) -> str | None:
    """The subcommand named in `argv` (the first word that is not an option), if any."""
    return next((a for a in argv if not a.startswith("-")), None)


def _register_broken(sub: argparse._SubParsersAction, module: str, exc: ImportError) -> None:
    """A command whose module cannot be imported: it says why when it is used."""
    name = module.replace("_", "-")
    why = f"unavailable, its module failed to import: {exc}"
    p = sub.add_parser(name, help=f"({why})", add_help=False)

    def fail(args: argparse.Namespace) -> int:
        print(f"kraftlab {name}: {why}", file=sys.stderr)
        return EXIT_CRASHED

    p.set_defaults(func=fail, broken=True)  # whatever arguments follow, it says why


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    command = _command_in(argv)
    parser = build_parser([command] if command else [])
    args, extra = parser.parse_known_args(argv)
    if extra and not getattr(args, "broken", False):
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    func = getattr(args, "func", None)
    if func is None:
        parser.print_help()
        return EXIT_BAD_ARGS
    from kraftlab.nemesis.runner import interrupt_on, restore_handlers

    previous = interrupt_on((signal.SIGTERM,))  # a CI timeout or `kill` unwinds like Ctrl-C: labs removed, verdict
    try:
        return int(func(args))
    except KeyboardInterrupt as exc:
        print(f"kraftlab: {exc}" if str(exc) else "kraftlab: interrupted", file=sys.stderr)
        return EXIT_CRASHED
    except Exception:
        traceback.print_exc()
        return EXIT_CRASHED
    finally:
        restore_handlers(previous)


if __name__ == "__main__":
    sys.exit(main())
