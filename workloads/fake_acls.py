"""The in-memory Kafka fake's ACLs (workloads.fake_kafka): CreateAcls, DeleteAcls and DescribeAcls
v1 over a set of bindings, and DescribeConfigs v1 of topics decided by Kafka's StandardAuthorizer
rules (`allow.everyone.if.no.acl.found=true`) for the connection's principal, User:ANONYMOUS.

A correct store, with Kafka's semantics (a binding already stored is acknowledged without a second
copy; a delete filter lists what it removed), and one planted bug, `keep-deleted-acl`: DeleteAcls
answers that it removed the binding but keeps it.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass, field
from typing import Any

from kio.schema.create_acls.v1 import request as ca_req
from kio.schema.create_acls.v1 import response as ca_resp
from kio.schema.delete_acls.v1 import request as da_req
from kio.schema.delete_acls.v1 import response as da_resp
from kio.schema.describe_acls.v1 import request as dsa_req
from kio.schema.describe_acls.v1 import response as dsa_resp
from kio.schema.describe_configs.v1 import request as dc_req
from kio.schema.describe_configs.v1 import response as dc_resp
from kio.schema.errors import ErrorCode
from kio.static.primitive import i8, i32Timedelta

from kraftlab.node.security.acl import AclBinding, AclFilter, AclOperation, ResourceType, invalid_binding
from kraftlab.node.security.authorizer import ANONYMOUS, StandardAuthorizer

ZERO = i32Timedelta.parse(datetime.timedelta(0))
REQUESTS = (ca_req.CreateAclsRequest, da_req.DeleteAclsRequest, dsa_req.DescribeAclsRequest,
            dc_req.DescribeConfigsRequest)
WRITES = (ca_req.CreateAclsRequest, da_req.DeleteAclsRequest)
SERVED = {29: 1, 30: 1, 31: 1, 32: 1}
BUGS = frozenset({"keep-deleted-acl"})


@dataclass
class FakeAcls:
    bugs: frozenset[str] = frozenset()
    acls: list[AclBinding] = field(default_factory=list)
    authorizer: StandardAuthorizer = field(default_factory=lambda: StandardAuthorizer(allow_if_no_acl=True))

    def handle(self, req: Any) -> Any:
        if isinstance(req, ca_req.CreateAclsRequest):
            return ca_resp.CreateAclsResponse(throttle_time=ZERO, results=tuple(self._create(c) for c in req.creations))
        if isinstance(req, da_req.DeleteAclsRequest):
            return da_resp.DeleteAclsResponse(throttle_time=ZERO, filter_results=tuple(self._delete(f)
                                                                                       for f in req.filters))
        if isinstance(req, dsa_req.DescribeAclsRequest):
            return self._describe(req)
        if isinstance(req, dc_req.DescribeConfigsRequest):
            return dc_resp.DescribeConfigsResponse(throttle_time=ZERO, results=tuple(self._configs(r)
                                                                                     for r in req.resources))
        raise ValueError(f"the fake's ACLs do not serve {type(req).__name__}")

    def _create(self, c: Any) -> Any:
        b = AclBinding(int(c.resource_type), c.resource_name, int(c.resource_pattern_type), c.principal, c.host,
                       int(c.operation), int(c.permission_type))
        if (why := invalid_binding(b)) is not None:
            return ca_resp.AclCreationResult(error_code=ErrorCode.invalid_request, error_message=why)
        if b not in self.acls:
            self.acls.append(b)
        return ca_resp.AclCreationResult(error_code=ErrorCode.none, error_message=None)

    @staticmethod
    def _filter(f: Any) -> AclFilter:
        return AclFilter(int(f.resource_type_filter), f.resource_name_filter, int(f.pattern_type_filter),
                         f.principal_filter, f.host_filter, int(f.operation), int(f.permission_type))

    def _delete(self, f: Any) -> Any:
        gone = [b for b in self.acls if self._filter(f).matches(b)]
        if "keep-deleted-acl" not in self.bugs:
            self.acls = [b for b in self.acls if b not in gone]
        return da_resp.DeleteAclsFilterResult(error_code=ErrorCode.none, error_message=None, matching_acls=tuple(
            da_resp.DeleteAclsMatchingAcl(error_code=ErrorCode.none, error_message=None,
                                          resource_type=i8(b.resource_type), resource_name=b.resource_name,
                                          pattern_type=i8(b.pattern_type), principal=b.principal, host=b.host,
                                          operation=i8(b.operation), permission_type=i8(b.permission))
            for b in gone))

    def _describe(self, req: Any) -> Any:
        found = [b for b in self.acls if self._filter(req).matches(b)]
        patterns = sorted({(b.resource_type, b.resource_name, b.pattern_type) for b in found}, key=str)
        return dsa_resp.DescribeAclsResponse(throttle_time=ZERO, error_code=ErrorCode.none, error_message=None,
                                             resources=tuple(dsa_resp.DescribeAclsResource(
                                                 resource_type=i8(p[0]), resource_name=p[1], pattern_type=i8(p[2]),
                                                 acls=tuple(dsa_resp.AclDescription(
                                                     principal=b.principal, host=b.host, operation=i8(b.operation),
                                                     permission_type=i8(b.permission))
                                                     for b in found if (b.resource_type, b.resource_name,
                                                                        b.pattern_type) == p))
                                                 for p in patterns))

    def _configs(self, r: Any) -> Any:
        d = self.authorizer.authorize(self.acls, ANONYMOUS, "fake", AclOperation.DESCRIBE_CONFIGS,
                                      int(r.resource_type), r.resource_name)
        code = ErrorCode.unknown_topic_or_partition if d.allowed else ErrorCode.topic_authorization_failed
        if int(r.resource_type) != ResourceType.TOPIC:
            code = ErrorCode.invalid_request
        return dc_resp.DescribeConfigsResult(error_code=code, error_message=None, resource_type=r.resource_type,
                                             resource_name=r.resource_name, configs=())


def error_response(req: Any, code: ErrorCode) -> Any:
    """`req` refused as a whole with `code` (NOT_CONTROLLER from a controller that does not lead)."""
    if isinstance(req, ca_req.CreateAclsRequest):
        return ca_resp.CreateAclsResponse(throttle_time=ZERO, results=tuple(
            ca_resp.AclCreationResult(error_code=code, error_message=None) for _ in req.creations))
    if isinstance(req, da_req.DeleteAclsRequest):
        return da_resp.DeleteAclsResponse(throttle_time=ZERO, filter_results=tuple(
            da_resp.DeleteAclsFilterResult(error_code=code, error_message=None, matching_acls=()) for _ in req.filters))
    if isinstance(req, dsa_req.DescribeAclsRequest):
        return dsa_resp.DescribeAclsResponse(throttle_time=ZERO, error_code=code, error_message=None, resources=())
    return dc_resp.DescribeConfigsResponse(throttle_time=ZERO, results=tuple(
        dc_resp.DescribeConfigsResult(error_code=code, error_message=None, resource_type=r.resource_type,
                                      resource_name=r.resource_name, configs=()) for r in req.resources))
