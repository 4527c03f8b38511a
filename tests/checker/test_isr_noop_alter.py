"""The isr model and no-op AlterPartitions: Kafka answers an alter that changes nothing with the
current state and the same partition epoch (seen in a real mixed run)."""

from __future__ import annotations

from typing import Any

from kraftlab.checker.history import Event, History
from kraftlab.checker.linear.budget import Budget
from kraftlab.checker.linearizable import check_linearizable
from kraftlab.checker.models import build_model


def alter(p: int, pe: int, isr: list[int], out_pe: int, out_isr: list[int]) -> list[tuple[Any, ...]]:
    v = {"topic": "t", "partition": 0, "leader": 1, "leader_epoch": 3, "partition_epoch": pe, "isr": isr}
    return [(p, "invoke", v), (p, "ok", {"leader": 1, "leader_epoch": 3, "partition_epoch": out_pe, "isr": out_isr})]


def verdict(*ops: list[tuple[Any, ...]]) -> Any:
    rows = [r for op in ops for r in op]
    h = History([Event(i, p, typ, "alter", v, line=i + 1) for i, (p, typ, v) in enumerate(rows)])
    return check_linearizable(h, build_model("isr"), Budget(seconds=10), explain_seconds=0)["valid"]


def test_no_op_alter_repeats_the_current_state() -> None:
    assert verdict(alter(0, 5, [1, 2], 6, [1, 2]), alter(1, 6, [1, 2], 6, [1, 2])) is True


def test_no_op_alter_after_an_unseen_controller_change() -> None:
    # the controller shrank the ISR to [1] at epoch 7 on its own (a fenced broker): not observed
    assert verdict(alter(0, 5, [1, 2], 6, [1, 2]), alter(1, 7, [1], 7, [1])) is True


def test_same_epoch_with_a_different_state_is_illegal() -> None:
    assert verdict(alter(0, 5, [1, 2], 6, [1, 2]), alter(1, 6, [1], 6, [1])) is False


def test_a_change_must_bump_the_epoch() -> None:
    assert verdict(alter(0, 5, [1, 2], 6, [1, 2]), alter(1, 6, [1], 5, [1])) is False
