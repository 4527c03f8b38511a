"""The `acl` model: the set of ACL bindings, changed by CreateAcls and DeleteAcls (docs/workload-ops.md).

A binding is a resource pattern (resource type, name, pattern type) and an entry (principal, host,
operation, permission), with Kafka's names. Keyed by binding: each binding's presence is its own
register (Kafka stores, creates and removes bindings one by one), which create and delete touch; a
`describe` (DescribeAcls of one resource pattern) and a `list` (of everything) are projected onto
one `present` read per binding they could have shown (the bindings the history names, and those
they listed), each at the read's interval. Sound, never a false alarm, but weaker: a read that
could only be a torn snapshot across bindings goes unseen. The search stays small with many
`info` writes (a fault run's timeouts), where one key per resource pattern would hold every
pending write of its twelve bindings at once. `keyed=False` (model `acl-whole`) checks the whole
set in one search.

- `create` ok or info: the binding is stored afterwards (Kafka acknowledges a binding already
  stored, so a create is a blind, idempotent write); a `fail` is a definite refusal, no effect.
- `delete` (exact filter) ok: its `deleted` list is exactly the binding if it was stored, empty if
  not; afterwards it is not stored. info: it may be removed.
- `describe`/`list` ok: the pattern's bindings are exactly those listed.
- `authorize` (a probe for the brokers' journalled decisions) is not a linearizability op.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from kraftlab.checker.history import Op
from kraftlab.checker.models import ILLEGAL, ModelError, Step, reads

PATTERN = ("resource_type", "resource_name", "pattern_type")
BINDING = (*PATTERN, "principal", "host", "operation", "permission")
Binding = tuple[str, ...]


def _binding(op: Op, b: Any) -> Binding:
    if not isinstance(b, Mapping) or any(f not in b for f in BINDING):
        raise ModelError(f"line {op.call_line}: {op.f}: an ACL binding needs {', '.join(BINDING)}; got {b!r}")
    return tuple(str(b[f]) for f in BINDING)


def _pattern(op: Op, v: Any) -> Binding:
    if not isinstance(v, Mapping) or any(f not in v for f in PATTERN):
        raise ModelError(f"line {op.call_line}: {op.f}: needs the resource pattern {', '.join(PATTERN)}; got {v!r}")
    return tuple(str(v[f]) for f in PATTERN)


def pattern_of(b: Binding) -> Binding:
    """The resource pattern (resource type, name, pattern type) of a binding: the model's key."""
    return b[:3]


def _listed(op: Op) -> frozenset[Binding]:
    out = op.output if isinstance(op.output, Mapping) else {}
    if "acls" not in out:
        raise ModelError(f"line {op.ret_line or op.call_line}: {op.f}: the completion needs 'acls'")
    return frozenset(_binding(op, b) for b in out["acls"])


def _words(b: Binding) -> str:
    return f"{b[6]} {b[3]}@{b[4]} {b[5]} on {b[0]} {b[2].lower()} {b[1]!r}"


@dataclass
class AclSet:
    """See the module docstring; `keyed=False` checks the whole set in one search."""

    name: str = "acl"
    keyed: bool = True

    def init(self) -> Hashable:
        return frozenset()

    def partition_key(self, op: Op) -> Hashable | None:
        if not self.keyed or op.f not in ("create", "delete", "present"):
            return None
        return _binding(op, op.value)

    def project(self, op: Op, keys: set[Hashable]) -> list[tuple[Hashable, Op]] | None:
        if not self.keyed or op.f not in ("list", "describe", "authorize"):
            return None
        if op.status != "ok" or op.f == "authorize":
            return []  # an unknown-outcome read observes nothing; a probe is judged elsewhere
        listed = _listed(op)
        pattern = _pattern(op, op.value) if op.f == "describe" else None
        known = {k for k in keys if isinstance(k, tuple) and len(k) == len(BINDING)}
        shown = sorted(b for b in known | listed if pattern is None or pattern_of(b) == pattern)
        return [(b, replace(op, f="present", value={**dict(zip(BINDING, b, strict=True)), "from": op.f},
                            output={"present": b in listed})) for b in shown]

    def describe_state(self, state: Any) -> str:
        return "ACLs: " + "; ".join(_words(b) for b in sorted(state)) if state else "no ACLs"

    def describe_op(self, op: Op) -> str:
        v = op.value if isinstance(op.value, Mapping) else {}
        if op.f in ("create", "delete") and all(f in v for f in BINDING):
            api = "CreateAcls" if op.f == "create" else "DeleteAcls"
            return f"{api} {_words(_binding(op, v))}"
        if op.f == "present" and all(f in v for f in BINDING):
            return f"DescribeAcls ({v.get('from', 'read')}) of {_words(_binding(op, v))}"
        if op.f == "describe" and all(f in v for f in PATTERN):
            return f"DescribeAcls {v['resource_type']} {str(v['pattern_type']).lower()} {v['resource_name']!r}"
        return f"{op.f}({op.value!r})"

    def prepare(self, op: Op) -> Step | None:
        if op.f == "authorize":
            return None
        if op.f == "list":
            if op.status != "ok":
                return None
            seen = _listed(op)
            return reads(lambda s: s if s == seen else ILLEGAL)
        if op.f == "present":
            b, there = _binding(op, op.value), bool((op.output or {}).get("present"))
            return reads(lambda s: s if (b in s) == there else ILLEGAL)
        if op.f == "describe":
            if op.status != "ok":
                return None
            key, seen = _pattern(op, op.value), _listed(op)
            return reads(lambda s: s if frozenset(b for b in s if pattern_of(b) == key) == seen else ILLEGAL)
        if op.f not in ("create", "delete"):
            raise ModelError(f"line {op.call_line}: acl ops are create, delete, describe, list, authorize, present")
        b = _binding(op, op.value)
        if op.status == "fail":
            return None
        if op.f == "create":
            return lambda s: s | {b}
        if op.status == "info":
            return lambda s: s - {b}
        deleted = frozenset(_deleted(op))
        return lambda s: s - {b} if deleted == (s & {b}) else ILLEGAL

    def why_not(self, state: Any, op: Op) -> str | None:
        if op.f == "delete" and op.status == "ok":
            b = _binding(op, op.value)
            gone = sorted(_deleted(op))
            if b in state:
                return f"the binding {_words(b)} was stored, yet DeleteAcls removed {[_words(x) for x in gone]}"
            return f"the binding {_words(b)} was not stored, yet DeleteAcls said it removed {[_words(x) for x in gone]}"
        if op.f == "present":
            b = _binding(op, op.value)
            there = bool((op.output or {}).get("present"))
            return (f"the {op.value.get('from', 'read')} showed {_words(b)} {'stored' if there else 'absent'}, but it "
                    f"was {'stored' if b in state else 'absent'}")
        if op.f in ("describe", "list") and op.status == "ok":
            seen = _listed(op)
            key = _pattern(op, op.value) if op.f == "describe" else None
            held = {b for b in state if key is None or pattern_of(b) == key}
            return (f"DescribeAcls showed {[_words(b) for b in sorted(seen)] or 'no ACLs'}, but the ACLs were "
                    f"{[_words(b) for b in sorted(held)] or 'none'}")
        return None


def _deleted(op: Op) -> Iterable[Binding]:
    out = op.output if isinstance(op.output, Mapping) else {}
    if "deleted" not in out:
        raise ModelError(f"line {op.ret_line or op.call_line}: delete: the completion needs 'deleted'")
    return [_binding(op, b) for b in out["deleted"]]
