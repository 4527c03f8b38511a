"""Sequential specifications (models) for the linearizability search.

A model turns each `Op` into a step: a function from a state to the next state, or `ILLEGAL`
when the op's observed output cannot happen in that state. States are hashable and compared
by value (the search memoises on them). `prepare` returns None for an op that must be left out
(a `fail` that is no observation, or a crashed op that cannot change the state). A model that
is a product of independent per-key models says so with `partition_key` (P-compositionality).
Explanations (checker.linear.explain) read a model through three more optional capabilities: it
declares how its ops read (`describe_op`, in Kafka's words for the project's models: checker.op_words;
`op_label` uses it), how its states read (`describe_state`, required), and why an op's observed
result cannot follow a state (`why_not`: the rule broken, the state before and what the op claimed
after). Two optional hooks extend the search (checker.linear.race.split uses them): `project(op, keys)` turns
an op that spans keys (a read of the whole set) into one op per key, each with that key's part
of what was observed; `cross_check(ops)` tests what little a keyed model still constrains across
keys (the registry's broker-epoch order) over the whole history.

The op formats are in docs/workload-ops.md.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass, replace
from typing import Any, Protocol

from kraftlab.checker import op_words
from kraftlab.checker.epoch_order import violation as epoch_order_violation
from kraftlab.checker.history import Op

ILLEGAL: Any = object()
"""A step's result when the op cannot be linearized in that state."""

Step = Callable[[Any], Any]


def reads(step: Step) -> Step:
    """Mark a step as read-only: in every state it either fails or leaves the state as it is.
    The search linearizes such completed ops as soon as they fit, and never reconsiders them."""
    step.read_only = True  # type: ignore[attr-defined]  # a mark on the function object, read by the search
    return step


class Model(Protocol):
    """A sequential specification: see the module docstring."""

    name: str

    def init(self) -> Hashable: ...

    def prepare(self, op: Op) -> Step | None: ...

    def partition_key(self, op: Op) -> Hashable | None:
        """The key this op touches, or None when the history cannot be split by key."""
        ...

    def describe_state(self, state: Any) -> str: ...


class ExplainsRefusals(Protocol):
    """Optional: a model that can say, in Kafka's words, why `op`'s observed result is impossible
    in `state` — the rule broken, the state before, and what the op claimed the state became
    after — for the explanations of a failure. None when it has nothing specific to say."""

    def why_not(self, state: Any, op: Op) -> str | None: ...


class DescribesOps(Protocol):
    """Optional: how the model's ops read — the request and the fields the model judges (Kafka's
    words for the project's models, checker.op_words). Without it, ops read `f(value) -> output`."""

    def describe_op(self, op: Op) -> str: ...


def op_label(model: Any, op: Op) -> str:
    """The op in one line, as the model that judges it says it (`describe_op`), with its process
    and outcome: `p3 AlterPartition t3-0 by broker 2000 (broker epoch 29) at partition epoch 5 …`."""
    return op.label(getattr(model, "describe_op", None))


class ModelError(ValueError):
    """An op the model does not understand (unknown f, malformed value)."""


def _freeze(v: Any) -> Any:
    if isinstance(v, list):
        return tuple(_freeze(x) for x in v)
    if isinstance(v, dict):
        return tuple(sorted((k, _freeze(x)) for k, x in v.items()))
    return v


def _bad(op: Op, why: str) -> ModelError:
    return ModelError(f"line {op.call_line}: {op.f}({op.value!r}): {why}")


# --- registers ---------------------------------------------------------------------------------


