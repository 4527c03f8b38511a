"""On-disk storage: log segments of Kafka record batches, quorum-state, snapshots, meta.properties."""
