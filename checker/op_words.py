"""Kafka's words for the workload ops (docs/workload-ops.md): how an op reads in an explanation.

Each function turns one op into the request it stands for, with the fields the model judges and,
for an `ok` op, what came back — "AlterPartition t3-0 by broker 2000 (broker epoch 29) at partition
epoch 5, leader epoch 1: ISR → [2000] ⇒ partition epoch 6, …" instead of a truncated dict. The
models (checker.models) declare which one labels their ops (`describe_op`); `Op.label` adds the
process and the outcome. A value not of the workload's shape raises KeyError, TypeError or
ValueError, and `Op.label` falls back to the generic `f(value) -> output`.
"""

from __future__ import annotations

from typing import Any

from kraftlab.checker.history import Op, short

MAX_OFFSET = 2**62
"""A heartbeat's metadata offset at or above this is Kafka's "not caught up yet" sentinel."""


def _value(op: Op) -> dict[str, Any]:
    if not isinstance(op.value, dict):
        raise TypeError("not a workload op")
    return op.value


def _answer(op: Op) -> dict[str, Any] | None:
    return op.output if op.status == "ok" and isinstance(op.output, dict) else None


def alter_partition(op: Op) -> str:
    """AlterPartition: the partition, the sender and its broker epoch, the epochs it expects, the
    ISR it asks for; the partition state it was answered with."""
    v, out = _value(op), _answer(op)
    got = ""
    if out is not None and "partition_epoch" in out:
        got = (f" ⇒ partition epoch {out['partition_epoch']}, leader epoch {out.get('leader_epoch')}, "
               f"ISR {out.get('isr')}")
    sender = f"broker {v['leader']}" + (f" (broker epoch {v['broker_epoch']})" if "broker_epoch" in v else "")
    return (f"AlterPartition {v['topic']}-{v['partition']} by {sender} at partition epoch {v['partition_epoch']}, "
            f"leader epoch {v['leader_epoch']}: ISR → {v['isr']}{got}")


def partition_read(op: Op) -> str:
    """A read of one partition's state (Metadata, or the controller's view)."""
    v, out = _value(op), _answer(op)
    got = ""
    if out is not None and "partition_epoch" in out:
        got = (f" ⇒ partition epoch {out['partition_epoch']}, leader {out.get('leader')} at leader epoch "
               f"{out.get('leader_epoch')}, ISR {out.get('isr')}")
    elif out is not None:
        got = f" ⇒ {short(out, 80)}"
    return f"read {v['topic']}-{v['partition']}{_where(v)}{got}"


def registration(op: Op) -> str:
    v, out = _value(op), _answer(op)
    retry = f" (re-sent: {v['retry']})" if v.get("retry") else ""
    got = f" ⇒ broker epoch {out['epoch']}" if out is not None and "epoch" in out else ""
    return f"BrokerRegistration broker {v['broker']} incarnation {str(v['incarnation'])[:8]}{retry}{got}"


def heartbeat(op: Op) -> str:
    v, out = _value(op), _answer(op)
    asks = [w for w, k in (("fence", "want_fence"), ("shut down", "want_shut_down")) if v.get(k)]
    offset = v.get("offset")
    at = "" if offset is None or int(offset) >= MAX_OFFSET else f", metadata offset {offset}"
    got = ""
    if out is not None and "fenced" in out:
        got = f" ⇒ {'fenced' if out['fenced'] else 'unfenced'}" + (", shut down" if out.get("should_shut_down") else "")
    zombie = " (a zombie's)" if v.get("zombie") else ""
    return (f"BrokerHeartbeat broker {v['broker']} at broker epoch {v['epoch']}{at}"
            f"{' asking to ' + ' and '.join(asks) if asks else ''}{zombie}{got}")


def unregistration(op: Op) -> str:
    return f"UnregisterBroker broker {_value(op)['broker']}"


def registry_read(op: Op) -> str:
    """A read of the registered brokers: every one with its epoch, or the unfenced ones."""
    v = op.value if isinstance(op.value, dict) else {}
    out = _answer(op)
    got = ""
    if out is not None and "brokers" in out:
        regs = ", ".join(f"{b} at broker epoch {e}" for b, e in sorted(out["brokers"].items(), key=lambda x: int(x[0])))
        got = f" ⇒ registered: {regs or 'none'}"
    elif out is not None and "unfenced" in out:
        got = f" ⇒ unfenced: {sorted(int(b) for b in out['unfenced']) or 'none'}"
    return f"read the registered brokers{_where(v)}{got}"


def topic_change(op: Op) -> str:
    v = _value(op)
    api = {"create": "CreateTopics", "delete": "DeleteTopics"}[op.f]
    via = " (to the controller)" if v.get("via") == "controller" else ""
    return f"{api} {v['topic']}{via}"


def topic_read(op: Op) -> str:
    """describe (Metadata of one topic, or one topic's part of a list) and list (every topic)."""
    v = op.value if isinstance(op.value, dict) else {}
    out = _answer(op)
    part = f" (one topic of a {v['from']})" if v.get("from") else ""
    if op.f == "list":
        got = f" ⇒ {sorted(out['topics'])}" if out is not None and "topics" in out else ""
        return f"list every topic{_where(v)}{got}"
    got = ""
    if out is not None and "exists" in out:
        got = f" ⇒ {'exists' if out['exists'] else 'absent'}"
    return f"describe {v['topic']}{_where(v)}{part}{got}"


def _where(v: dict[str, Any]) -> str:
    node = f" on {v['node']}" if v.get("node") else ""
    return node + (" (final)" if v.get("final") else "")


def topics(op: Op) -> str:
    """The topics workload's ops."""
    return topic_change(op) if op.f in ("create", "delete") else topic_read(op)


def registry(op: Op) -> str:
    """The registry workload's ops."""
    fn = {"register": registration, "heartbeat": heartbeat, "unregister": unregistration}.get(op.f, registry_read)
    return fn(op)


def isr(op: Op) -> str:
    """The isr workload's ops."""
    return alter_partition(op) if op.f == "alter" else partition_read(op)