@dataclass
class CasRegister:
    """A single register: read, write, cas [old new] (etcd semantics).

    A `fail` cas with error `compare-mismatch` is kept as an observation that the register did
    not hold `old`; any other `fail` is dropped. With `nil_read_any` (Knossos semantics) an ok
    read of nil says nothing; otherwise nil means absent (the state None).
    """

    initial: Any = None
    nil_read_any: bool = False
    name: str = "cas-register"
    allow_cas: bool = True

    def init(self) -> Hashable:
        return _freeze(self.initial)

    def partition_key(self, op: Op) -> Hashable | None:
        return None

    def describe_state(self, state: Any) -> str:
        return "nil" if state is None else repr(state)

    def prepare(self, op: Op) -> Step | None:
        f = op.f
        if f == "read":
            if op.status != "ok":
                return None
            v = _freeze(op.output)
            if v is None and self.nil_read_any:
                return None
            return reads(lambda s: s if s == v else ILLEGAL)
        if f == "write":
            if op.status == "fail":
                return None
            w = _freeze(op.value)
            return lambda s: w
        if f == "cas" and self.allow_cas:
            if not isinstance(op.value, list | tuple) or len(op.value) != 2:
                raise _bad(op, "cas takes [old new]")
            old, new = _freeze(op.value[0]), _freeze(op.value[1])
            if op.status == "ok":
                return lambda s: new if s == old else ILLEGAL
            if op.status == "fail":
                if op.error != "compare-mismatch":
                    return None
                return reads(lambda s: s if s != old else ILLEGAL)
            return lambda s: new if s == old else s
        raise _bad(op, f"unknown f for {self.name}")


def Register(initial: Any = None, nil_read_any: bool = False) -> CasRegister:
    """A plain read/write register."""
    return CasRegister(initial, nil_read_any, "register", allow_cas=False)


@dataclass
class MultiRegister:
    """Knossos's multi-register: `txn` ops of [f k v] micro-ops (read/write) over named registers.

    Completed ops use the completion's micro-ops (with the values read); a read of nil says
    nothing. The state is a sorted tuple of (key, value).
    """

    initial: dict[str, Any] | None = None
    name: str = "multi-register"

    def init(self) -> Hashable:
        return tuple(sorted((self.initial or {}).items()))

    def partition_key(self, op: Op) -> Hashable | None:
        return None

    def describe_state(self, state: Any) -> str:
        return "{" + ", ".join(f"{k}={v}" for k, v in state) + "}"

    def prepare(self, op: Op) -> Step | None:
        if op.f != "txn":
            raise _bad(op, "multi-register ops are txn")
        if op.status == "fail":
            return None
        mops = op.output if op.status == "ok" and op.output is not None else op.value
        if any(f not in ("read", "write") for f, _, _ in mops):
            raise _bad(op, "micro-ops are read or write")
        if op.status != "ok" and not any(f == "write" for f, _, _ in mops):
            return None

        writes = any(f == "write" for f, _, _ in mops)

        def step(s: Any) -> Any:
            d = dict(s)
            for f, k, v in mops:
                if f == "write":
                    d[k] = v
                elif v is not None and d.get(k) != v:
                    return ILLEGAL
            return tuple(sorted(d.items())) if writes else s

        return step if writes else reads(step)


@dataclass
class Mutex:
    """A lock: acquire (must be free) and release (must be held)."""

    name: str = "mutex"

    def init(self) -> Hashable:
        return False

    def partition_key(self, op: Op) -> Hashable | None:
        return None

    def describe_state(self, state: Any) -> str:
        return "locked" if state else "unlocked"

    def prepare(self, op: Op) -> Step | None:
        if op.status == "fail":
            return None
        if op.f == "acquire":
            return lambda s: ILLEGAL if s else True
        if op.f == "release":
            return lambda s: False if s else ILLEGAL
        raise _bad(op, "mutex ops are acquire and release")


# --- key-value ----------------------------------------------------------------------------------


