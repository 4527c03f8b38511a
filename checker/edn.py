"""A small EDN reader (the subset Jepsen histories use), with line numbers for errors.

Keywords become plain strings without the colon (`:read` → "read"), vectors and lists become
Python lists, maps dicts, sets frozensets, `nil` None. `read_all` returns each top-level form
with the line it starts on.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from kraftlab.checker.history import HistoryError

_WS = re.compile(r"(?:[\s,]+|;[^\n]*)+")
_ATOM = re.compile(r"[^\s,;()\[\]{}\"]+")
_INT = re.compile(r"[+-]?\d+N?$")
_FLOAT = re.compile(r"[+-]?\d+(\.\d*)?([eE][+-]?\d+)?M?$")
_ESC = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "\\": "\\"}
_CLOSE = {"(": ")", "[": "]", "{": "}"}


class _Reader:
    def __init__(self, text: str, path: str) -> None:
        self.text = text
        self.pos = 0
        self.path = path

    def line(self, pos: int | None = None) -> int:
        return self.text.count("\n", 0, self.pos if pos is None else pos) + 1

    def fail(self, reason: str, pos: int | None = None) -> HistoryError:
        return HistoryError(self.path, self.line(pos), reason)

    def skip(self) -> None:
        m = _WS.match(self.text, self.pos)
        if m:
            self.pos = m.end()

    def at_end(self) -> bool:
        self.skip()
        return self.pos >= len(self.text)

    def form(self) -> Any:
        self.skip()
        if self.pos >= len(self.text):
            raise self.fail("unexpected end of input")
        c = self.text[self.pos]
        if c in "([{":
            return self.coll(c)
        if c == "#":
            nxt = self.text[self.pos + 1 : self.pos + 2]
            if nxt == "{":
                self.pos += 1
                return frozenset(_hashable(x) for x in self.coll("{", as_set=True))
            if nxt == "_":
                self.pos += 2
                self.form()
                return self.form()
            self.pos += 1
            self.atom()  # a tag such as #inst or #jepsen.history.Op: read the tagged form itself
            return self.form()
        if c == '"':
            return self.string()
        if c in ")]}":
            raise self.fail(f"unexpected {c!r}")
        return self.atom()

    def coll(self, opener: str, as_set: bool = False) -> Any:
        start = self.pos
        self.pos += 1
        close = _CLOSE[opener]
        items: list[Any] = []
        while True:
            self.skip()
            if self.pos >= len(self.text):
                raise self.fail(f"unclosed {opener!r} opened here", start)
            if self.text[self.pos] == close:
                self.pos += 1
                break
            items.append(self.form())
        if opener != "{" or as_set:
            return items
        if len(items) % 2:
            raise self.fail("a map needs an even number of forms", start)
        return {_hashable(items[i]): items[i + 1] for i in range(0, len(items), 2)}

    def string(self) -> str:
        start = self.pos
        self.pos += 1
        out: list[str] = []
        text = self.text
        while True:
            j = text.find('"', self.pos)
            k = text.find("\\", self.pos)
            if j < 0:
                raise self.fail("unterminated string", start)
            if 0 <= k < j:
                out.append(text[self.pos : k])
                esc = text[k + 1 : k + 2]
                if esc == "u":
                    out.append(chr(int(text[k + 2 : k + 6], 16)))
                    self.pos = k + 6
                else:
                    out.append(_ESC.get(esc, esc))
                    self.pos = k + 2
                continue
            out.append(text[self.pos : j])
            self.pos = j + 1
            return "".join(out)

    def atom(self) -> Any:
        m = _ATOM.match(self.text, self.pos)
        if not m:
            raise self.fail(f"unexpected character {self.text[self.pos]!r}")
        self.pos = m.end()
        tok = m.group(0)
        if tok == "nil":
            return None
        if tok == "true":
            return True
        if tok == "false":
            return False
        if tok.startswith(":"):
            return tok[1:]
        if _INT.match(tok):
            return int(tok.rstrip("N"))
        if _FLOAT.match(tok):
            return float(tok.rstrip("M"))
        if tok.startswith("\\"):
            return tok[1:]
        return tok  # a symbol


def _hashable(x: Any) -> Any:
    if isinstance(x, list):
        return tuple(_hashable(i) for i in x)
    if isinstance(x, dict):
        return tuple(sorted((k, _hashable(v)) for k, v in x.items()))
    return x


def read_all(text: str, path: str | Path = "<string>") -> list[tuple[int, Any]]:
    """Every top-level form with the line it starts on."""
    r = _Reader(text, str(path))
    out: list[tuple[int, Any]] = []
    line, last = 1, 0
    while not r.at_end():
        line += text.count("\n", last, r.pos)
        last = r.pos
        out.append((line, r.form()))
    return out


def read_one(text: str, path: str | Path = "<string>") -> tuple[int, Any]:
    forms = read_all(text, path)
    if len(forms) != 1:
        raise HistoryError(path, 1, f"expected one EDN form, found {len(forms)}")
    return forms[0]


def read_elements(text: str, path: str | Path = "<string>") -> list[tuple[int, Any]]:
    """The elements of a history file with their lines: either one top-level vector/list of
    forms (Knossos data files) or a sequence of top-level forms (one op per line)."""
    r = _Reader(text, str(path))
    r.skip()
    if r.pos < len(text) and text[r.pos] in "([":
        opener = text[r.pos]
        start = r.pos
        r.pos += 1
        out: list[tuple[int, Any]] = []
        line, last = r.line(), r.pos
        while True:
            r.skip()
            if r.pos >= len(text):
                raise r.fail(f"unclosed {opener!r} opened here", start)
            if text[r.pos] == _CLOSE[opener]:
                r.pos += 1
                break
            line += text.count("\n", last, r.pos)
            last = r.pos
            out.append((line, r.form()))
        if not r.at_end():
            raise r.fail("unexpected forms after the history")
        return out
    return read_all(text, path)
