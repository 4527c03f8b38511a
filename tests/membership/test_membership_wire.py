"""AddRaftVoter / RemoveRaftVoter / UpdateRaftVoter (api keys 80-82, v0) through Kafka's encoding
and back, and the tools' refusals of bad input."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from kio_bytes import through_bytes

from kraftlab.node.admin import AdminError
from kraftlab.node.cli import main as cli_main
from kraftlab.node.config import render_properties
from kraftlab.node.raft import messages as m
from kraftlab.node.raft.membership import wire
from kraftlab.node.raft.voters import Endpoint, Voter
from kraftlab.node.voter_admin import describe_change, local_controller

D = uuid.UUID(int=7 << 64)
ENDPOINTS = (Endpoint("CONTROLLER", "host-a", 9093), Endpoint("OTHER", "host-b", 19093))


@pytest.mark.parametrize(
    "request_",
    [
        m.AddRaftVoterRequest(Voter(4, D, ENDPOINTS), 12_000),
        m.RemoveRaftVoterRequest(2, D),
        m.UpdateRaftVoterRequest(5, 3, D, ENDPOINTS, (0, 1)),
    ],
)
def test_requests_round_trip_through_kafkas_encoding(request_: m.Request) -> None:
    entity = wire.request_to_wire(request_, "cluster-x")
    assert int(entity.__api_key__) in (80, 81, 82) and int(entity.__version__) == 0
    assert wire.request_from_wire(through_bytes(entity)) == request_


@pytest.mark.parametrize(
    "request_",
    [m.AddRaftVoterRequest(Voter(4, D), 1), m.RemoveRaftVoterRequest(2, D), m.UpdateRaftVoterRequest(5, 3, D, ())],
)
def test_responses_keep_error_code_and_message(request_: m.Request) -> None:
    answer = m.VoterChangeResponse(m.Errors.DUPLICATE_VOTER, "4 is already a voter", 1, 5)
    entity = wire.response_to_wire(request_, answer)
    back = wire.response_from_wire(through_bytes(entity))
    assert back.error == m.Errors.DUPLICATE_VOTER
    if isinstance(request_, m.UpdateRaftVoterRequest):
        assert (back.leader_id, back.epoch) == (1, 5)
    else:
        assert back.message == "4 is already a voter"


def test_zero_directory_id_is_none_and_other_entities_are_refused() -> None:
    entity = wire.request_to_wire(m.RemoveRaftVoterRequest(2, uuid.UUID(int=0)), None)
    assert wire.request_from_wire(entity) == m.RemoveRaftVoterRequest(2, None)
    with pytest.raises(ValueError, match="not a voter change"):
        wire.request_from_wire(object())


def test_add_controller_needs_a_formatted_controller(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    props = {
        "process.roles": "broker",
        "node.id": "4",
        "controller.quorum.bootstrap.servers": "127.0.0.1:1",
        "listeners": "PLAINTEXT://127.0.0.1:9092",
        "controller.listener.names": "CONTROLLER",
        "metadata.log.dir": str(tmp_path / "meta"),
    }
    path = tmp_path / "broker.properties"
    path.write_text(render_properties(props))
    with pytest.raises(AdminError):
        local_controller(str(path))
    assert cli_main(["add-controller", "--bootstrap-controller", "127.0.0.1:1", "--command-config", str(path)]) == 1
    assert "process.roles has no controller" in capsys.readouterr().err
    path.write_text(render_properties({**props, "process.roles": "controller", "listeners": "CONTROLLER://h:1"}))
    assert cli_main(["add-controller", "--bootstrap-controller", "127.0.0.1:1", "--command-config", str(path)]) == 1
    assert "kraft-node format" in capsys.readouterr().err


def test_remove_controller_refuses_a_bad_directory_id(capsys: pytest.CaptureFixture[str]) -> None:
    rc = cli_main(["remove-controller", "--bootstrap-controller", "127.0.0.1:1", "--controller-id", "2",
                   "--controller-directory-id", "not-a-uuid"])
    assert rc == 1
    assert "controller-directory-id" in capsys.readouterr().err


def test_a_refused_change_is_a_failed_command() -> None:
    with pytest.raises(AdminError, match="DUPLICATE_VOTER"):
        describe_change("add", 4, m.VoterChangeResponse(m.Errors.DUPLICATE_VOTER, "already"))
    assert describe_change("remove", 4, m.VoterChangeResponse(m.Errors.NONE)) == "Removed controller 4"


def test_describe_quorum_v2_carries_directory_ids_and_listeners() -> None:
    from kraftlab.node.admin import quorum_json, replication_table
    from kraftlab.node.raft import wire as raft_wire

    answer = m.DescribeQuorumResponse(
        m.Errors.NONE,
        1,
        3,
        40,
        (m.ReplicaState(1, 40, 100, 100, D), m.ReplicaState(2, 35, 90, 80, uuid.UUID(int=8 << 64))),
        (m.ReplicaState(4, 12, 95, -1),),
        ((1, ENDPOINTS[:1]), (2, (Endpoint("CONTROLLER", "host-c", 9094),))),
    )
    v2 = through_bytes(raft_wire.response_to_wire(answer, 2))
    assert raft_wire.response_from_wire(v2) == answer
    v1 = raft_wire.response_to_wire(answer, 1)
    assert int(v1.__version__) == 1 and raft_wire.response_from_wire(v1).voters[0].directory_id is None
    described = quorum_json(v2)
    assert described["kraft_version"] == 1
    assert described["nodes"] == {"1": ["CONTROLLER://host-a:9093"], "2": ["CONTROLLER://host-c:9094"]}
    assert [v["directory_id"] is not None for v in described["voters"]] == [True, True]
    assert described["observers"][0]["directory_id"] is None
    table = replication_table(described).splitlines()
    assert table[0].split() == ["NodeId", "DirectoryId", "LogEndOffset", "Lag", "LastFetchTimestamp",
                                "LastCaughtUpTimestamp", "Status"]
    assert table[1].split()[-1] == "Leader" and table[2].split()[3] == "5" and table[3].split()[-1] == "Observer"


def test_vote_carries_the_voter_directory_id_asked() -> None:
    from kraftlab.node.raft import wire as raft_wire

    vote = m.VoteRequest(4, 1, 3, 120, True, voter_directory_id=D)
    assert raft_wire.request_from_wire(through_bytes(raft_wire.request_to_wire(vote, "c", 2))) == vote
    static = m.VoteRequest(4, 1, 3, 120, False)
    assert raft_wire.request_from_wire(through_bytes(raft_wire.request_to_wire(static, "c", 2))) == static
