"""Metadata of the KRaft cluster: records of the `__cluster_metadata` log and the in-memory image."""
