"""The runner: the test lifecycle, the store, the report and the `kraftlab` command line."""
