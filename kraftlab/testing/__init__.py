"""Test support shipped with the distribution: the builders the tests and the benchmarks share —
clusters of real `kraft-node` processes on loopback (`kraftnode`), diskfs mounts (`diskfs_mounts`),
simulated registry histories (`registry_sim`), SIGTERM handled as an interrupt (`interrupts`).
Imported by tests and bench/ only: the node and the suite never import it (pyproject [tool.importlinter])."""
