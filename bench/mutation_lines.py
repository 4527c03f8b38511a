"""A pytest plugin for the mutation benchmark: which lines of the mutated packages each test runs,
and how long each test takes — so a mutant is run only against the tests that execute its code,
fastest first. Loaded with `-p mutation_lines` (bench/ on PYTHONPATH); writes JSON to the file
named by MUTATION_LINES_OUT:

    {"tests": {nodeid: seconds}, "lines": {file: {line: [nodeid, ...] or ["<import>"]}}}

A line run by module or class-body code (imports, definitions, defaults, dataclass fields) is
marked "<import>": every test depends on it. Also registers the hypothesis profile `mutation`
(derandomized, no shrinking: a mutant needs one failing example, not the smallest).
"""

from __future__ import annotations

import inspect
import json
import os
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Generator
from pathlib import Path
from types import FrameType
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, settings

settings.register_profile("mutation", deadline=None, derandomize=True, suppress_health_check=list(HealthCheck),
                          phases=[Phase.explicit, Phase.reuse, Phase.generate])

IMPORT = "<import>"
_ROOT = Path.cwd().resolve()
_PREFIXES = tuple(str(_ROOT / p) + os.sep for p in os.environ.get("MUTATION_LINES_PACKAGES", "node").split(","))
_KRAFTLAB = str(_ROOT / "kraftlab") + os.sep  # the same files seen through kraftlab/<pkg> -> ../<pkg>

_lines: dict[str, dict[int, set[str]]] = defaultdict(lambda: defaultdict(set))
_durations: dict[str, float] = {}
_current = [IMPORT]
_files: dict[str, str | None] = {}


def _relative(filename: str) -> str | None:
    known = _files.get(filename, "?")
    if known != "?":
        return known
    rel: str | None = None
    path = filename
    if path.startswith(_KRAFTLAB):
        path = str(_ROOT / path[len(_KRAFTLAB):])
    if path.startswith(_PREFIXES):
        rel = os.path.relpath(path, _ROOT)
    _files[filename] = rel
    return rel


def _tracer(frame: FrameType, event: str, arg: Any) -> Callable[..., Any] | None:
    rel = _relative(frame.f_code.co_filename)
    if rel is None:
        return None
    top_level = not frame.f_code.co_flags & inspect.CO_OPTIMIZED  # a module or a class body
    table = _lines[rel]

    def local(frame: FrameType, event: str, arg: Any) -> Callable[..., Any] | None:
        if event == "line":
            table[frame.f_lineno].add(IMPORT if top_level else _current[0])
        return local

    if event == "call":
        table[frame.f_lineno].add(IMPORT if top_level else _current[0])
    return local


if os.environ.get("MUTATION_LINES_OUT"):
    # From the plugin's import on: the conftests given on the command line import the node's
    # modules before pytest_configure, and their module-level lines count too.
    sys.settrace(_tracer)
    threading.settrace(_tracer)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, None, None]:
    _current[0] = item.nodeid
    t0 = time.monotonic()
    yield
    _durations[item.nodeid] = time.monotonic() - t0
    _current[0] = IMPORT


def pytest_unconfigure(config: pytest.Config) -> None:
    out = os.environ.get("MUTATION_LINES_OUT")
    if not out:
        return
    sys.settrace(None)
    threading.settrace(None)
    lines = {f: {str(n): sorted(t) for n, t in sorted(per.items())} for f, per in sorted(_lines.items())}
    Path(out).write_text(json.dumps({"tests": _durations, "lines": lines}))