@dataclass
class Kv:
    """Porcupine's kv: get/put/append of strings per key; value {"key": k, "value": v}.

    Partitioned by key (the state is one key's string) unless `partitioned` is False (then the
    state is the whole map, as a tuple of values indexed by key slot; `init` is valid only
    after every op was prepared).
    """

    initial: str = ""
    partitioned: bool = True
    name: str = "kv"

    def __post_init__(self) -> None:
        self._slots: dict[Any, int] = {}

    def init(self) -> Hashable:
        return self.initial if self.partitioned else (self.initial,) * max(1, len(self._slots))

    def partition_key(self, op: Op) -> Hashable | None:
        return op.value["key"] if self.partitioned else None

    def describe_state(self, state: Any) -> str:
        if self.partitioned:
            return repr(state)
        keys = sorted(self._slots, key=self._slots.__getitem__)
        return ", ".join(f"{k}={state[i]!r}" for k, i in zip(keys, range(len(state)), strict=False)) or repr(state)

    def prepare(self, op: Op) -> Step | None:
        if not isinstance(op.value, dict) or "key" not in op.value:
            raise _bad(op, "kv ops carry {\"key\": k, \"value\": v}")
        if op.status == "fail":
            return None
        whole = not self.partitioned
        i = self._slots.setdefault(op.value["key"], len(self._slots)) if whole else 0
        if op.f == "get":
            if op.status != "ok":
                return None
            out = op.output["value"] if isinstance(op.output, dict) else op.output
            out = "" if out is None else out
            if whole:
                return reads(lambda s: s if s[i] == out else ILLEGAL)
            return reads(lambda s: s if s == out else ILLEGAL)
        v = op.value.get("value") or ""
        if op.f == "put":
            return (lambda s: (*s[:i], v, *s[i + 1 :])) if whole else (lambda s: v)
        if op.f == "append":
            return (lambda s: (*s[:i], s[i] + v, *s[i + 1 :])) if whole else (lambda s: s + v)
        raise _bad(op, "kv ops are get, put and append")


# --- the project's own models --------------------------------------------------------------------


@dataclass
class TopicSet:
    """The set of topics: create-if-absent, delete, describe, list (docs/workload-ops.md).

    Keyed by topic (each topic's presence is its own register: create, delete and describe
    touch one topic). A `list` reads the whole set at once; `project` turns it into one
    `describe` per topic (the topics the history names or the list shows), each at the list's
    interval. Sound — a history linearizable as a whole stays so per topic, so never a false
    alarm — but weaker: per topic the describes may take effect at different instants, so a
    list that could only be a torn snapshot (t1 already created and t2 not yet, against the real
    order) goes unseen. `keyed=False` (model `topics-whole`) checks the whole set instead.
    """

    initial: tuple[str, ...] = ()
    name: str = "topics"
    keyed: bool = True

    def init(self) -> Hashable:
        return frozenset(self.initial)  # per topic too: each op looks at its own topic only

    def partition_key(self, op: Op) -> Hashable | None:
        return None if op.f == "list" or not self.keyed else _field(op, "topic")

    def project(self, op: Op, keys: set[Hashable]) -> list[tuple[Hashable, Op]] | None:
        if not self.keyed or op.f != "list":
            return None
        if op.status != "ok":
            return []  # an unknown-outcome read observes nothing
        listed = {str(t) for t in _field(op, "topics", output=True)}
        topics = sorted({str(k) for k in keys} | listed | set(self.initial))
        return [(t, replace(op, f="describe", value={"topic": t, "from": "list"},
                            output={"topic": t, "exists": t in listed})) for t in topics]

    def describe_state(self, state: Any) -> str:
        return f"topics: {', '.join(sorted(state))}" if state else "no topics"

    def describe_op(self, op: Op) -> str:
        return op_words.topics(op)

    def prepare(self, op: Op) -> Step | None:
        if op.f == "list":
            if op.status != "ok":
                return None
            seen = frozenset(_field(op, "topics", output=True))
            return reads(lambda s: s if s == seen else ILLEGAL)
        t = _field(op, "topic")
        if op.f == "create":
            if op.status == "fail":
                if op.error != "TOPIC_ALREADY_EXISTS":
                    return None
                return reads(lambda s: s if t in s else ILLEGAL)
            if op.status == "info":
                return lambda s: s | {t}
            return lambda s: ILLEGAL if t in s else s | {t}
        if op.f == "delete":
            if op.status == "fail":
                if op.error != "UNKNOWN_TOPIC_OR_PARTITION":
                    return None
                return reads(lambda s: ILLEGAL if t in s else s)
            if op.status == "info":
                return lambda s: s - {t}
            return lambda s: s - {t} if t in s else ILLEGAL
        if op.f == "describe":
            if op.status == "fail":
                if op.error != "UNKNOWN_TOPIC_OR_PARTITION":
                    return None
                return reads(lambda s: ILLEGAL if t in s else s)
            if op.status != "ok":
                return None
            exists = bool(_field(op, "exists", output=True))
            return reads(lambda s: s if (t in s) == exists else ILLEGAL)
        raise _bad(op, "topic ops are create, delete, describe and list")

    def why_not(self, state: Any, op: Op) -> str | None:
        if op.f == "list":
            return f"the list showed {sorted(_field(op, 'topics', output=True))}, but the topics were {sorted(state)}"
        t = _field(op, "topic")
        there = t in state
        if op.f == "create" and op.status == "ok" and there:
            return f"CreateTopics {t} succeeded while {t} already existed: Kafka answers TOPIC_ALREADY_EXISTS"
        if op.f == "create" and op.status == "fail" and not there:
            return f"{t} did not exist, yet CreateTopics {t} was answered TOPIC_ALREADY_EXISTS"
        if op.f == "delete" and op.status == "ok" and not there:
            return f"DeleteTopics {t} succeeded though {t} did not exist: Kafka answers UNKNOWN_TOPIC_OR_PARTITION"
        if op.f in ("delete", "describe") and op.status == "fail" and there:
            return f"{t} existed, yet the {op.f} was answered UNKNOWN_TOPIC_OR_PARTITION"
        if op.f == "describe" and op.status == "ok":
            seen = bool(_field(op, "exists", output=True))
            return f"the read saw {t} {'present' if seen else 'absent'}, but it was {'present' if there else 'absent'}"
        return None


