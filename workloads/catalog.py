"""The workloads by name, as the runner uses them.

`build(name, cluster, rate=…, concurrency=…)` → `Workload`:
- `main`: the main-phase generator (staggered to about `rate` ops/s in total; seeded through
  the interpreter's random source; `time_limit` optional),
- `final`: the final-reads generator (one read per broker; run after heal and recovery),
- `factory`: the `ClientFactory` over the cluster's addresses — a dict node name →
  {"broker": "ip:port" | None, "controller": "ip:port" | None[, "id": node id]} (the id defaults
  to the digits of the name),
`session_timeout` (s) is the cluster's broker.session.timeout.ms: agents heartbeat six times
per timeout and stay silent longer than it after a controlled shutdown.
- `models`: the checker models to apply; each op's history field `workload` names its model.

The `queue` workload (and its share of `mixed`) needs the data plane: it is built only where the
brokers' ApiVersions lists Produce, Fetch and ListOffsets, so `mixed` stays as it was on brokers
that serve metadata only.

Broker reads are eventually consistent in Kafka, so they are marked `broker_read` (with the
broker's node) and the final ones `final`; which ops the linearizability checker then judges is
the checker's rule (`checker.judged`): writes, and the final reads a model can take.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kraftlab.workloads import versions
from kraftlab.workloads.acl import AclWorkload
from kraftlab.workloads.client import ClientFactory
from kraftlab.workloads.generator import Generator, Stagger, TimeLimit
from kraftlab.workloads.isr import IsrWorkload
from kraftlab.workloads.kafka import Cluster, Connector, TcpConnector
from kraftlab.workloads.mixed import MixedWorkload
from kraftlab.workloads.probe import brokers_serve
from kraftlab.workloads.queue import QueueWorkload
from kraftlab.workloads.queue_client import QueueConnector
from kraftlab.workloads.registry import RegistryWorkload
from kraftlab.workloads.routed import RoutedFactory
from kraftlab.workloads.scram import ScramWorkload
from kraftlab.workloads.session import KafkaClientFactory
from kraftlab.workloads.topics import TopicsWorkload

WORKLOADS = ("topics", "registry", "isr", "acl", "scram", "mixed", "queue")
MODELS: dict[str, tuple[str, ...]] = {
    "topics": ("topics",),
    "registry": ("registry",),
    "isr": ("isr", "registry", "topics"),  # its setup ops are registrations and topic creates
    "acl": ("acl",),
    "scram": ("scram",),  # its own checker (checker.scram, with the journals' bound)
    "mixed": ("topics", "registry", "isr", "acl"),
    "queue": ("queue",),  # its own checker (checker.queue), not a linearizability model
}


@dataclass
class Workload:
    name: str
    main: Generator
    final: Generator
    factory: ClientFactory
    models: tuple[str, ...]
    brokers: list[str]


def build(name: str, cluster: Mapping[str, Mapping[str, Any]] | Cluster, *, rate: float = 10.0,
          concurrency: int = 6, time_limit: float | None = None, connector: Connector | None = None,
          request_timeout: float = 3.0, session_timeout: float = 9.0,
          queue_connector: QueueConnector | None = None, data_plane: bool | None = None,
          config: Mapping[str, str] | None = None) -> Workload:
    """The named workload over `cluster` (see the module docstring). The queue workload needs
    brokers that serve the data plane (Produce, Fetch, ListOffsets): `data_plane` says whether they
    do, else the brokers' ApiVersions is asked; `mixed` includes it only then, `queue` refuses
    without. Its clients come from `queue_connector` (default: confluent-kafka at each node's broker
    listener). `config` is the run's extra server.properties: the queue topic takes its
    `default.replication.factor` and `min.insync.replicas` when set (Kafka's broker defaults for
    new topics), else replication factor min(3, brokers) and min.insync.replicas one less."""
    c = cluster if isinstance(cluster, Cluster) else Cluster.parse(cluster)
    brokers = c.brokers
    if not brokers:
        raise ValueError("the cluster has no broker listener: workloads read from brokers")
    broker_ids = sorted(c.nodes[n].id for n in brokers)
    if rate <= 0 or concurrency <= 0:
        raise ValueError("rate and concurrency must be positive")
    kio = connector or TcpConnector(request_timeout=request_timeout)
    if data_plane is None and name in ("queue", "mixed"):
        data_plane = brokers_serve(c, kio, versions.DATA_PLANE, request_timeout)
    queue = QueueWorkload(brokers, queue_connector or _confluent(c, request_timeout),
                          final_wait=max(1.0, request_timeout - 0.5),
                          replicas=_int(config, "default.replication.factor"),
                          min_isr=_int(config, "min.insync.replicas")) if data_plane else None
    if name == "queue":
        if queue is None:
            raise ValueError("the queue workload needs brokers that serve Produce, Fetch and ListOffsets, and "
                             "the brokers' ApiVersions does not list them (or no broker answered)")
        return _workload(name, queue.generator(), queue.final_reads(), queue.factory(), brokers, rate,
                         concurrency, time_limit)
    impl: TopicsWorkload | RegistryWorkload | IsrWorkload | AclWorkload | ScramWorkload | MixedWorkload
    if name == "topics":
        impl = TopicsWorkload(brokers, broker_ids)
    elif name == "registry":
        impl = RegistryWorkload(brokers, session_timeout=session_timeout)
    elif name == "isr":
        impl = IsrWorkload(brokers, session_timeout=session_timeout)
    elif name == "acl":
        impl = AclWorkload(brokers)
    elif name == "scram":
        impl = ScramWorkload(brokers)
    elif name == "mixed":
        impl = MixedWorkload(brokers, broker_ids, session_timeout=session_timeout, queue=queue,
                             concurrency=concurrency)
    else:
        raise ValueError(f"unknown workload {name!r}; one of {', '.join(WORKLOADS)}")
    factory: ClientFactory = KafkaClientFactory(c, kio, impl.handlers())
    if isinstance(impl, MixedWorkload) and impl.queue is not None:
        factory = RoutedFactory(factory, {"queue": impl.queue.factory()})
    return _workload(name, impl.generator(), impl.final_reads(), factory, brokers, rate, concurrency, time_limit)


def _workload(name: str, gen: Generator, final: Generator, factory: ClientFactory, brokers: list[str],
              rate: float, concurrency: int, time_limit: float | None) -> Workload:
    main: Generator = Stagger(gen, dt=concurrency / rate)
    if time_limit is not None:
        main = TimeLimit(main, time_limit)
    return Workload(name, main, final, factory, MODELS[name], brokers)


def _int(config: Mapping[str, str] | None, key: str) -> int | None:
    raw = (config or {}).get(key)
    if raw is None:
        return None
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"{key}={raw!r}: not an integer") from None
    if value < 1:
        raise ValueError(f"{key}={raw!r}: must be at least 1")
    return value


def _confluent(c: Cluster, request_timeout: float) -> QueueConnector:
    from kraftlab.workloads import queue_confluent  # librdkafka loads only for runs that use it

    return queue_confluent.connector({n: a.broker for n, a in c.nodes.items() if a.broker}, request_timeout)
