"""The import boundaries of pyproject.toml ([tool.importlinter], run by scripts/test.sh) hold for
the project, they do fail (the same contracts, run over a copy of the source tree with one
forbidden import added in each direction, report that contract broken), and they cover every
module: a new package of the suite or of the node is named by each contract it falls under."""

from __future__ import annotations

import os
import pkgutil
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("kraftlab", "node", "control", "nemesis", "workloads", "checker", "spark_analysis")
LINT = Path(sys.executable).parent / "lint-imports"  # a test extra: scripts/test.sh installs it


# the node's public surface to the suite: its admin module, the Kafka protocol client and the
# partition shapes its simulator shares with the nemesis
NODE_SURFACE = {"kraftlab.node.admin", "kraftlab.node.protocol", "kraftlab.node.topology"}


def _contracts() -> dict[str, dict[str, set[str]]]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return {c["name"]: {"source": set(c["source_modules"]), "forbidden": set(c["forbidden_modules"])}
            for c in config["tool"]["importlinter"]["contracts"]}


def _modules(folder: Path, package: str) -> set[str]:
    return {f"{package}.{m.name}" for m in pkgutil.iter_modules([str(folder)])}


def _lint(tree: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(tree), "COLUMNS": "250"}  # the copy's `kraftlab` first
    return subprocess.run([str(LINT), "--no-cache", "--config", str(tree / "pyproject.toml")], cwd=tree, env=env,
                          capture_output=True, text=True, timeout=300)


def _copy(tmp_path: Path) -> Path:
    tree = tmp_path / "tree"
    tree.mkdir()
    for name in PACKAGES:
        shutil.copytree(ROOT / name, tree / name, symlinks=True,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    shutil.copy(ROOT / "pyproject.toml", tree / "pyproject.toml")
    return tree


def test_the_project_keeps_its_import_boundaries() -> None:
    out = _lint(ROOT)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    assert "3 kept, 0 broken" in out.stdout


@pytest.mark.parametrize("module, line, contract", [
    ("node/bugs.py", "import kraftlab.checker.history", "the node never imports the suite"),
    ("nemesis/packages.py", "import kraftlab.node.raft.core",
     "the suite reaches the node only through its admin surface"),
    ("checker/coverage.py", "import kraftlab.nemesis.packages",
     "the checker depends on nothing but the history and journal contracts"),
])
def test_a_forbidden_import_breaks_its_contract(tmp_path: Path, module: str, line: str, contract: str) -> None:
    tree = _copy(tmp_path)
    with (tree / module).open("a") as f:
        f.write(f"\n{line}  # noqa: E402 — a deliberate violation\n")
    out = _lint(tree)
    assert out.returncode != 0
    broken = [x for x in out.stdout.splitlines() if x.endswith("BROKEN") or " BROKEN (" in x]  # "(n ignored imports)"
    assert any(x.startswith(contract) for x in broken), out.stdout[-3000:]


def test_every_module_falls_under_the_contracts() -> None:
    contracts = _contracts()
    top = _modules(ROOT / "kraftlab", "kraftlab")
    suite = top - {"kraftlab.node", "kraftlab.testing"}  # test support: for tests and bench/ only
    node = contracts["the node never imports the suite"]
    assert node["source"] == {"kraftlab.node"}
    assert node["forbidden"] == top - {"kraftlab.node"}
    reach = contracts["the suite reaches the node only through its admin surface and the Kafka protocol client"]
    assert reach["source"] == suite
    assert _modules(ROOT / "node", "kraftlab.node") - NODE_SURFACE <= reach["forbidden"]
    assert "kraftlab.testing" in reach["forbidden"]
    checker = contracts["the checker depends on nothing but the history and journal contracts"]
    assert checker["source"] == {"kraftlab.checker"}
    assert checker["forbidden"] == top - {"kraftlab.checker"}
