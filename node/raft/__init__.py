"""The sans-IO Raft core of the metadata quorum (KIP-595 with pre-vote and check-quorum)."""
