"""The mutation operators of the mutation benchmark (bench/bench_mutants.py): where a Python source
file can be mutated, and the mutated source. Pure: source text in, mutants and mutated text out.

Operators (each a small, plausible bug of the kind a person writes):
  compare       a comparison operator flipped at its boundary or negated (< ↔ <=, > ↔ >=, == ↔ !=,
                in ↔ not in, is ↔ is not)
  negate-cond   the condition of an if / while / conditional expression negated
  boolop        `and` ↔ `or`
  not           `not x` → `x`
  binop         arithmetic swapped (+ ↔ -, * → //, // → *, % → //, & ↔ |, << ↔ >>)
  int           an integer constant off by one (0 → 1, 1 → 0, n → n + 1)
  bool          `True` ↔ `False`
  slice         a slice bound off by one (a[i:j] → a[i + 1:j], a[i:j + 1])
  swap-args     the first two positional arguments of a call swapped
  swap-fields   the values of the first two keyword arguments of a call swapped
  drop-call     a call statement dropped (a method call, an append, a send)
  drop-assign   an assignment to an attribute or an item dropped (`self.x = …`, `d[k] = …`)
  drop-augassign an augmented assignment dropped (`x += 1`)
  drop-return   a `return …` replaced by falling through (`pass`)

Not mutated: docstrings, type annotations, logging calls, `__all__`, `assert` statements, the
messages of `raise` (string constants are never mutated), and the zoo's test-only bug code
(`_zoo_*` functions and what a `bugs.on(...)` switch guards: dead in the correct node, so their
mutants would measure nothing).

A mutant's id is stable when unrelated lines move: the file, the enclosing function or class,
the operator, a digest of the mutated expression, and its rank among identical sites there.
"""

from __future__ import annotations

import ast
import hashlib
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

COMPARE_FLIPS: dict[type[ast.cmpop], type[ast.cmpop]] = {
    ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt, ast.Eq: ast.NotEq, ast.NotEq: ast.Eq,
    ast.In: ast.NotIn, ast.NotIn: ast.In, ast.Is: ast.IsNot, ast.IsNot: ast.Is,
}
NEGATING_COMPARES = (ast.Eq, ast.NotEq, ast.In, ast.NotIn, ast.Is, ast.IsNot)
BINOP_SWAPS: dict[type[ast.operator], type[ast.operator]] = {
    ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.FloorDiv, ast.FloorDiv: ast.Mult, ast.Mod: ast.FloorDiv,
    ast.BitAnd: ast.BitOr, ast.BitOr: ast.BitAnd, ast.LShift: ast.RShift, ast.RShift: ast.LShift,
}
# Calls whose first two arguments are not interchangeable values (a swap is a TypeError or no change).
NO_SWAP = frozenset({"isinstance", "issubclass", "hasattr", "getattr", "setattr", "max", "min", "super"})
LOGGING = frozenset({"debug", "info", "warning", "warn", "exception", "error", "critical", "log"})
KINDS = ("compare", "negate-cond", "boolop", "not", "binop", "int", "bool", "slice", "swap-args", "swap-fields",
         "drop-call", "drop-assign", "drop-augassign", "drop-return")


@dataclass(frozen=True)
class Mutant:
    file: str  # relative to the repository
    line: int
    end_line: int  # the lines of the mutated code: what a test must execute to see the mutant
    scope: str  # the enclosing function / class (dotted), or "<module>"
    kind: str
    variant: int  # which comparison operator of a chained comparison; 0 otherwise
    detail: str  # what changes, for people: "<= → <", "drop self.votes.add(src)"
    index: int  # the node's position in ast.walk order of the file (how to find it again)
    digest: str  # of the mutated node's source and the change
    rank: int = 0  # among mutants with the same file, scope, kind and digest
    top_level: bool = False  # run when its module is imported (module or class body, defaults, decorators)

    @property
    def id(self) -> str:
        suffix = f"#{self.rank}" if self.rank else ""
        return f"{self.file}::{self.scope}::{self.kind}:{self.digest}{suffix}"

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"


def _is_zoo_switch(node: ast.AST) -> bool:
    """`self.bugs.on(...)` / `config.bugs.on(...)` (a test-only bug switch of the zoo) inside `node`."""
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "on"
               and "bugs" in ast.unparse(n.func.value) for n in ast.walk(node))


def _skipped_nodes(tree: ast.AST) -> set[int]:
    """ids of nodes never mutated: annotations, docstrings, logging calls, `__all__`, asserts, raises'
    args, and the zoo's bug code."""
    skip: set[int] = set()

    def drop(node: ast.AST | None) -> None:
        if node is not None:
            skip.update(id(n) for n in ast.walk(node))

    for node in ast.walk(tree):
        drop(getattr(node, "annotation", None))
        drop(getattr(node, "returns", None))
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(
                    first.value.value, str):
                drop(first)
        call = node.value if isinstance(node, ast.Expr) else node
        if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr in LOGGING:
            drop(node)
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            drop(node)
        if isinstance(node, ast.Assert):
            drop(node)
        if isinstance(node, ast.Raise):
            drop(node.exc)
        if isinstance(node, ast.FunctionDef) and node.name.startswith("_zoo_"):
            drop(node)
        if isinstance(node, ast.If) and _is_zoo_switch(node.test):
            drop(node.test)
            for stmt in node.body:
                drop(stmt)
            skip.add(id(node))
        if isinstance(node, ast.IfExp | ast.BoolOp) and _is_zoo_switch(node):
            drop(node)
    return skip


