"""kraftlab's exit codes: the run's verdict (0 valid, 1 invalid, 2 unknown), 254 for bad arguments
or input, 255 when kraftlab itself failed (a bug or an environment error) — one table for the CLI,
its commands and the test matrix."""

from __future__ import annotations

EXIT_VALID = 0
EXIT_INVALID = 1
EXIT_UNKNOWN = 2
EXIT_BAD_ARGS = 254
EXIT_CRASHED = 255
