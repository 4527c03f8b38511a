"""Kafka-protocol clients and operation generators that produce a Jepsen-style history."""
