"""The sans-IO quorum controller (KIP-631): registration, heartbeats, fencing, topics, ISRs."""
