"""What every host backed by a fixed record is called and where it keeps its files: the name, address
and workdir properties shared by the fake, namespace and container hosts (one implementation)."""

from __future__ import annotations


class HostIdentity:
    """The `Host` protocol's name, address and workdir, fixed at construction."""

    def __init__(self, name: str, address: str, workdir: str) -> None:
        self._name = name
        self._address = address
        self._workdir = workdir

    @property
    def name(self) -> str:
        return self._name

    @property
    def address(self) -> str:
        return self._address

    @property
    def workdir(self) -> str:
        return self._workdir

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._name!r}, {self._address!r})"
