"""InitProducerId on brokers: ids from blocks the controller grants (AllocateProducerIds), unique
across brokers and controller failovers, the next block fetched ahead, a request that waits for
a block, and the journal events the metadata checker judges."""

from __future__ import annotations

import datetime

from broker_harness import MiniCluster
from kio.schema.errors import ErrorCode
from kio.schema.init_producer_id.v0.request import InitProducerIdRequest as Init0
from kio.schema.init_producer_id.v4.request import InitProducerIdRequest

from kraftlab.node.broker.apis import ClientReply
from kraftlab.node.broker.lifecycle import BrokerState

_n = 0


def _up(mc: MiniCluster) -> None:
    mc.run_until(lambda: all(b.lifecycle.state == BrokerState.RUNNING for b in mc.brokers.values()))


def init(mc: MiniCluster, via: int, transactional_id: str | None = None, *,
         v0: bool = False) -> tuple[ErrorCode, int, int]:
    global _n
    _n += 1
    timeout = datetime.timedelta(seconds=60)
    req = (Init0(transactional_id=transactional_id, transaction_timeout=timeout) if v0 else
           InitProducerIdRequest(transactional_id=transactional_id, transaction_timeout=timeout, producer_id=-1,
                                 producer_epoch=-1))
    reply = mc.client(via, f"init-{_n}", req)
    assert isinstance(reply, ClientReply) and type(reply.response).__version__ == type(req).__version__
    r = reply.response
    return r.error_code, r.producer_id, r.producer_epoch


def _events(mc: MiniCluster, ev: str) -> list[dict[str, object]]:
    return [e.fields for _, e in mc.events if e.ev == ev]


def test_ids_unique_across_brokers_in_blocks_of_the_controller(mc: MiniCluster) -> None:
    _up(mc)
    first = init(mc, 101)
    assert first == (ErrorCode.none, 0, 0)
    assert init(mc, 101)[1] == 1
    assert init(mc, 102)[1] == 1000  # broker 102's own block
    assert init(mc, 103, v0=True)[:2] == (ErrorCode.none, 2000)
    assert [(e["broker"], e["start"], e["len"]) for e in _events(mc, "producer_id_block")] == [
        (101, 0, 1000), (102, 1000, 1000), (103, 2000, 1000)]
    assert [e["producer_id"] for e in _events(mc, "producer_id")] == [0, 1, 1000, 2000]
    assert mc.active().committed_image.next_producer_id == 3000


def test_next_block_fetched_ahead_and_ids_continue_after_failover(mc: MiniCluster) -> None:
    _up(mc)
    granted = [init(mc, 101)[1] for _ in range(899)]
    assert granted == list(range(899)) and len(_events(mc, "producer_id_block")) == 1
    granted.append(init(mc, 101)[1])  # the 900th id: 90% of the block handed out, the next one is asked for
    mc.run(200)
    assert [e["start"] for e in _events(mc, "producer_id_block")] == [0, 1000]
    mc.q.elect(2)
    mc.q.commit()
    granted += [init(mc, 101)[1] for _ in range(100)]  # the rest of the first block, then the second
    assert granted == list(range(1000))
    assert init(mc, 102)[1] == 2000  # the new controller continues after every committed block
    granted.append(init(mc, 101)[1])
    assert granted[-1] == 1000


def test_a_request_waits_for_a_block_then_gives_up_with_a_retriable_error(mc: MiniCluster) -> None:
    _up(mc)
    mc.cut.add(101)
    b = mc.brokers[101]
    b.apis.handle("wait", InitProducerIdRequest(transactional_id=None, transaction_timeout=datetime.timedelta(0),
                                                producer_id=-1, producer_epoch=-1), mc.now)
    mc.run(1000)
    assert "wait" not in mc.client_replies
    mc.cut.discard(101)
    mc.run_until(lambda: "wait" in mc.client_replies)
    assert mc.client_replies.pop("wait").response.error_code == ErrorCode.none
    mc.cut.add(102)
    mc.brokers[102].apis.handle("late", Init0(transactional_id=None, transaction_timeout=datetime.timedelta(0)),
                                mc.now)
    mc.run_until(lambda: "late" in mc.client_replies, max_ms=20_000)
    r = mc.client_replies.pop("late").response
    assert (r.error_code, r.producer_id) == (ErrorCode.coordinator_load_in_progress, -1)


def test_transactional_ids_need_a_coordinator_this_node_does_not_run(mc: MiniCluster) -> None:
    _up(mc)
    assert init(mc, 101, "tx-1") == (ErrorCode.coordinator_not_available, -1, -1)
    assert _events(mc, "producer_id_block") == []
