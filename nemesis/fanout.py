"""Run one action per host in parallel and collect each host's result or error."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")
K = TypeVar("K")


@dataclass(frozen=True, slots=True)
class Outcome(Generic[T]):
    value: T | None
    error: str | None

    @property
    def ok(self) -> bool:
        return self.error is None


def fan_out(items: Mapping[K, Callable[[], T]]) -> dict[K, Outcome[T]]:
    """Call every thunk, concurrently when there is more than one; never raises."""

    def call(thunk: Callable[[], T]) -> Outcome[T]:
        try:
            return Outcome(thunk(), None)
        except Exception as exc:  # one host's failure must not stop the others
            return Outcome(None, f"{type(exc).__name__}: {exc}")

    if len(items) <= 1:
        return {k: call(t) for k, t in items.items()}
    with ThreadPoolExecutor(max_workers=min(16, len(items))) as pool:
        futures = {k: pool.submit(call, t) for k, t in items.items()}
        return {k: f.result() for k, f in futures.items()}


def errors(outcomes: Mapping[K, Outcome[T]]) -> dict[K, str]:
    return {k: o.error for k, o in outcomes.items() if o.error is not None}