def _field(op: Op, name: str, output: bool = False) -> Any:
    src = op.output if output else op.value
    if not isinstance(src, dict) or name not in src:
        raise _bad(op, f"{'completion' if output else 'invocation'} value needs {name!r}")
    return src[name]


NO_EPOCH = -1


@dataclass
class BrokerRegistry:
    """Broker registrations: register, heartbeat, unregister, read (docs/workload-ops.md).

    State: (highest broker epoch issued, ((broker, epoch, incarnation), ...)). Broker epochs
    are metadata-log offsets, so every successful registration gets a larger one than any
    before. A crashed registration leaves the broker registered with an epoch not yet known,
    recorded as ("?", lower bound) and fixed by the first later observation of it. A retry of
    the incarnation already registered (the client re-sends after a lost answer) writes nothing
    and is answered with that registration's epoch — the one a crashed attempt took, if so.

    Keyed by broker id (P-compositionality): register, heartbeat and unregister name one broker,
    and one broker's registration, epoch and incarnation change only by its own ops. The state
    above is then one broker's, its top epoch that broker's highest — the per-broker part of
    "epochs only grow". The part that spans brokers (epochs are issued in increasing order over
    all brokers) is `cross_check`, checker.epoch_order, over the whole history. A read of the
    whole set ({"brokers": {...}}) is projected to one read per broker (the brokers the history
    names or the read shows): "b at epoch e", or "b not registered"; an {"unfenced": [...]} read
    to "b is registered" for each listed b. The projections are sound (a history linearizable as
    a whole stays so per broker: never a false alarm) but weaker: they drop the read's
    atomicity across brokers, so a torn snapshot of several brokers goes unseen.
    `keyed=False` (model `registry-whole`) checks everything in one search instead.
    """

    name: str = "registry"
    keyed: bool = True

    def init(self) -> Hashable:
        return (NO_EPOCH, ())

    def partition_key(self, op: Op) -> Hashable | None:
        return None if op.f == "read" or not self.keyed else int(_field(op, "broker"))

    def project(self, op: Op, keys: set[Hashable]) -> list[tuple[Hashable, Op]] | None:
        if not self.keyed or op.f != "read":
            return None
        out = op.output if isinstance(op.output, dict) else {}
        if op.status != "ok" or ("brokers" not in out and "unfenced" not in out):
            return []  # observes nothing (prepare drops it too)
        if "brokers" not in out:
            return [(b, replace(op, output={"unfenced": [b]})) for b in sorted({int(x) for x in out["unfenced"]})]
        seen = {int(b): e for b, e in out["brokers"].items()}
        return [(b, replace(op, output={"brokers": {str(b): seen[b]} if b in seen else {}}))
                for b in sorted({int(k) for k in keys} | set(seen))]  # type: ignore[call-overload]  # keys: broker ids

    def cross_check(self, ops: list[Op]) -> tuple[str, list[Op]] | None:
        return epoch_order_violation(ops) if self.keyed else None

    def describe_state(self, state: Any) -> str:
        top, regs = state
        body = "; ".join(f"broker {b} at broker epoch {_ep(e)} (incarnation {str(inc)[:8]})" for b, e, inc in regs)
        issued = "none issued yet" if top == NO_EPOCH else f"the highest issued {top}"
        return f"{body or 'no broker registered'} — broker epochs: {issued}"

    def describe_op(self, op: Op) -> str:
        return op_words.registry(op)

    def why_not(self, state: Any, op: Op) -> str | None:
        return None if op.f == "read" else _registry_why_not(state, op)

    def prepare(self, op: Op) -> Step | None:
        f, st, err = op.f, op.status, op.error
        if f == "read":
            out = op.output if isinstance(op.output, dict) else {}
            if st != "ok" or ("brokers" not in out and "unfenced" not in out):
                return None
            if "brokers" not in out:  # only the unfenced ones: each of them must be registered
                live = {int(b) for b in out["unfenced"]}
                return reads(lambda s: s if live <= {b for b, _, _ in s[1]} else ILLEGAL)
            seen = {int(b): e for b, e in out["brokers"].items()}
            return lambda s: _observe_all(s, seen)
        b = int(_field(op, "broker"))
        if f == "register":
            inc = _field(op, "incarnation")
            if st == "fail":
                if err != "DUPLICATE_BROKER_REGISTRATION":
                    return None
                return reads(lambda s: s if any(x == b and i != inc for x, _, i in s[1]) else ILLEGAL)
            if st == "info":
                # a retry of the registered incarnation changes nothing; else a new epoch, not yet known
                return lambda s: s if _incarnation_of(s, b) == inc else _set(s, b, ("?", s[0]), inc)
            ep = int(_field(op, "epoch", output=True))

            def register(s: Any) -> Any:
                if _incarnation_of(s, b) == inc:
                    # a retry of the registered incarnation gets its epoch again (never a new one,
                    # KAFKA-16952); an earlier attempt that crashed may have taken that epoch
                    return _observe(s, b, ep)
                return _set((ep, s[1]), b, ep, inc) if ep > s[0] else ILLEGAL

            return register
        if f == "heartbeat":
            ep = int(_field(op, "epoch"))
            if st == "fail":
                if err != "STALE_BROKER_EPOCH":
                    return None
                return reads(lambda s: ILLEGAL if _epoch_of(s, b) == ep else s)
            if st != "ok":
                return None
            return lambda s: _observe(s, b, ep)
        if f == "unregister":
            if st == "fail":
                if err != "BROKER_ID_NOT_REGISTERED":
                    return None
                return reads(lambda s: ILLEGAL if _epoch_of(s, b) is not None else s)
            if st == "info":
                return lambda s: (s[0], tuple(r for r in s[1] if r[0] != b))
            return lambda s: (s[0], tuple(r for r in s[1] if r[0] != b)) if _epoch_of(s, b) is not None else ILLEGAL
        raise _bad(op, "registry ops are register, heartbeat, unregister and read")


