"""The test tree itself: every test module has a unique file name (pytest imports test modules
by basename from their folders, so two `test_cli.py` files break collection of the whole suite)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path


def test_test_module_names_are_unique() -> None:
    names = Counter(p.name for p in Path(__file__).parent.rglob("test_*.py"))
    assert [n for n, c in names.items() if c > 1] == []


def test_spark_submit_folder_shadows_no_standard_module() -> None:
    """spark-submit runs `spark_analysis/submit.py` as a file, which puts `spark_analysis/` first on
    sys.path: a module there named like a standard one (queue.py did) hides it from every library
    the job imports (networkx's `from queue import PriorityQueue` failed)."""
    import sys

    folder = Path(__file__).resolve().parent.parent / "spark_analysis"
    names = {p.stem for p in folder.glob("*.py")} | {p.name for p in folder.iterdir() if (p / "__init__.py").exists()}
    assert names, folder
    assert not names & set(sys.stdlib_module_names), sorted(names & set(sys.stdlib_module_names))
