"""tests/zoo: the cluster harness (kraft_zoo.py) sits next to the tests that import it."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