def _ep(e: Any) -> str:
    return f"not yet known (above {e[1]}: its registration's answer was lost)" if isinstance(e, tuple) else str(e)


def _registry_why_not(state: Any, op: Op) -> str | None:
    top, _ = state
    b = int(_field(op, "broker"))
    cur = _epoch_of(state, b)
    where = f"broker {b} was {'not registered' if cur is None else f'at broker epoch {_ep(cur)}'}"
    if op.f == "heartbeat":
        ep = int(_field(op, "epoch"))
        if op.status == "ok":
            return f"a heartbeat at broker epoch {ep} was accepted while {where}: Kafka answers STALE_BROKER_EPOCH"
        return f"a heartbeat at broker epoch {ep} was refused STALE_BROKER_EPOCH, yet {where}"
    if op.f == "register" and op.status == "ok":
        ep = int(_field(op, "epoch", output=True))
        return (f"the registration got broker epoch {ep}, not above the highest issued before it ({_ep(top)}): "
                f"broker epochs are metadata-log offsets, which only grow ({where})")
    if op.f == "register":
        return f"DUPLICATE_BROKER_REGISTRATION, yet no other incarnation of broker {b} was registered ({where})"
    if op.f == "unregister":
        return f"the unregistration's answer does not fit: {where}"
    return None


