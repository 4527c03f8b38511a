"""Metadata of the KRaft cluster: records of the `__cluster_metadata` log and the in-memory image.

- `records`: KIP-631 record framing over kio data entities; `encode`/`decode`,
  `to_log_record`/`from_log_record`, `to_json` and `dump_payload` (the RecordDecoder that
  `node.storage.dump.dump_lines` takes for `kraft-node dump-log`).
- `image`: `MetadataImage`, replayed from snapshot + log; `to_records()` (snapshot content,
  canonical order), `digest()` (equal on two nodes iff their images are equal).
- `replay`: `CommittedReplay`, the committed-image bookkeeping shared by controller and broker.
- `fanout`: `FanOut`, one Raft state machine feeding the controller and the broker of a process.
- `shell`: `image_tree` and `MetadataShell` for `kraft-node shell` (from a snapshot file:
  `MetadataImage.from_records([decode(r.value) for r in snapshot_records])`).
- `journal`: `JournalEvent`, the journal lines cores return.
"""
