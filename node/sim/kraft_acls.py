"""An ACL administrator for the cluster simulator: CreateAcls and DeleteAcls sent straight to a
controller (`kafka-acls --bootstrap-controller`), bindings and filters drawn over the space Kafka
allows, each answer and the image the decision left judged against a model of Kafka's
AclControlManager and of its filters' matching (ResourcePatternFilter, AccessControlEntryFilter).

- CreateAcls, 1-3 creations: TOPIC, GROUP or CLUSTER resources (and ANY, which cannot be stored),
  LITERAL or PREFIXED patterns (and MATCH or ANY, which cannot), names including the wildcard "*",
  principals User:alice, User:bob, User:* (and one without a type), hosts "*" or an address,
  operations READ, WRITE, DESCRIBE, ALL (and ANY), permissions ALLOW, DENY (and ANY). Kafka: one
  result per creation, in order; INVALID_REQUEST for a binding it cannot store (an ANY or UNKNOWN
  type, pattern, operation or permission, a CLUSTER not named kafka-cluster, a principal not
  Type:name), else NONE and the image after holds the binding exactly once (an existing one is not
  doubled).
- DeleteAcls, 1-2 filters: resource type ANY or one, name any or one (a filter with MATCH matches
  the LITERAL bindings of that name or of "*" and the PREFIXED bindings that are a prefix of it;
  ANY or a pattern type: that exact name), principal, host, operation and permission any or one —
  including principals nobody has. Kafka: one result per filter, NONE, listing every binding the
  filter matches that no earlier filter of the request matched; none of them is in the image after.
- A fifth of the requests go to a standby controller: every result NOT_CONTROLLER (Kafka's
  getErrorResponse), none left out.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from kio.schema.create_acls.v3.request import AclCreation, CreateAclsRequest
from kio.schema.delete_acls.v3.request import DeleteAclsFilter, DeleteAclsRequest
from kio.schema.errors import ErrorCode
from kio.static.primitive import i8

from kraftlab.node.controller.messages import api_name
from kraftlab.node.metadata.image import MetadataImage
from kraftlab.node.security.acl import AclBinding, AclOperation, AclPermission, PatternType, ResourceType

APIS = ("CreateAcls", "DeleteAcls")
NAMES = ("adm0", "adm", "ad", "*")
PRINCIPALS = ("User:alice", "User:bob", "User:*")
HOSTS = ("*", "10.0.0.1")
OPERATIONS = (AclOperation.READ, AclOperation.WRITE, AclOperation.DESCRIBE, AclOperation.ALL)
CLUSTER_NAME = "kafka-cluster"


def is_acl_request(request: Any) -> bool:
    return api_name(request) in APIS


@dataclass
class AclFacts:
    """The bindings the deciding controller held before it decided, and the image its decision left."""

    before: list[AclBinding]
    after: MetadataImage | None = field(default=None)


@dataclass(frozen=True)
class FilterModel:
    resource_type: int
    name: str | None
    pattern: int
    principal: str | None
    host: str | None
    operation: int
    permission: int

    def matches(self, b: AclBinding) -> bool:
        """Kafka's AclBindingFilter.matches (ResourcePatternFilter + AccessControlEntryFilter)."""
        if self.resource_type not in (ResourceType.ANY, b.resource_type):
            return False
        if self.pattern not in (PatternType.ANY, PatternType.MATCH, b.pattern_type):
            return False
        if self.name is not None:
            if self.pattern in (PatternType.ANY, b.pattern_type):
                if self.name != b.resource_name:
                    return False
            elif b.pattern_type == PatternType.LITERAL:
                if b.resource_name not in (self.name, "*"):
                    return False
            elif not self.name.startswith(b.resource_name):
                return False
        return (self.principal in (None, b.principal) and self.host in (None, b.host)
                and self.operation in (AclOperation.ANY, b.operation)
                and self.permission in (AclPermission.ANY, b.permission))


def storable(b: AclBinding) -> bool:
    """Whether Kafka's AclControlManager.validateNewAcl accepts `b` (for the values drawn here)."""
    return (b.resource_type not in (ResourceType.ANY, ResourceType.UNKNOWN)
            and b.pattern_type in (PatternType.LITERAL, PatternType.PREFIXED)
            and b.operation not in (AclOperation.ANY, AclOperation.UNKNOWN)
            and b.permission in (AclPermission.ALLOW, AclPermission.DENY)
            and (b.resource_type != ResourceType.CLUSTER or b.resource_name == CLUSTER_NAME)
            and ":" in b.principal and bool(b.resource_name) and bool(b.host))


def _of_creation(c: Any) -> AclBinding:
    return AclBinding(int(c.resource_type), c.resource_name, int(getattr(c, "resource_pattern_type", 3)),
                      c.principal, c.host, int(c.operation), int(c.permission_type))


def _of_filter(f: Any) -> FilterModel:
    return FilterModel(int(f.resource_type_filter), f.resource_name_filter, int(getattr(f, "pattern_type_filter", 3)),
                   f.principal_filter, f.host_filter, int(f.operation), int(f.permission_type))


