"""The `mixed` workload: topics, registry, isr, acl and scram at once (and queue where brokers serve
the data plane), as nightly runs use it.

They keep disjoint topic name prefixes (`t`, `isr-`; the acl workload's ACLs name only `acl-`
resources) and agent id ranges (1000–1899, rotating, for the
registry, 2000+ for the isr agents); every op carries its own `workload` field (`topics`,
`registry`, `isr`, `acl`, `scram`), so the checker splits the history per model. The topics
workload's `list`
shows both prefixes, because the isr workload's topic creates are `topics` ops too. Broker
reads are eventually consistent in Kafka and marked `broker_read` (see `workloads.ops`); the
linearizability checker gets the writes plus the final reads (`checker.judged`). With `queue` (a
`QueueWorkload`, topic `queue`, judged by the queue checker), its sends, polls and final reads join
the run on workers of their own (QUEUE_SHARE of them: its ops can each hold a worker for seconds);
its clients are not kio sessions, so a runner routes its ops to its own factory (`workloads.routed`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from kraftlab.workloads.acl import AclWorkload
from kraftlab.workloads.agents import agent_handlers
from kraftlab.workloads.generator import Generator, Mix, Reserve
from kraftlab.workloads.isr import IsrWorkload
from kraftlab.workloads.queue import QueueWorkload
from kraftlab.workloads.registry import RegistryWorkload
from kraftlab.workloads.scram import ScramWorkload
from kraftlab.workloads.session import Handlers
from kraftlab.workloads.topics import TopicsWorkload

QUEUE_SHARE = 0.2
"""The share of the client workers that run the queue's ops (Jepsen's `reserve`), at least one."""


@dataclass
class MixedWorkload:
    brokers: Sequence[str]
    broker_ids: Sequence[int]
    weights: tuple[float, float, float, float, float] = (1.0, 2.0, 2.0, 0.5, 0.5)
    """Shares of topics, registry, isr, acl, scram (the queue has workers of its own). The agent
    workloads get twice a share: ten agents' keepalives alone would take most of the ops, and their
    rarer acts (stalls, zombies, stale ISR proposals) reach the controller's refusals only with ops
    to spare (docs/power.md, "Rule reach")."""
    session_timeout: float = 9.0
    queue: QueueWorkload | None = None
    concurrency: int = 10  # the run's client workers: QUEUE_SHARE of them run the queue's ops
    topics: TopicsWorkload = field(init=False)
    registry: RegistryWorkload = field(init=False)
    isr: IsrWorkload = field(init=False)
    acl: AclWorkload = field(init=False)
    scram: ScramWorkload = field(init=False)

    def __post_init__(self) -> None:
        self.isr = IsrWorkload(self.brokers, base=2000, prefix="isr-", session_timeout=self.session_timeout)
        self.topics = TopicsWorkload(self.brokers, self.broker_ids, prefix="t",
                                     list_prefixes=("t", self.isr.prefix))
        self.registry = RegistryWorkload(self.brokers, base=1000, session_timeout=self.session_timeout)
        self.acl = AclWorkload(self.brokers)
        self.scram = ScramWorkload(self.brokers)

    def handlers(self) -> Handlers:
        return {**self.topics.handlers(), **self.registry.handlers(), **self.isr.handlers(),
                **self.acl.handlers(), **self.scram.handlers(),
                **agent_handlers([self.registry.book, self.isr.book])}

    def generator(self) -> Generator:
        """The metadata workloads mixed by `weights`; the queue's ops (which can each hold a worker
        for the whole op timeout while a partition's leader is unreachable) on workers of their own,
        QUEUE_SHARE of them (mixed in, they took over 60% of the workers' time in a faulty 60-s run,
        and the metadata workloads made a tenth of the ops their rate asks for)."""
        gens: list[Generator] = [self.topics.generator(), self.registry.generator(), self.isr.generator(),
                                 self.acl.generator(), self.scram.generator()]
        if self.queue is None:
            return Mix(gens, list(self.weights))
        if self.concurrency < 3:  # too few workers to set any apart: mixed in, by weight
            return Mix([*gens, self.queue.generator()], [*self.weights, 1.0])
        return Reserve(max(1, round(self.concurrency * QUEUE_SHARE)), self.queue.generator(),
                       Mix(gens, list(self.weights)))

    def final_reads(self) -> Mix:
        parts: list[Generator] = [self.topics.final_reads(), self.registry.final_reads(), self.isr.final_reads(),
                                  self.acl.final_reads(), self.scram.final_reads()]
        if self.queue is not None:
            parts.append(self.queue.final_reads())
        return Mix(parts)
