"""The Spark SQL oracles of Nexmark Q0-Q8 against the golden run (spark marker)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ftctl.sim.golden import golden_output
from ftctl.verify.golden import golden_for
from ftctl.verify.oracle import oracle_check
from tests.test_nexmark_queries import EXPECTED, seeded

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    pytest.importorskip("pyspark")
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[1]")
        .appName("ftctl-nexmark-oracle-test")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    try:
        yield session
    finally:
        session.stop()


@pytest.mark.parametrize("query", sorted(EXPECTED))
def test_oracle_matches_golden(spark: Any, tmp_path: Path, query: str) -> None:
    # The default rate at 20,000 events spans 2 s of event time: several Q5/Q7/Q8
    # windows need the spec's slower seeded rate, so use it.
    topo = seeded(query, records=20_000, seed=3)
    outputs = golden_for(topo, golden_output, tmp_path)
    result = oracle_check(spark, topo, outputs, cache=False)
    assert result is not None
    assert result.passed, result.describe()
    assert result.keys > 0
    # A lost key and a repeated one are both caught.
    (sink,) = outputs
    first = outputs[sink][0]
    lost = oracle_check(spark, topo, {sink: [r for r in outputs[sink] if r[0] != first[0]]},
                        cache=False)
    assert lost is not None and not lost.passed
