"""KIP-853's voter change APIs on the wire: AddRaftVoter (80), RemoveRaftVoter (81) and
UpdateRaftVoter (82), each in version 0, mapped to and from the core's messages through kio.

Both directions are here: a controller's listener decodes requests and encodes the core's
`VoterChangeResponse` as the API's own response; `kraft-node add-controller` / `remove-controller`
encode requests and decode responses.
"""

from __future__ import annotations

import datetime
import uuid
from typing import Any

from kio.schema.add_raft_voter.v0 import request as add_req
from kio.schema.add_raft_voter.v0 import response as add_resp
from kio.schema.errors import ErrorCode
from kio.schema.remove_raft_voter.v0 import request as rm_req
from kio.schema.remove_raft_voter.v0 import response as rm_resp
from kio.schema.types import BrokerId
from kio.schema.update_raft_voter.v0 import request as up_req
from kio.schema.update_raft_voter.v0 import response as up_resp
from kio.static.primitive import i16, i32, i32Timedelta, u16
from kio.static.protocol import Payload

from kraftlab.node.protocol.durations import millis
from kraftlab.node.raft import messages as m
from kraftlab.node.raft.voters import Endpoint, Voter

REQUEST_ENTITIES: dict[type, type[Payload]] = {
    m.AddRaftVoterRequest: add_req.AddRaftVoterRequest,
    m.RemoveRaftVoterRequest: rm_req.RemoveRaftVoterRequest,
    m.UpdateRaftVoterRequest: up_req.UpdateRaftVoterRequest,
}
_NO_THROTTLE = i32Timedelta.parse(datetime.timedelta(0))


def _error(code: int) -> m.Errors:
    try:
        return m.Errors(int(code))
    except ValueError:
        return m.Errors.UNKNOWN_SERVER_ERROR


def _directory(value: uuid.UUID | None) -> uuid.UUID | None:
    return None if value is None or value.int == 0 else value


def request_from_wire(entity: Any) -> m.Request:
    """The core's request for a voter change entity; ValueError for anything else."""
    if isinstance(entity, add_req.AddRaftVoterRequest):
        endpoints = tuple(Endpoint(e.name, e.host, int(e.port)) for e in entity.listeners)
        voter = Voter(int(entity.voter_id), _directory(entity.voter_directory_id), endpoints)
        return m.AddRaftVoterRequest(voter, millis(entity.timeout))
    if isinstance(entity, rm_req.RemoveRaftVoterRequest):
        return m.RemoveRaftVoterRequest(int(entity.voter_id), _directory(entity.voter_directory_id))
    if isinstance(entity, up_req.UpdateRaftVoterRequest):
        feature = entity.k_raft_version_feature
        return m.UpdateRaftVoterRequest(
            int(entity.current_leader_epoch),
            int(entity.voter_id),
            _directory(entity.voter_directory_id),
            tuple(Endpoint(e.name, e.host, int(e.port)) for e in entity.listeners),
            (int(feature.min_supported_version), int(feature.max_supported_version)),
        )
    raise ValueError(f"not a voter change request: {type(entity).__name__}")


def request_to_wire(message: m.Request, cluster_id: str | None) -> Any:
    """The kio entity of a voter change request (the tools' side)."""
    if isinstance(message, m.AddRaftVoterRequest):
        v = message.voter
        return add_req.AddRaftVoterRequest(
            cluster_id=cluster_id,
            timeout=i32Timedelta.parse(datetime.timedelta(milliseconds=message.timeout_ms)),
            voter_id=i32(v.node_id),
            voter_directory_id=v.directory_id,
            listeners=tuple(add_req.Listener(name=e.name, host=e.host, port=u16(e.port)) for e in v.endpoints),
        )
    if isinstance(message, m.RemoveRaftVoterRequest):
        return rm_req.RemoveRaftVoterRequest(
            cluster_id=cluster_id, voter_id=i32(message.voter_id), voter_directory_id=message.directory_id
        )
    if isinstance(message, m.UpdateRaftVoterRequest):
        low, high = message.kraft_versions
        return up_req.UpdateRaftVoterRequest(
            cluster_id=cluster_id,
            current_leader_epoch=i32(message.epoch),
            voter_id=i32(message.voter_id),
            voter_directory_id=message.directory_id,
            listeners=tuple(up_req.Listener(name=e.name, host=e.host, port=u16(e.port)) for e in message.endpoints),
            k_raft_version_feature=up_req.KRaftVersionFeature(
                min_supported_version=i16(low), max_supported_version=i16(high)
            ),
        )
    raise ValueError(f"not a voter change request: {type(message).__name__}")


def response_to_wire(request: m.Request, response: m.VoterChangeResponse) -> Any:
    """The API's own response entity for the core's answer to `request`."""
    code = ErrorCode(int(response.error))
    if isinstance(request, m.AddRaftVoterRequest):
        return add_resp.AddRaftVoterResponse(
            throttle_time=_NO_THROTTLE, error_code=code, error_message=response.message
        )
    if isinstance(request, m.RemoveRaftVoterRequest):
        return rm_resp.RemoveRaftVoterResponse(
            throttle_time=_NO_THROTTLE, error_code=code, error_message=response.message
        )
    leader = up_resp.CurrentLeader(
        leader_id=BrokerId(-1 if response.leader_id is None else response.leader_id),
        leader_epoch=i32(response.epoch),
        host="",
        port=i32(-1),
    )
    return up_resp.UpdateRaftVoterResponse(throttle_time=_NO_THROTTLE, error_code=code, current_leader=leader)


def response_from_wire(entity: Any) -> m.VoterChangeResponse:
    """The answer a voter change response entity carries (the tools' side)."""
    if isinstance(entity, add_resp.AddRaftVoterResponse | rm_resp.RemoveRaftVoterResponse):
        return m.VoterChangeResponse(_error(entity.error_code), entity.error_message)
    if isinstance(entity, up_resp.UpdateRaftVoterResponse):
        leader = entity.current_leader
        leader_id = None if leader.leader_id < 0 else int(leader.leader_id)
        return m.VoterChangeResponse(_error(entity.error_code), None, leader_id, int(leader.leader_epoch))
    raise ValueError(f"not a voter change response: {type(entity).__name__}")
