"""Killable checking: each checker in its own process, under a hard wall-clock limit and an
optional memory limit (the `Processes` runner of checker.compose).

A child puts itself in its own process group (so the worker processes a linearizability check
forks go with it), sets `RLIMIT_AS` when a memory limit is given, runs its checker and sends the
result back over a pipe. The parent waits for every pipe until the deadline; then each child
still running is killed with its whole group and reported `unknown`, naming the checker and the
limit. A child that crashes sends its traceback (`unknown`); one that runs out of memory under
the limit reports that; one that dies without a word (killed, out of memory) is `unknown` with
its exit status.

Children are forked when this process has a single thread (cheap, nothing to pickle); with other
threads running (Spark's, a benchmark's sampler) a fork could inherit a lock some thread held, so
the "forkserver" context is used and the checker must be picklable — one that is not (a lambda)
runs in a thread of this process instead, with a note that no limit can stop it. Pickling is not
free: a 10-minute run's history and journals take tens of seconds each, so callers should check
from a single thread where they can (the runner does: its threads are joined by then).
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import functools
import json
import logging
import multiprocessing
import multiprocessing.connection as mpc
import os
import pickle
import resource
import signal
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kraftlab.checker.compose import UNKNOWN, CheckerFn, InThreads, Limits, run_one, timed_out

log = logging.getLogger(__name__)

PRELOAD = ["kraftlab.checker.run"]
"""Modules the forkserver imports once, so its children start with the checkers loaded."""


def _single_threaded() -> bool:
    return threading.current_thread() is threading.main_thread() and threading.active_count() == 1


def _out_of_memory(name: str, memory_bytes: int | None) -> dict[str, Any]:
    limit = f"its memory limit of {memory_bytes // 1_000_000} MB" if memory_bytes else "the memory available"
    return {"valid": UNKNOWN, "explanation": f"checker {name!r} ran out of memory under {limit} (MemoryError)",
            "limit": {"memory_bytes": memory_bytes}}


def _guarded(fn: CheckerFn, name: str, memory_bytes: int | None) -> dict[str, Any]:
    try:
        return fn()
    except MemoryError:
        return _out_of_memory(name, memory_bytes)


def _child(name: str, fn: CheckerFn, conn: Any, memory_bytes: int | None) -> None:
    """The body of a checker's process."""
    with contextlib.suppress(OSError):
        os.setpgid(0, 0)
    if memory_bytes:
        _soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, hard))
    res = run_one(functools.partial(_guarded, fn, name, memory_bytes))
    try:
        conn.send(res)
    except Exception:  # a result that does not pickle still carries its verdict
        conn.send(json.loads(json.dumps(res, default=str)))
    conn.close()


def _kill_group(proc: Any) -> None:
    """SIGKILL the child's process group (it and the workers it forked), or the child alone."""
    if proc.pid is None:
        return
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        with contextlib.suppress(OSError):
            proc.kill()


@dataclass
class _Child:
    name: str
    proc: Any
    conn: Any


@dataclass
class Processes:
    """Each checker in its own process; see the module docstring. `context` forces a start
    method ("fork" or "forkserver"); by default fork when single-threaded, else forkserver."""

    context: str | None = None

    def run(self, checkers: Mapping[str, CheckerFn], limits: Limits) -> dict[str, dict[str, Any]]:
        method = self.context or ("fork" if _single_threaded() else "forkserver")
        ctx = multiprocessing.get_context(method)
        if method == "forkserver":
            ctx.set_forkserver_preload(PRELOAD)
            if self.context is None:
                log.info("checkers go to a forkserver (their inputs are pickled): other threads are running: %s",
                         ", ".join(t.name for t in threading.enumerate() if t is not threading.current_thread()))
        deadline = None if limits.seconds is None else time.monotonic() + limits.seconds
        results: dict[str, dict[str, Any]] = {}
        children: list[_Child] = []
        in_process: dict[str, CheckerFn] = {}
        try:
            for name, fn in checkers.items():
                child = self._start(ctx, name, fn, limits.memory_bytes)
                if child is None:
                    in_process[name] = fn
                else:
                    children.append(child)
            threaded = self._threads(in_process, limits)
            self._collect(children, deadline, limits, results)
            if threaded is not None:
                results.update(threaded.result())
        finally:
            for c in children:
                if c.name not in results:
                    results[c.name] = timed_out(c.name, limits.seconds, "killed with its worker processes")
                _kill_group(c.proc)  # also the workers a finished child may have left behind
                c.proc.join(5)
                c.conn.close()
        return results

    @staticmethod
    def _start(ctx: Any, name: str, fn: CheckerFn, memory_bytes: int | None) -> _Child | None:
        reader, writer = ctx.Pipe(duplex=False)
        proc = ctx.Process(target=_child, args=(name, fn, writer, memory_bytes), name=f"checker-{name}")
        try:
            proc.start()
        except (pickle.PicklingError, AttributeError, TypeError):  # not picklable for the forkserver
            reader.close()
            writer.close()
            return None
        writer.close()
        return _Child(name, proc, reader)

    @staticmethod
    def _threads(checkers: dict[str, CheckerFn], limits: Limits) -> cf.Future[dict[str, dict[str, Any]]] | None:
        """Run the checkers that could not get a process in threads, alongside the children."""
        if not checkers:
            return None
        note = "ran in a thread of the checking process (not picklable), so no limit could stop it"

        def go() -> dict[str, dict[str, Any]]:
            out = InThreads().run(checkers, Limits(limits.seconds))
            for res in out.values():
                res.setdefault("notes", []).append(note)
            return out

        pool = cf.ThreadPoolExecutor(1, thread_name_prefix="checker-threads")
        fut = pool.submit(go)
        pool.shutdown(wait=False)
        return fut

    @staticmethod
    def _collect(children: list[_Child], deadline: float | None, limits: Limits,
                 results: dict[str, dict[str, Any]]) -> None:
        pending = {c.conn: c for c in children}
        by_sentinel = {c.proc.sentinel: c for c in children}
        while pending:
            timeout = None if deadline is None else deadline - time.monotonic()
            if timeout is not None and timeout <= 0:
                return
            waiting = list(pending) + [s for s, c in by_sentinel.items() if c.conn in pending]
            for obj in mpc.wait(waiting, timeout):
                c = pending.get(obj) or by_sentinel[obj]
                if c.conn not in pending:
                    continue
                res = _receive(c, limits)
                if res is not None:
                    results[c.name] = res
                    del pending[c.conn]


def _receive(c: _Child, limits: Limits) -> dict[str, Any] | None:
    """The child's result if it sent one; `unknown` if it died without; None if it is still at work."""
    try:
        if c.conn.poll():
            res: dict[str, Any] = c.conn.recv()
            return res
    except (EOFError, OSError):  # the pipe closed without a result: the child is dying
        c.proc.join(5)
    if c.proc.is_alive():
        return None
    c.proc.join()
    code = c.proc.exitcode
    how = f"killed by signal {-code}" if code is not None and code < 0 else f"exit status {code}"
    expl = f"checker {c.name!r} died without a verdict ({how})"
    if limits.memory_bytes:
        expl += f"; its memory limit was {limits.memory_bytes // 1_000_000} MB"
    return {"valid": UNKNOWN, "explanation": expl}