def _scopes(tree: ast.AST) -> tuple[dict[int, str], set[int]]:
    """id(node) → the dotted name of the innermost function or class around it; and the ids of
    nodes that run when the module is imported (outside any function body)."""
    out: dict[int, str] = {}
    top: set[int] = set()

    def visit(node: ast.AST, scope: str, at_import: bool) -> None:
        out[id(node)] = scope
        if at_import:
            top.add(id(node))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            inner = node.name if scope == "<module>" else f"{scope}.{node.name}"
            body = {id(n) for n in node.body}
            for child in ast.iter_child_nodes(node):  # decorators, defaults, bases: at definition time
                visit(child, inner, at_import and (isinstance(node, ast.ClassDef) or id(child) not in body))
        elif isinstance(node, ast.Lambda):
            for child in ast.iter_child_nodes(node):
                visit(child, scope, at_import and child is not node.body)
        else:
            for child in ast.iter_child_nodes(node):
                visit(child, scope, at_import)

    visit(tree, "<module>", True)
    return out, top


def _contexts(tree: ast.AST) -> dict[int, str]:
    """id(node) → the source of the statement around it (a compound statement's header only), which
    with the node's own source names a site without its line number."""
    out: dict[int, str] = {}

    def header(stmt: ast.stmt) -> str:
        if isinstance(stmt, ast.If | ast.While):
            return _src(stmt.test)
        if isinstance(stmt, ast.For | ast.AsyncFor):
            return f"{_src(stmt.target)} in {_src(stmt.iter)}"
        if isinstance(stmt, ast.With | ast.AsyncWith):
            return ", ".join(_src(i) for i in stmt.items)
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            return stmt.name
        if isinstance(stmt, ast.Try | ast.Match):
            return type(stmt).__name__
        return _src(stmt)

    def visit(node: ast.AST, context: str) -> None:
        if isinstance(node, ast.stmt):
            context = header(node)
        out[id(node)] = context
        for child in ast.iter_child_nodes(node):
            visit(child, context)

    visit(tree, "")
    return out


def _src(node: ast.AST) -> str:
    return ast.unparse(node).replace("\n", " ")


def _sites(tree: ast.AST) -> Iterator[tuple[int, ast.AST, ast.AST, str, int, str]]:
    """(walk index, node changed, node whose lines a test must run, kind, variant, detail)."""
    for i, node in enumerate(ast.walk(tree)):
        if isinstance(node, ast.Compare):
            for v, op in enumerate(node.ops):
                if type(op) in COMPARE_FLIPS:
                    yield i, node, node, "compare", v, f"{_src(node)}: {type(op).__name__} → " \
                                                       f"{COMPARE_FLIPS[type(op)].__name__}"
        elif isinstance(node, ast.If | ast.While | ast.IfExp):
            test = node.test
            already = (isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not)) or (isinstance(
                test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], NEGATING_COMPARES))
            if not already and not (isinstance(test, ast.Constant)):
                yield i, node, test, "negate-cond", 0, f"{_src(test)} → not ({_src(test)})"
        elif isinstance(node, ast.BoolOp):
            yield i, node, node, "boolop", 0, f"{_src(node)[:50]}: " + ("and → or" if isinstance(node.op, ast.And)
                                                                       else "or → and")
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            yield i, node, node, "not", 0, f"{_src(node)} → {_src(node.operand)}"
        elif isinstance(node, ast.BinOp) and type(node.op) in BINOP_SWAPS:
            yield i, node, node, "binop", 0, f"{_src(node)}: {type(node.op).__name__} → " \
                                             f"{BINOP_SWAPS[type(node.op)].__name__}"
        elif isinstance(node, ast.Constant) and type(node.value) is bool:
            yield i, node, node, "bool", 0, f"{node.value} → {not node.value}"
        elif isinstance(node, ast.Constant) and type(node.value) is int:
            yield i, node, node, "int", 0, f"{node.value} → {_off_by_one(node.value)}"
        elif isinstance(node, ast.Slice):
            if node.lower is not None:
                yield i, node, node, "slice", 0, f"[{_src(node)}] lower bound + 1"
            if node.upper is not None:
                yield i, node, node, "slice", 1, f"[{_src(node)}] upper bound + 1"
        elif isinstance(node, ast.Call):
            positional = [a for a in node.args if not isinstance(a, ast.Starred)]
            name = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")
            if len(positional) == len(node.args) >= 2 and _src(node.args[0]) != _src(node.args[1]) and (
                    name not in NO_SWAP):
                yield i, node, node, "swap-args", 0, f"{_src(node)[:60]}: swap {_src(node.args[0])}, " \
                                                     f"{_src(node.args[1])}"
            named = [k for k in node.keywords if k.arg is not None]
            if len(named) >= 2 and _src(named[0].value) != _src(named[1].value):
                yield i, node, node, "swap-fields", 0, f"{_src(node)[:60]}: swap {named[0].arg}=, {named[1].arg}="
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
            yield i, node, node, "drop-call", 0, f"drop {_src(node)[:70]}"
        elif isinstance(node, ast.Assign) and all(isinstance(t, ast.Attribute | ast.Subscript) for t in node.targets):
            yield i, node, node, "drop-assign", 0, f"drop {_src(node)[:70]}"
        elif isinstance(node, ast.AugAssign):
            yield i, node, node, "drop-augassign", 0, f"drop {_src(node)[:70]}"
        elif isinstance(node, ast.Return) and node.value is not None:
            yield i, node, node, "drop-return", 0, f"drop {_src(node)[:70]}"


