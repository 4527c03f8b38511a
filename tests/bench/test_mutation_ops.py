"""The mutation benchmark's operators (bench/mutation_ops.py), in seconds: every operator fires,
every mutant is a valid and different program, ids survive unrelated edits, and mutants of a
small function are told apart from it by a small test (the benchmark itself is not run here)."""

from __future__ import annotations

import ast
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

BENCH = Path(__file__).resolve().parents[2] / "bench"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("mutation_ops", BENCH / "mutation_ops.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


ops = _load()

TOY = '''
"""A toy module."""
import logging

log = logging.getLogger(__name__)
__all__ = ["Votes", "majority"]


def majority(n: int) -> int:
    """The smallest majority of n voters."""
    return n // 2 + 1


class Votes:
    def __init__(self, voters: list[int]) -> None:
        self.voters = voters
        self.granted: set[int] = set()
        self.rounds = 0

    def grant(self, voter: int, term: int, current: int) -> bool:
        log.info("grant %s", voter)
        if voter not in self.voters or term < current:
            return False
        self.granted.add(voter)
        self.rounds += 1
        self.last = (voter, term)
        return len(self.granted) >= majority(len(self.voters)) and not self.closed()

    def closed(self) -> bool:
        return self.voters[1:] == [] if True else False

    def order(self) -> list[int]:
        return sorted(self.granted, key=lambda v: v, reverse=False)[0:2] + list(zip(self.voters, self.granted))
'''


def _oracle(source: str) -> bool:
    """True when the module behaves like the original on a few calls."""
    env: dict[str, object] = {"__name__": "toy"}
    try:
        exec(compile(source, "toy", "exec"), env)
        majority, votes_class = env["majority"], env["Votes"]
        assert [majority(n) for n in (1, 2, 3, 4, 5)] == [1, 2, 2, 3, 3]  # type: ignore[operator]
        votes = votes_class([1, 2, 3])  # type: ignore[operator]
        assert votes.grant(1, 5, 5) is False
        assert votes.grant(9, 5, 5) is False
        assert votes.grant(2, 4, 5) is False
        assert votes.grant(3, 6, 5) is True
        assert votes.rounds == 2 and votes.last == (3, 6)
        assert votes.order() == [1, 3, (1, 1), (2, 3)]
    except Exception:
        return False
    return True


def test_every_operator_fires_and_each_mutant_is_a_different_valid_program() -> None:
    mutants = ops.mutants_of(TOY, "toy.py")
    assert {m.kind for m in mutants} == set(ops.KINDS)
    original = ops.unmutated_source(TOY)
    for m in mutants:
        mutated = ops.mutated_source(TOY, m)
        ast.parse(mutated)
        assert mutated != original, m


def test_docstrings_annotations_logging_and_dunder_all_are_not_mutated() -> None:
    mutants = ops.mutants_of(TOY, "toy.py")
    lines = TOY.splitlines()
    touched = {lines[m.line - 1].strip() for m in mutants}
    assert not any(t.startswith(('log.info', '__all__', '"""', "def majority(n: int)")) for t in touched)


def test_ids_are_unique_and_survive_an_unrelated_edit_above() -> None:
    before = ops.mutants_of(TOY, "toy.py")
    after = ops.mutants_of(TOY.replace("import logging\n", "import logging\nimport os\n\nX = os.sep\n"), "toy.py")
    assert len({m.id for m in before}) == len(before)
    assert {m.id for m in before} <= {m.id for m in after}
    moved = {m.id: m.line for m in after}
    assert all(moved[m.id] == m.line + 3 for m in before)


def test_the_toy_oracle_kills_most_mutants_and_the_unmutated_module_passes() -> None:
    assert _oracle(ops.unmutated_source(TOY))
    mutants = ops.mutants_of(TOY, "toy.py")
    survivors = [m for m in mutants if _oracle(ops.mutated_source(TOY, m))]
    assert len(survivors) < len(mutants) / 3, [m.detail for m in survivors]
    by_detail = {m.detail for m in survivors}
    assert "n // 2 + 1: Add → Sub" not in by_detail
