"""The node process, in parts: the application seam, the controller/broker application, storage
opening, the Raft driver and the Raft transport. `node.server` assembles them into `NodeServer` and
`run_node` (what `kraft-node start` runs)."""
