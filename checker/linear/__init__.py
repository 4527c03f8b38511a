"""Linearizability: the Wing–Gong/Lowe search, partitioning and racing, explanations, plots."""
