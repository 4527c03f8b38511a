"""The queue checker (Jepsen's Kafka workload): sends and polls of partitions in, lost, duplicated,
reordered and skipped records out, each explained with the ops and offsets that show it.

observe (the history's two shapes) → logs (each partition as the history saw it) → rules (one
Kafka guarantee each, judged alone) → check (the verdict, the data-plane counts) → picture (each
partition where a rule broke: offsets × values, lost and duplicated records marked).
"""

from kraftlab.checker.queue.check import check_queue
from kraftlab.checker.queue.rules import RULES

__all__ = ["RULES", "check_queue"]
