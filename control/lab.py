"""A lab: the hosts of one cluster, with helpers that act on all (or some) of them in parallel."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from kraftlab.control.host import CommandResult, Host, HostError

T = TypeVar("T")


class Lab:
    """Named hosts n1…nN of one backend; `info` holds what the backend recorded about them."""

    def __init__(self, name: str, backend: str, hosts: Iterable[Host], info: dict[str, object] | None = None) -> None:
        self.name = name
        self.backend = backend
        self.hosts: list[Host] = list(hosts)
        self.info: dict[str, object] = dict(info or {})
        self._by_name = {h.name: h for h in self.hosts}
        if len(self._by_name) != len(self.hosts):
            raise ValueError(f"lab {name}: duplicate host names")

    @property
    def names(self) -> list[str]:
        return [h.name for h in self.hosts]

    def host(self, name: str) -> Host:
        try:
            return self._by_name[name]
        except KeyError:
            raise HostError(f"lab {self.name} has no host {name!r} (hosts: {', '.join(self.names)})") from None

    def addresses(self) -> dict[str, str]:
        return {h.name: h.address for h in self.hosts}

    def on(self, names: Iterable[str] | None, fn: Callable[[Host], T]) -> dict[str, T]:
        """Call `fn(host)` on the named hosts (all when None) in parallel; results by host name.
        If any call raises, every call still finishes, then one HostError names each failure."""
        hosts = self.hosts if names is None else [self.host(n) for n in names]
        if not hosts:
            return {}
        with ThreadPoolExecutor(max_workers=min(32, len(hosts))) as pool:
            futures = {h.name: pool.submit(fn, h) for h in hosts}
        results: dict[str, T] = {}
        errors: list[str] = []
        for name, fut in futures.items():
            exc = fut.exception()
            if exc is None:
                results[name] = fut.result()
            else:
                text = str(exc) or exc.__class__.__name__
                errors.append(text if text.startswith(f"{name}:") else f"{name}: {text}")
        if errors:
            raise HostError("; ".join(errors))
        return results

    def run(self, command: str, names: Iterable[str] | None = None, *, timeout: float = 60.0,
            check: bool = False) -> dict[str, CommandResult]:
        """Run one shell command on the named hosts (all when None) in parallel."""
        return self.on(names, lambda h: h.run(command, timeout=timeout, check=check))

    def close(self) -> None:
        for h in self.hosts:
            h.close()

    def __enter__(self) -> Lab:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
