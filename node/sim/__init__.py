"""Deterministic simulator: seeded scheduler, simulated network and disks, crash and restart."""
