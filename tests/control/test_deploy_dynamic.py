"""A dynamic-quorum deployment (KIP-853) on fake hosts: the plan (first voters and spare
controllers), server.properties with bootstrap servers (checked with the node's own parser), the
format commands (`--initial-controllers` / `--no-initial-controllers`), and the voter changes made
with `kraft-node add-controller` / `remove-controller` on the hosts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kraftlab.control.fake import FakeHost
from kraftlab.control.host import CommandResult
from kraftlab.control.lab import Lab
from kraftlab.deploy import Deployment, NodePaths, load_deployment, plan, render_properties, voter_answer
from kraftlab.nemesis.ports import VoterControl
from kraftlab.node.config import config_from_properties, parse_properties

ADDRS = {f"n{i}": f"10.9.0.{10 + i}" for i in range(1, 6)}


def fake_lab(backend: str = "netns") -> Lab:
    return Lab("dlab", backend, [FakeHost(f"n{i}", f"10.9.0.{10 + i}", f"/w/n{i}") for i in range(1, 6)])


def host(lab: Lab, node: str) -> FakeHost:
    h = lab.host(node)
    assert isinstance(h, FakeHost)
    return h


@pytest.mark.parametrize(("topology", "roles"), [
    ("combined+brokers", ["broker,controller"] * 5),
    ("dedicated", ["controller"] * 3 + ["broker,controller"] * 2),
    ("combined", ["broker,controller"] * 5),
])
def test_a_dynamic_plan_makes_every_node_beyond_the_first_voters_a_spare_controller(topology: str,
                                                                                   roles: list[str]) -> None:
    specs = plan(topology, ADDRS, "dynamic")
    assert [",".join(s.roles) for s in specs] == roles
    assert [s.name for s in specs if s.spare] == ["n4", "n5"]
    assert not any(s.spare for s in plan(topology, ADDRS))  # static: no spares
    with pytest.raises(ValueError, match="unknown quorum"):
        plan(topology, ADDRS, "elastic")


def test_dynamic_properties_name_bootstrap_servers_and_no_voters() -> None:
    specs = plan("combined+brokers", ADDRS, "dynamic")
    for spec in specs:
        text = render_properties(spec, specs, NodePaths(f"/w/{spec.name}"), quorum="dynamic")
        cfg = config_from_properties(parse_properties(text))
        assert cfg.is_dynamic_quorum and cfg.is_controller and cfg.is_broker
        assert list(cfg.bootstrap_servers) == [(a, 9093) for a in ADDRS.values()]
        assert "controller.quorum.voters" not in text


def test_the_first_voters_are_formatted_with_initial_controllers_and_spares_to_join(state_dir: Path) -> None:
    lab = fake_lab()
    d = Deployment.create(lab, quorum="dynamic")
    d.configure()
    d.format()
    kraft = d.kraft_node("n1")
    initial = None
    for node in d.nodes():
        (fmt,) = [c for c in host(lab, node).commands if " format " in c]
        assert fmt.startswith(f"{kraft} format --config /w/{node}/server.properties --cluster-id {d.state.cluster_id}")
        if node in ("n4", "n5"):
            assert fmt.endswith(" --no-initial-controllers")
            continue
        flag = fmt.split(" --initial-controllers ")[1]
        assert initial in (None, flag)  # one list for every first voter
        initial = flag
    assert initial is not None
    entries = [e.split(":") for e in initial.split(",")]
    assert [e[0] for e in entries] == ["1@10.9.0.11", "2@10.9.0.12", "3@10.9.0.13"]
    assert all(e[1] == "9093" and len(e[2]) == 22 for e in entries) and len({e[2] for e in entries}) == 3
    d.reformat("n2")  # a voter formatted again joins the quorum as a new disk, never bootstraps it
    assert host(lab, "n2").commands[-1].endswith(" --ignore-formatted --no-initial-controllers")
    again = load_deployment(lab)
    assert again.state == d.state and again.spare_controllers() == ["n4", "n5"] and again.dynamic_quorum()


def test_voter_changes_run_kafkas_tools_on_the_node_and_read_their_answers(state_dir: Path) -> None:
    lab = fake_lab("ssh")
    d = Deployment.create(lab, quorum="dynamic")
    assert isinstance(d, VoterControl)
    d.start_all()
    described = {"leader": 2, "epoch": 4, "high_watermark": 10, "observers": [{"id": 4}, {"id": 5}],
                 "voters": [{"id": i, "directory_id": f"dir{i}", "log_end_offset": 8 + i} for i in (1, 2, 3)]}
    for node in d.nodes():
        host(lab, node).on("describe-quorum", CommandResult("", "", 0, json.dumps(described), ""))
    view = d.describe_voters()
    assert view.leader == "n2" and view.voters == {"n1": "dir1", "n2": "dir2", "n3": "dir3"}
    assert view.high_watermark == 10 and view.ends == {"n1": 9, "n2": 10, "n3": 11}
    assert view.unsettled() == "voters behind the high-water mark 10: n1 at 9"
    n4 = host(lab, "n4")
    n4.on("meta.properties", CommandResult("", "", 0, "version=1\nnode.id=4\ndirectory.id=AbCd_-x\n", ""))
    assert d.directory_id("n4") == "AbCd_-x"
    n4.on("add-controller", CommandResult("", "", 1, "", "kraft-node add-controller: add controller 4 failed: "
                                                       "REQUEST_TIMED_OUT voter 4 did not catch up"))
    answer = d.add_controller("n4", 10)
    assert answer.error == "REQUEST_TIMED_OUT" and not answer.ok
    (sent,) = [c for c in n4.commands if "add-controller" in c]
    # every controller, the leader last described (n2) first: one cut off would cost the tool a timeout
    bootstrap = ",".join(f"{ADDRS[n]}:9093" for n in ("n2", "n1", "n3", "n4", "n5"))
    assert sent == (f"{d.kraft_node('n4')} add-controller --bootstrap-controller {bootstrap} "
                    "--command-config /w/n4/server.properties --timeout 10")
    assert d.remove_controller("n3", "dir3", 5).ok
    assert host(lab, "n3").commands[-1].endswith("--controller-id 3 --controller-directory-id dir3 --timeout 5")
    with pytest.raises(Exception, match="stop kraft-node"):
        d.new_disk("n3")
    d.kill("n3")
    d.new_disk("n3")
    assert host(lab, "n3").commands[-2:][0] == "find /w/n3/metadata -mindepth 1 -delete"
    assert host(lab, "n3").commands[-1].endswith("--ignore-formatted --no-initial-controllers")


def test_the_tools_answers() -> None:
    def result(code: int, err: str = "") -> CommandResult:
        return CommandResult("n1", "c", code, "Added controller 4" if code == 0 else "", err)

    assert voter_answer(result(0)).ok
    assert voter_answer(result(1, "remove controller 3 failed: VOTER_NOT_FOUND (3, x) is not a voter")).error \
        == "VOTER_NOT_FOUND"
    lost = voter_answer(result(1, "AddRaftVoterRequest: no controller took it (10.0.0.1:9093: not the leader)"))
    assert lost.error == "UNREACHABLE" and "no controller took it" in lost.message


def test_a_test_naming_membership_refuses_a_static_quorum() -> None:
    from kraftlab.runner import BadArguments, TestOptions, validate

    validate(TestOptions(nemesis="membership,kill"))  # dynamic by default
    validate(TestOptions(nemesis="all", quorum="static"))  # `all` keeps membership out of a static lab
    with pytest.raises(BadArguments, match="needs a dynamic quorum"):
        validate(TestOptions(nemesis="membership", quorum="static"))
    with pytest.raises(BadArguments, match="unknown quorum"):
        validate(TestOptions(quorum="elastic"))