def _off_by_one(value: int) -> int:
    return 0 if value == 1 else value + 1


def mutants_of(source: str, file: str) -> list[Mutant]:
    """Every mutant of one file's source, in a stable order."""
    tree = ast.parse(source)
    skip = _skipped_nodes(tree)
    scopes, top = _scopes(tree)
    contexts = _contexts(tree)
    found: list[Mutant] = []
    ranks: Counter[tuple[str, str, str]] = Counter()
    for i, node, shown, kind, variant, detail in _sites(tree):
        if id(node) in skip or not hasattr(shown, "lineno"):
            continue
        scope = scopes[id(node)]
        digest = hashlib.sha1(f"{contexts[id(node)]}|{_src(node)}|{kind}|{variant}".encode()).hexdigest()[:8]
        rank = ranks[(scope, kind, digest)]
        ranks[(scope, kind, digest)] += 1
        found.append(Mutant(file, shown.lineno, shown.end_lineno or shown.lineno,  # type: ignore[attr-defined]  # hasattr above
                            scope, kind, variant, detail, i, digest, rank, id(node) in top))
    return found


class _Apply(ast.NodeTransformer):
    def __init__(self, mutant: Mutant, order: dict[int, int]) -> None:
        self.mutant = mutant
        self.order = order

    def visit(self, node: ast.AST) -> ast.AST:
        if self.order.get(id(node)) == self.mutant.index:
            return _mutate(node, self.mutant.kind, self.mutant.variant)
        return super().visit(node)


def _plus_one(expr: ast.expr) -> ast.expr:
    return ast.BinOp(expr, ast.Add(), ast.Constant(1))


def _mutate(node: ast.AST, kind: str, variant: int) -> ast.AST:
    if kind == "compare":
        assert isinstance(node, ast.Compare)
        node.ops[variant] = COMPARE_FLIPS[type(node.ops[variant])]()
    elif kind == "negate-cond":
        assert isinstance(node, ast.If | ast.While | ast.IfExp)
        node.test = ast.UnaryOp(ast.Not(), node.test)
    elif kind == "boolop":
        assert isinstance(node, ast.BoolOp)
        node.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()
    elif kind == "not":
        assert isinstance(node, ast.UnaryOp)
        return node.operand
    elif kind == "binop":
        assert isinstance(node, ast.BinOp)
        node.op = BINOP_SWAPS[type(node.op)]()
    elif kind == "bool":
        assert isinstance(node, ast.Constant)
        node.value = not node.value
    elif kind == "int":
        assert isinstance(node, ast.Constant) and isinstance(node.value, int)
        node.value = _off_by_one(node.value)
    elif kind == "slice":
        assert isinstance(node, ast.Slice)
        if variant == 0:
            assert node.lower is not None  # a slice site's variants are the bounds it has
            node.lower = _plus_one(node.lower)
        else:
            assert node.upper is not None
            node.upper = _plus_one(node.upper)
    elif kind == "swap-args":
        assert isinstance(node, ast.Call)
        node.args[0], node.args[1] = node.args[1], node.args[0]
    elif kind == "swap-fields":
        assert isinstance(node, ast.Call)
        a, b = [k for k in node.keywords if k.arg is not None][:2]
        a.value, b.value = b.value, a.value
    elif kind.startswith("drop-"):
        return ast.Pass()
    else:
        raise ValueError(f"unknown mutation operator {kind!r}")
    return node


def mutated_source(source: str, mutant: Mutant) -> str:
    """The file's source with the one mutation applied (re-printed from the tree)."""
    tree = ast.parse(source)
    order = {id(n): i for i, n in enumerate(ast.walk(tree))}
    return ast.unparse(ast.fix_missing_locations(_Apply(mutant, order).visit(tree)))


def unmutated_source(source: str) -> str:
    """The file re-printed from its tree without a change: what a mutant is compared with."""
    return ast.unparse(ast.parse(source))
