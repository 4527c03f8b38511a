"""The nodes file format, and the one `lab up --backend vagrant` writes from `vagrant ssh-config`."""

from __future__ import annotations

from pathlib import Path

import pytest

from kraftlab.control.nodesfile import NodeEntry, from_ssh_config, parse, render
from kraftlab.control.vagrant import nodes_from_ssh_config

RECORDED = (Path(__file__).parent / "data" / "vagrant-ssh-config.txt").read_text()


def test_parse_fields_defaults_and_options() -> None:
    entries = parse("""
        # a comment
        n1 10.0.0.1 root /k/id            # port defaults to 22
        n2 10.0.0.2:2201 kraftlab /k/id address=192.168.56.12 workdir=/srv/kl known_hosts=/k/kh
        n3 [fe80::1]:2222 root /k/id
        n4 ::1 root /k/id
    """)
    assert entries[0] == NodeEntry("n1", "10.0.0.1", 22, "root", "/k/id", {})
    assert entries[0].address == "10.0.0.1" and entries[0].workdir == "/var/lib/kraftlab"
    assert (entries[1].port, entries[1].address, entries[1].workdir, entries[1].known_hosts) == (
        2201, "192.168.56.12", "/srv/kl", "/k/kh")
    assert (entries[2].host, entries[2].port) == ("fe80::1", 2222)
    assert (entries[3].host, entries[3].port) == ("::1", 22)


def test_render_round_trips() -> None:
    entries = parse("n1 10.0.0.1 root /k/id\nn2 [::1]:2200 v /k/id2 address=10.1.1.1\n")
    assert parse(render(entries)) == entries


@pytest.mark.parametrize(("text", "error"), [
    ("n1 10.0.0.1 root", "want NAME HOST"),
    ("n1 10.0.0.1:x root /k", "bad HOST"),
    ("n1 10.0.0.1 root /k colour=red", "unknown option 'colour=red'"),
    ("n1 a root /k\nn1 b root /k", "duplicate"),
    ("# nothing", "no nodes"),
])
def test_errors_name_the_line(text: str, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        parse(text, "nodes")


def test_recorded_vagrant_ssh_config() -> None:
    entries = nodes_from_ssh_config(RECORDED, 3, "/state/lab.known_hosts")
    assert [(e.name, e.host, e.port, e.user) for e in entries] == [
        ("n1", "127.0.0.1", 2222, "vagrant"), ("n2", "127.0.0.1", 2200, "vagrant"),
        ("n3", "192.168.121.57", 22, "vagrant")]
    assert entries[1].key == "/home/dev/kraftlab/vagrant/.vagrant/machines/n2/virtualbox/private_key"
    assert entries[2].key.endswith("machines/n3/libvirt/private_key")  # the first IdentityFile wins
    # the nodes reach each other on the private network, not through the forwarded SSH port
    assert [e.address for e in entries] == ["192.168.56.11", "192.168.56.12", "192.168.56.13"]
    assert all(e.known_hosts == "/state/lab.known_hosts" for e in entries)
    written = render(entries)
    assert "n2\t127.0.0.1:2200\tvagrant\t/home/dev/kraftlab/vagrant/.vagrant/machines/n2/virtualbox/private_key" \
        in written
    assert parse(written) == entries


def test_ssh_config_without_addresses_keeps_hostname() -> None:
    (e,) = from_ssh_config("Host web\n  HostName 10.1.2.3\n  User u\n  IdentityFile /k\n")
    assert (e.name, e.address, e.port) == ("web", "10.1.2.3", 22)
