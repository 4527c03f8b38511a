"""On-disk storage: log segments of Kafka record batches, quorum-state, snapshots, meta.properties.

Modules: `batches` (record batch v2 codec, validation, torn-tail scan), `control` (control record
keys, snapshot header/footer), `log` (DiskLog: the ReplicatedLog on disk; `segment`, `recovery`,
`epoch_cache` and `checkpoint` are its parts), `quorum_state` (the quorum-state file),
`snapshots` (DiskSnapshotStore), `meta_properties` (meta.properties v1, format/validate),
`dump` (walk segment/snapshot files for dump-log), `layout` (file names), `atomic` (durable
replace), `errors`.
"""
