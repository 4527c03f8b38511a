"""The KRaft node: the system under test. Imports nothing from the suite around it."""