class AclAdmin:
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.answered: Counter[tuple[str, str]] = Counter()
        """Results judged right, by API and error (a DeleteAcls filter result 'none+' when it matched)."""

    def _pick(self, values: tuple[Any, ...], odd: Any, p: float = 0.05) -> Any:
        return odd if self.rng.random() < p else self.rng.choice(values)

    def _creation(self) -> AclCreation:
        rng = self.rng
        kind = rng.choice([ResourceType.TOPIC] * 6 + [ResourceType.GROUP] * 3 + [ResourceType.CLUSTER])
        kind = self._pick((kind,), ResourceType.ANY)
        name = self._pick((CLUSTER_NAME,), "other") if kind == ResourceType.CLUSTER else rng.choice(NAMES)
        return AclCreation(
            resource_type=i8(kind), resource_name=name,
            resource_pattern_type=i8(self._pick((PatternType.LITERAL, PatternType.PREFIXED),
                                                rng.choice([PatternType.MATCH, PatternType.ANY]), 0.1)),
            principal=self._pick(PRINCIPALS, "alice"), host=rng.choice(HOSTS),
            operation=i8(self._pick(OPERATIONS, AclOperation.ANY)),
            permission_type=i8(self._pick((AclPermission.ALLOW, AclPermission.DENY), AclPermission.ANY)))

    def _filter(self) -> DeleteAclsFilter:
        rng = self.rng

        def some(values: tuple[Any, ...]) -> Any:
            return None if rng.random() < 0.5 else rng.choice(values)
        return DeleteAclsFilter(
            resource_type_filter=i8(rng.choice([ResourceType.ANY, ResourceType.TOPIC, ResourceType.GROUP])),
            resource_name_filter=some(NAMES),
            pattern_type_filter=i8(rng.choice(list(PatternType)[1:])),
            principal_filter=some((*PRINCIPALS, "User:carol")), host_filter=some(HOSTS),
            operation=i8(rng.choice([AclOperation.ANY, AclOperation.ANY, *OPERATIONS])),
            permission_type=i8(rng.choice([AclPermission.ANY, AclPermission.ALLOW, AclPermission.DENY])))

    def request(self) -> Any:
        """The next request, in its newest form (the simulator sends it at a version it draws)."""
        if self.rng.random() < 0.55:
            return CreateAclsRequest(creations=tuple(self._creation() for _ in range(self.rng.randint(1, 3))))
        return DeleteAclsRequest(filters=tuple(self._filter() for _ in range(self.rng.randint(1, 2))))

    @staticmethod
    def facts(image: MetadataImage) -> AclFacts:
        return AclFacts(list(image.acls.values()))

    def judge(self, request: Any, facts: AclFacts, response: Any) -> str | None:
        """Why `response` is not Kafka's answer to `request` given `facts`, or None when it is."""
        create = api_name(request) == "CreateAcls"
        verdict = self._judge_create(request, facts, response) if create \
            else self._judge_delete(request, facts, response)
        return None if verdict is None else f"{api_name(request)} v{request.__version__}: {verdict}"

    def _judge_create(self, request: Any, facts: AclFacts, response: Any) -> str | None:
        if len(response.results) != len(request.creations):
            return f"{len(response.results)} results for {len(request.creations)} creations"
        codes = {r.error_code for r in response.results}
        if codes == {ErrorCode.not_controller}:
            self.answered[("CreateAcls", "not_controller")] += len(codes)
            return None
        assert facts.after is not None
        held = Counter(facts.after.acls.values())
        before = Counter(facts.before)
        for c, r in zip(request.creations, response.results, strict=True):
            b = _of_creation(c)
            want = ErrorCode.none if storable(b) else ErrorCode.invalid_request
            if r.error_code != want:
                return f"creation {b.describe()} answered {r.error_code.name}, Kafka {want.name}"
            if want == ErrorCode.none and held[b] != 1:
                return f"creation {b.describe()} answered NONE; the image after holds it {held[b]} times"
            if want != ErrorCode.none and held[b] != before[b]:
                return f"creation {b.describe()} refused, yet the image after changed it"
            self.answered[("CreateAcls", want.name)] += 1
        return None

    def _judge_delete(self, request: Any, facts: AclFacts, response: Any) -> str | None:
        results = response.filter_results
        if len(results) != len(request.filters):
            return f"{len(results)} results for {len(request.filters)} filters"
        if {r.error_code for r in results} == {ErrorCode.not_controller}:
            self.answered[("DeleteAcls", "not_controller")] += 1
            return None
        assert facts.after is not None
        left = list(facts.before)
        for f, r in zip(request.filters, results, strict=True):
            flt = _of_filter(f)
            matched = Counter(b for b in left if flt.matches(b))
            got = Counter(AclBinding(int(m.resource_type), m.resource_name, int(getattr(m, "pattern_type", 3)),
                                     m.principal, m.host, int(m.operation), int(m.permission_type))
                          for m in r.matching_acls)
            if r.error_code != ErrorCode.none or got != matched:
                return (f"filter {flt} answered {r.error_code.name} listing {sorted(b.describe() for b in got)}, "
                        f"Kafka NONE listing {sorted(b.describe() for b in matched)}")
            left = [b for b in left if b not in matched]
            self.answered[("DeleteAcls", "none+" if matched else "none")] += 1
        if Counter(facts.after.acls.values()) != Counter(left):
            return "the image after the decision holds other bindings than those no filter matched"
        return None
