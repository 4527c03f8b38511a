"""A small in-process cluster for broker tests: 3 controllers and N brokers on a FakeQuorum.

Each step advances the clock, ticks everything, routes broker→controller requests to the
active controller (unless the broker is cut off), commits the log and routes answers back.
"""

from __future__ import annotations

import uuid
from typing import Any

from kraftlab.node.broker.apis import BrokerApis, ClientReply, Forward, Refused
from kraftlab.node.broker.lifecycle import BrokerConfig, BrokerEndpoint, BrokerLifecycle, SendToController
from kraftlab.node.broker.metadata import BrokerMetadata
from kraftlab.node.broker.producer_ids import AllocateIds
from kraftlab.node.controller.fake_quorum import FakeQuorum
from kraftlab.node.controller.ports import ControllerConfig, Reply
from kraftlab.node.controller.quorum_controller import QuorumController
from kraftlab.node.metadata.journal import JournalEvent

CLUSTER_ID = "MkU3OEVBNTcwNTJENDM2Qg"


class Broker:
    def __init__(self, bid: int, incarnation: uuid.UUID, **config: Any) -> None:
        self.config = BrokerConfig(
            node_id=bid,
            cluster_id=CLUSTER_ID,
            incarnation_id=incarnation,
            listeners=(BrokerEndpoint("PLAINTEXT", f"10.0.0.{bid}", 9092),),
            **config,
        )
        self.lifecycle = BrokerLifecycle(self.config)
        self.metadata = BrokerMetadata()
        self.apis = BrokerApis(CLUSTER_ID, self.metadata, self.lifecycle)


class MiniCluster:
    def __init__(self, brokers: int = 3, controllers: int = 3, session_timeout_ms: int = 9000, **bcfg: Any) -> None:
        self.q = FakeQuorum()
        self.now = 0
        self.ctrls = {
            i: QuorumController(
                ControllerConfig(node_id=i, cluster_id=CLUSTER_ID, session_timeout_ms=session_timeout_ms, seed=i),
                self.q.writer(i),
            )
            for i in range(1, controllers + 1)
        }
        for i, c in self.ctrls.items():
            self.q.attach(f"c{i}", i, c)
        self.brokers: dict[int, Broker] = {}
        self.cut: set[int] = set()
        self.drop_replies: set[int] = set()
        self.events: list[tuple[int, JournalEvent]] = []
        self.client_replies: dict[Any, Any] = {}
        self._bcfg = {"session_timeout_ms": session_timeout_ms, **bcfg}
        for b in range(1, brokers + 1):
            self.add_broker(100 + b)
        self.q.elect(1)
        self.q.commit()

    def add_broker(self, bid: int, incarnation: uuid.UUID | None = None) -> Broker:
        b = Broker(bid, incarnation or uuid.UUID(int=bid), **self._bcfg)
        self.brokers[bid] = b
        self.q.attach(f"b{bid}-{b.config.incarnation_id}", bid, b.metadata)
        self.q.deliver(f"b{bid}-{b.config.incarnation_id}")
        b.lifecycle.start(self.now)
        return b

    def active(self) -> QuorumController | None:
        return self.ctrls.get(self.q.leader) if self.q.leader is not None else None

    def step(self, dt: int = 50) -> None:
        self.now += dt
        for c in self.ctrls.values():
            c.tick(self.now)
        for bid, b in self.brokers.items():
            b.lifecycle.tick(self.now, b.metadata.highest_offset)
            b.apis.tick(self.now)
            for out in b.lifecycle.take_outputs():
                self._route_lifecycle(bid, out)
            self._route_apis(bid)
            self.events.extend((bid, e) for e in b.metadata.take_outputs())
        self.q.commit()
        self._collect()

    def _route_lifecycle(self, bid: int, out: Any) -> None:
        b = self.brokers[bid]
        if isinstance(out, SendToController):
            c = self.active()
            if bid in self.cut or c is None:
                b.lifecycle.on_failure(out.token, self.now)
            else:
                c.handle_request(("hb", bid, out.token), out.request, self.now)
        else:
            self.events.append((bid, out))

    def _route_apis(self, bid: int) -> None:
        b = self.brokers[bid]
        for out in b.apis.take_outputs():
            if isinstance(out, Forward):
                c = self.active()
                if bid in self.cut or c is None:
                    b.apis.on_forward_failure(out.token, self.now, sent=False)
                else:
                    c.handle_request(("fwd", bid, out.token), out.request, self.now)
            elif isinstance(out, AllocateIds):
                c = self.active()
                if bid in self.cut or c is None:
                    b.apis.producer_ids.on_failure(out.token, self.now)
                else:
                    c.handle_request(("pid", bid, out.token), out.request, self.now)
            elif isinstance(out, ClientReply | Refused):
                self.client_replies[out.token] = out
            elif isinstance(out, JournalEvent):
                self.events.append((bid, out))

    def _collect(self) -> None:
        for cid, c in self.ctrls.items():
            for out in c.take_outputs():
                if isinstance(out, Reply):
                    kind, bid, token = out.token
                    b = self.brokers.get(bid)
                    if b is None:
                        continue
                    if kind == "hb":
                        if bid in self.drop_replies:
                            b.lifecycle.on_failure(token, self.now)
                        else:
                            b.lifecycle.on_response(token, out.response, self.now)
                            for o in b.lifecycle.take_outputs():
                                self._route_lifecycle(bid, o)
                    elif kind == "pid":
                        if bid in self.drop_replies:
                            b.apis.producer_ids.on_failure(token, self.now)
                        else:
                            b.apis.producer_ids.on_response(token, out.response, self.now)
                        self._route_apis(bid)
                    else:
                        b.apis.on_forward_response(token, out.response)
                        self._route_apis(bid)
                else:
                    self.events.append((cid, out))

    def run(self, ms: int, dt: int = 50) -> None:
        for _ in range(ms // dt):
            self.step(dt)

    def run_until(self, pred: Any, max_ms: int = 30_000, dt: int = 50) -> int:
        start = self.now
        while not pred():
            if self.now - start > max_ms:
                raise AssertionError(f"condition not reached within {max_ms} ms")
            self.step(dt)
        return self.now - start

    def client(self, bid: int, token: Any, request: Any, listener: str = "PLAINTEXT") -> Any:
        """Send a client request to broker `bid` and run until it is answered."""
        self.brokers[bid].apis.handle(token, request, self.now, listener)
        self._route_apis(bid)
        self.run_until(lambda: token in self.client_replies, max_ms=10_000)
        return self.client_replies.pop(token)

    def states(self, bid: int) -> list[str]:
        return [e.fields["state"] for b, e in self.events if b == bid and e.ev == "broker_state"]
