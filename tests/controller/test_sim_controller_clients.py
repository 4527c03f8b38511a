"""The cluster simulator's controller clients (node/sim/kraft_topics.py, kraft_acls.py, kraft_scram.py)
reach every kind of answer Kafka gives over their request space — accepted, each refusal, a standby's
NOT_CONTROLLER — in two ordinary runs, and every answer they got was judged right."""

from __future__ import annotations

from collections import Counter

from kraftlab.node.sim.kraft import KraftSim


def test_every_kind_of_answer_is_reached_and_judged_in_two_runs() -> None:
    topics: Counter[tuple[str, str]] = Counter()
    acls: Counter[tuple[str, str]] = Counter()
    scram: Counter[str] = Counter()
    for seed in (16, 17):
        sim = KraftSim(seed=seed)
        sim.run(fault_ms=15_000, settle_ms=15_000)
        sim.check_converged()
        topics += sim.topic_admin.answered
        acls += sim.acl_admin.answered
        scram += sim.scram_admin.answered
    assert {("CreateTopics", code) for code in (
        "none", "invalid_request", "invalid_topic_exception", "topic_already_exists", "invalid_partitions",
        "invalid_replication_factor", "invalid_replica_assignment", "not_controller")} <= set(topics)
    assert {("DeleteTopics", code) for code in (
        "none", "unknown_topic_or_partition", "unknown_topic_id", "invalid_request", "not_controller")} <= set(topics)
    assert {("CreateAcls", "none"), ("CreateAcls", "invalid_request"), ("CreateAcls", "not_controller"),
            ("DeleteAcls", "none"), ("DeleteAcls", "none+"), ("DeleteAcls", "not_controller")} <= set(acls)
    assert {"none", "duplicate_resource", "resource_not_found", "unacceptable_credential",
            "unsupported_sasl_mechanism", "not_controller"} <= set(scram)
