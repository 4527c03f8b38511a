"""One quiet local[2] SparkSession for the whole test session (starting one costs ~10 s)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from kraftlab.spark_analysis.session import spark_session

    session = spark_session("local[2]", tmp_path_factory.mktemp("spark-logs"))
    try:
        yield session
    finally:
        session.stop()
