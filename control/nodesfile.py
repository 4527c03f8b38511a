"""The nodes file: the hosts of an SSH lab, one per line. `lab up --backend vagrant` writes the same
format from `vagrant ssh-config`.

    # NAME  HOST[:PORT]      USER     KEY                      [key=value …]
    n1      192.168.56.11    kraftlab ~/.ssh/id_ed25519        address=192.168.56.11
    n2      127.0.0.1:2200   vagrant  /path/to/private_key     address=192.168.56.12 workdir=/var/lib/kraftlab

Fields are separated by whitespace; `#` starts a comment; an IPv6 host with a port is written
`[::1]:2222`. PORT defaults to 22. Options: `address=` the IP the other nodes reach this host at
(default: HOST; differs when SSH goes through a forwarded port, as with Vagrant/VirtualBox),
`workdir=` the suite's directory on the host (default /var/lib/kraftlab), `known_hosts=` the
known_hosts file that verifies this host's key (default ~/.ssh/known_hosts), `venv=` a virtualenv
on the host that already has the project installed (deploy then installs nothing there; by default
deploy installs the project from wheels into WORKDIR/venv).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

DEFAULT_WORKDIR = "/var/lib/kraftlab"
OPTIONS = ("address", "workdir", "known_hosts", "venv")


@dataclass(frozen=True)
class NodeEntry:
    name: str
    host: str
    port: int
    user: str
    key: str
    options: dict[str, str] = field(default_factory=dict)

    @property
    def address(self) -> str:
        return self.options.get("address", self.host)

    @property
    def workdir(self) -> str:
        return self.options.get("workdir", DEFAULT_WORKDIR)

    @property
    def venv(self) -> str | None:
        return self.options.get("venv")

    @property
    def known_hosts(self) -> str:
        return self.options.get("known_hosts", os.path.expanduser("~/.ssh/known_hosts"))

    def line(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        opts = "".join(f" {k}={v}" for k, v in sorted(self.options.items()))
        return f"{self.name}\t{host}:{self.port}\t{self.user}\t{self.key}{opts}"


def split_host_port(text: str) -> tuple[str, int]:
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        return host, int(rest[1:]) if rest.startswith(":") else 22
    if text.count(":") == 1:
        host, port = text.split(":")
        return host, int(port)
    return text, 22


def parse(text: str, source: str = "nodes file") -> list[NodeEntry]:
    entries: list[NodeEntry] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        fields = line.split()
        if len(fields) < 4:
            raise ValueError(f"{source}:{number}: want NAME HOST[:PORT] USER KEY [key=value …], got {raw!r}")
        name, hostport, user, key, *rest = fields
        try:
            host, port = split_host_port(hostport)
        except ValueError:
            raise ValueError(f"{source}:{number}: bad HOST[:PORT] {hostport!r}") from None
        options: dict[str, str] = {}
        for opt in rest:
            k, sep, v = opt.partition("=")
            if not sep or k not in OPTIONS:
                raise ValueError(f"{source}:{number}: unknown option {opt!r} (known: {', '.join(OPTIONS)})")
            options[k] = os.path.expanduser(v) if k != "address" else v
        entries.append(NodeEntry(name, host, port, user, os.path.expanduser(key), options))
    names = [e.name for e in entries]
    if len(set(names)) != len(names):
        raise ValueError(f"{source}: duplicate node names")
    if not entries:
        raise ValueError(f"{source}: no nodes")
    return entries


def render(entries: list[NodeEntry]) -> str:
    header = "# NAME\tHOST[:PORT]\tUSER\tKEY\t[address=IP workdir=DIR known_hosts=FILE venv=DIR]\n"
    return header + "".join(e.line() + "\n" for e in entries)


def read(path: str) -> list[NodeEntry]:
    with open(path) as f:
        return parse(f.read(), path)


def from_ssh_config(text: str, addresses: dict[str, str] | None = None,
                    extra: dict[str, str] | None = None) -> list[NodeEntry]:
    """Entries from `vagrant ssh-config` output (Host blocks with HostName, Port, User,
    IdentityFile); `addresses` gives each node's private-network address."""
    entries: list[NodeEntry] = []
    block: dict[str, str] = {}

    def flush() -> None:
        if block:
            name = block["host"]
            options = dict(extra or {})
            if addresses and name in addresses:
                options["address"] = addresses[name]
            entries.append(NodeEntry(name, block.get("hostname", name), int(block.get("port", "22")),
                                     block.get("user", "vagrant"), block.get("identityfile", "").strip('"'), options))

    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        key, _, value = line.partition(" ")
        key = key.lower()
        if key == "host":
            flush()
            block = {"host": value.strip()}
        elif block and key not in block:  # the first IdentityFile wins, as in ssh
            block[key] = value.strip()
    flush()
    return entries
