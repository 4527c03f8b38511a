"""Runs a generator with concurrent client processes and records every op in the history.

Worker `w` is bound to node `nodes[w % len(nodes)]` and starts as a fresh process number. Each
invocation is recorded before it is sent and its completion after; a call that times out or
raises anything but `DefiniteFailure` completes as `info`, and the worker's process is retired:
it continues as a process number never used before, on a fresh client (Jepsen's rule: a process
with an op in doubt never issues another). Numbers come from one `ProcessIds` per test, so
phases never reuse a process.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from kraftlab.checker.history import Completion
from kraftlab.workloads.client import Client, ClientFactory, DefiniteFailure, Invocation
from kraftlab.workloads.generator import Context, Generator, Sleep
from kraftlab.workloads.history import HistoryWriter


class ProcessIds:
    """Hands out client process numbers, never the same twice in a test."""

    def __init__(self) -> None:
        self._next = 0

    def fresh(self) -> int:
        self._next += 1
        return self._next - 1


@dataclass
class PhaseStats:
    ok: int = 0
    fail: int = 0
    info: int = 0
    by_f: dict[str, dict[str, int]] = field(default_factory=dict)

    def count(self, f: str, type_: str) -> None:
        setattr(self, type_, getattr(self, type_) + 1)
        per = self.by_f.setdefault(f, {"ok": 0, "fail": 0, "info": 0})
        per[type_] += 1


async def invoke_once(client: Client, op: Invocation, timeout: float) -> Completion:
    """Jepsen's mapping of one call to a completion."""
    try:
        return await asyncio.wait_for(client.invoke(op), timeout)
    except DefiniteFailure as e:
        return Completion("fail", e.value, e.error)
    except TimeoutError:
        return Completion("info", None, "timeout")
    except asyncio.CancelledError:
        raise
    except Exception as e:  # connection lost, protocol error: the op may have taken effect
        return Completion("info", None, f"{type(e).__name__}: {e}")


async def run_phase(
    gen: Generator,
    factory: ClientFactory,
    history: HistoryWriter,
    processes: ProcessIds,
    *,
    nodes: Sequence[str],
    concurrency: int,
    rng: random.Random,
    op_timeout: float = 5.0,
    stats: PhaseStats | None = None,
    stop: asyncio.Event | None = None,
) -> PhaseStats:
    """Run `gen` to exhaustion (or until `stop` is set) with `concurrency` workers."""
    stats = stats if stats is not None else PhaseStats()
    started = time.monotonic()

    async def worker(w: int) -> None:
        node = nodes[w % len(nodes)]
        process = processes.fresh()
        client: Client | None = None
        wrng = random.Random(rng.random())
        try:
            while stop is None or not stop.is_set():
                ctx = Context(time=time.monotonic() - started, process=process, worker=w, node=node,
                              nodes=nodes, rng=wrng)
                ans = gen.next_op(ctx)
                if ans is None:
                    return
                if isinstance(ans, Sleep):
                    await asyncio.sleep(max(ans.seconds, 0.001))
                    continue
                extra = dict(ans.extra or {})
                if client is None:
                    try:
                        client = await asyncio.wait_for(factory.open(node, process), op_timeout)
                    except Exception as e:
                        # Could not even connect: nothing was sent, so the op definitely failed.
                        history.record(process, "invoke", ans.f, ans.value, node=node, **extra)
                        history.record(process, "fail", ans.f, ans.value, node=node,
                                       error=f"connect: {type(e).__name__}: {e}", **extra)
                        stats.count(ans.f, "fail")
                        await asyncio.sleep(0.1)
                        continue
                history.record(process, "invoke", ans.f, ans.value, node=node, **extra)
                done = await invoke_once(client, ans, op_timeout)
                history.record(process, done.type, ans.f, done.value, node=node, error=done.error, **extra)
                stats.count(ans.f, done.type)
                if done.type == "info":
                    with contextlib.suppress(Exception):
                        await client.close()
                    client = None
                    process = processes.fresh()
        finally:
            if client is not None:
                with contextlib.suppress(Exception):
                    await client.close()

    await asyncio.gather(*(worker(w) for w in range(concurrency)))
    return stats