def _incarnation_of(s: Any, b: int) -> Any:
    for x, _, inc in s[1]:
        if x == b:
            return inc
    return None


def _epoch_of(s: Any, b: int) -> Any:
    for x, e, _ in s[1]:
        if x == b:
            return e
    return None


# A registry state's broker epoch: an issued one, or ("?", the highest issued before it) for one not yet known.
RegistryEpoch = int | tuple[str, int]


def _set(s: Any, b: int, ep: RegistryEpoch, inc: Any) -> Any:
    regs = tuple(sorted([r for r in s[1] if r[0] != b] + [(b, ep, inc)]))
    return (s[0], regs)


def _observe(s: Any, b: int, ep: int) -> Any:
    """Broker b is registered with epoch ep: check it, or fix an unknown epoch to ep."""
    for x, e, inc in s[1]:
        if x != b:
            continue
        if e == ep:
            return s
        if isinstance(e, tuple) and ep > e[1]:
            return _set((max(s[0], ep), s[1]), b, ep, inc)
        return ILLEGAL
    return ILLEGAL


def _observe_all(s: Any, seen: dict[int, int]) -> Any:
    if {b for b, _, _ in s[1]} != set(seen):
        return ILLEGAL
    for b, ep in seen.items():
        s = _observe(s, b, int(ep))
        if s is ILLEGAL:
            return ILLEGAL
    return s


