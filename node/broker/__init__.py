"""The sans-IO broker side: lifecycle states, metadata replay, client-facing APIs."""
