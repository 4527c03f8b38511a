"""Hosts the suite runs the node on: network namespaces (default), SSH/VMs, Docker containers."""