@dataclass
class PartitionState:
    """Per-partition state changed by AlterPartition: a compare-and-set on the partition epoch.

    State per partition: None (not yet seen) or (partition_epoch, leader_epoch, leader, isr).
    The controller may also change a partition on its own (fencing, elections), so a read or an
    alter may show a *higher* partition epoch than the model's state; never a lower one, and an
    equal epoch must show the same state. An alter succeeds only if its expected epochs are not
    behind the state, and installs the state it returned.
    """

    name: str = "isr"

    def init(self) -> Hashable:
        return None

    def partition_key(self, op: Op) -> Hashable | None:
        return (_field(op, "topic"), int(_field(op, "partition")))

    def describe_state(self, state: Any) -> str:
        if state is None:
            return "not yet seen"
        pe, le, leader, isr = state
        return f"partition epoch {pe}, leader {leader} at leader epoch {le}, ISR {list(isr)}"

    def describe_op(self, op: Op) -> str:
        return op_words.isr(op)

    def prepare(self, op: Op) -> Step | None:
        if op.status != "ok":
            return None
        if op.f == "read":
            out = op.output if isinstance(op.output, dict) else {}
            if "partition_epoch" not in out:  # Metadata has no partition epoch: a leader epoch at most
                if not out.get("exists", True) or out.get("leader_epoch") is None:
                    return None
                le = int(out["leader_epoch"])
                return reads(lambda s: s if s is None or le >= s[1] else ILLEGAL)
            seen = _pstate(op.output, op)
            return lambda s: seen if _may_move(s, seen) else ILLEGAL
        if op.f == "alter":
            want_pe = int(_field(op, "partition_epoch"))
            want_le = int(_field(op, "leader_epoch"))
            new = _pstate({"leader": _field(op, "leader"), **op.output}, op)

            def step(s: Any) -> Any:
                if s is not None and (want_pe < s[0] or want_le < s[1]):
                    return ILLEGAL
                if new[0] > want_pe:
                    return new
                # a no-op (the ISR asked for is the current one): Kafka answers with the current
                # state and the same partition epoch, changing nothing. The state it shows is the
                # model's, or one the controller moved to on its own (fencing, elections) at that
                # epoch, unseen until now.
                if new[0] == want_pe and (s is None or s == new or s[0] < want_pe):
                    return new
                return ILLEGAL

            return step
        raise _bad(op, "isr ops are alter and read")

    def why_not(self, state: Any, op: Op) -> str | None:
        if state is None or op.status != "ok":
            return None
        pe, le = state[0], state[1]
        now = f"the partition was at {self.describe_state(state)}"
        if op.f == "alter":
            want_pe, want_le = int(_field(op, "partition_epoch")), int(_field(op, "leader_epoch"))
            got = _pstate({"leader": _field(op, "leader"), **op.output}, op)
            after = f"; it was answered {self.describe_state(got)}"
            if want_pe < pe:
                return (f"AlterPartition was accepted at partition epoch {want_pe} while {now} — Kafka answers "
                        f"INVALID_UPDATE_VERSION{after}")
            if want_le < le:
                return (f"AlterPartition was accepted at leader epoch {want_le} while {now} — Kafka answers "
                        f"FENCED_LEADER_EPOCH{after}")
            if got[0] == pe:
                return (f"a no-op AlterPartition at partition epoch {pe} was answered ISR {list(got[3])} while {now}: "
                        "one partition epoch names one state")
            return (f"AlterPartition at partition epoch {want_pe} was answered partition epoch {got[0]}, which does "
                    f"not follow from the state before ({now}): an accepted change bumps the partition epoch")
        if op.f == "read" and isinstance(op.output, dict) and "partition_epoch" in op.output:
            got = _pstate(op.output, op)
            rule = ("the partition epoch never goes back" if got[0] < pe else "the leader epoch never goes back"
                    if got[1] < le else "one partition epoch names one state")
            return f"the read showed {self.describe_state(got)} while {now}: {rule}"
        if op.f == "read" and isinstance(op.output, dict) and op.output.get("leader_epoch") is not None:
            return (f"the read showed leader epoch {op.output['leader_epoch']} while {now}: the leader epoch never "
                    "goes back")
        return None


def _pstate(v: Any, op: Op) -> tuple[int, int, Any, tuple[int, ...]]:
    if not isinstance(v, dict):
        raise _bad(op, "completion value must be an object")
    try:
        return (int(v["partition_epoch"]), int(v["leader_epoch"]), v.get("leader"), tuple(sorted(v["isr"])))
    except (KeyError, TypeError, ValueError) as exc:
        raise _bad(op, f"completion value needs partition_epoch, leader_epoch, isr ({exc})") from None


def _may_move(s: Any, seen: Any) -> bool:
    if s is None or seen == s:
        return True
    return bool(seen[0] > s[0] and seen[1] >= s[1])


# --- lookup -------------------------------------------------------------------------------------

MODELS = ("register", "cas-register", "kv", "kv-whole", "multi-register", "mutex", "topics", "topics-whole", "registry",
          "registry-whole", "isr", "acl", "acl-whole")


def build_model(name: str, initial: Any = None, nil_read_any: bool = False) -> Model:
    """A model by name; `initial` overrides its initial state."""
    if name == "register":
        return Register(initial, nil_read_any)
    if name == "cas-register":
        return CasRegister(initial, nil_read_any)
    if name in ("kv", "kv-whole"):
        return Kv("" if initial is None else initial, partitioned=name == "kv")
    if name == "multi-register":
        return MultiRegister(initial)
    if name == "mutex":
        return Mutex()
    if name in ("topics", "topics-whole"):
        return TopicSet(tuple(initial or ()), keyed=name == "topics")
    if name in ("registry", "registry-whole"):
        return BrokerRegistry(keyed=name == "registry")
    if name == "isr":
        return PartitionState()
    if name in ("acl", "acl-whole"):
        from kraftlab.checker.acl_model import AclSet  # it builds on this module's steps

        return AclSet(keyed=name == "acl")
    raise ValueError(f"unknown model {name!r}; one of {', '.join(MODELS)}")
