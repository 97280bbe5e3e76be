"""Batch oracles: the expected final result computed by Spark SQL straight from the input.

The golden run shares the runtime's operators with every run under test, so a bug in an
operator would be in both. An oracle shares only the input generator: it regenerates the
source records [0, input.records) with the topology's seed and the source's params, loads
them into Spark as a pyarrow Table (no pandas needed) and computes the per-key result with
a SQL query. The sink output is reduced to its final value per key and compared.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import pyarrow as pa

from ftctl.config.errors import ConfigError
from ftctl.config.topology import Topology
from ftctl.runtime.records import Record
from ftctl.runtime.sources import make_source
from ftctl.sim.runner import sink_modes

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# Records generated per call to a source; bounds the Python list held at once.
CHUNK = 100_000
MAX_MISMATCHES = 10


@dataclass(frozen=True)
class Oracle:
    """A batch computation of a topology's expected final output.

    ``query`` is Spark SQL over ``{input}`` (the source records as a table built by
    ``to_table``) returning columns ``key`` and ``value``. ``final`` says how the sink's
    output reduces to one value per key: ``max`` for running counts (independent of the
    order in which sink instances' outputs were concatenated), ``last`` otherwise.
    """

    name: str
    description: str
    source: str
    to_table: Callable[[list[Record]], pa.Table]
    query: str
    final: Literal["max", "last"] = "max"


def _lines_table(records: list[Record]) -> pa.Table:
    return pa.table({"line": pa.array([r[1] for r in records], pa.string())})


def _articles_table(records: list[Record]) -> pa.Table:
    return pa.table({"article": pa.array([int(r[0]) for r in records], pa.int64())})


ORACLES: dict[str, Oracle] = {
    "word-count": Oracle(
        name="word-count",
        description="occurrences per word in the text source's lines",
        source="source.text",
        to_table=_lines_table,
        # The empty-word filter matches str.split() should a line ever hold two spaces.
        query=(
            "SELECT word AS key, count(*) AS value"
            " FROM (SELECT explode(split(line, ' ')) AS word FROM {input})"
            " WHERE word <> '' GROUP BY word"
        ),
    ),
    "vote-count": Oracle(
        name="vote-count",
        description="votes per article id in the votes source",
        source="source.votes",
        to_table=_articles_table,
        query="SELECT article AS key, count(*) AS value FROM {input} GROUP BY article",
    ),
}


@dataclass
class OracleResult:
    """The sink's final values against the oracle's.

    ``mismatches`` holds the first few ``(key, expected, actual)`` in key order; a key the
    oracle has but the output lacks has ``actual`` None, and the reverse ``expected`` None.
    """

    passed: bool
    keys: int
    mismatches: list[tuple[Any, Any, Any]] = field(default_factory=list)
    total_mismatches: int = 0
    oracle: str = ""
    sink: str = ""

    def describe(self) -> str:
        if self.passed:
            return f"oracle {self.oracle}: {self.keys} keys match"
        first = ", ".join(f"{k!r}: expected {e!r}, got {a!r}" for k, e, a in self.mismatches)
        return (f"oracle {self.oracle}: {self.total_mismatches} of {self.keys} keys differ"
                f" ({first})")

    def to_json(self) -> dict[str, Any]:
        return {
            "oracle": self.oracle,
            "sink": self.sink,
            "passed": self.passed,
            "keys": self.keys,
            "total_mismatches": self.total_mismatches,
            "mismatches": [
                {"key": repr(k), "expected": repr(e), "actual": repr(a)}
                for k, e, a in self.mismatches
            ],
        }


# ------------------------------------------------------------------ topology checks


def oracle_for(topology: Topology) -> Oracle | None:
    """The topology's oracle, None when it declares none.

    Raises ConfigError for an unknown name or a topology the oracle cannot read; needs no
    Spark, so a host can call it before starting a cluster.
    """
    if topology.oracle is None:
        return None
    oracle = ORACLES.get(topology.oracle)
    if oracle is None:
        known = ", ".join(sorted(ORACLES))
        raise ConfigError(topology.name, "oracle",
                          f"unknown oracle {topology.oracle!r} (known: {known})")
    if not any(op.type == oracle.source for op in topology.operators):
        raise ConfigError(topology.name, "oracle",
                          f"oracle {oracle.name!r} reads a {oracle.source} operator;"
                          " the topology has none")
    oracle_sink(topology)
    return oracle


def oracle_sink(topology: Topology) -> str:
    """The one sink an oracle's result is compared with."""
    sinks = list(sink_modes(topology))
    if len(sinks) != 1:
        raise ConfigError(topology.name, "oracle",
                          f"an oracle needs exactly one sink, found {len(sinks)}"
                          + (f" ({', '.join(sinks)})" if sinks else ""))
    return sinks[0]


# ------------------------------------------------------------------ input and query


def input_table(topology: Topology, oracle: Oracle) -> pa.Table:
    """All records [0, input.records) of every source of the oracle's type, as one table."""
    n, seed = topology.input.records, topology.input.seed
    parts: list[pa.Table] = []
    for op in topology.operators:
        if op.type != oracle.source:
            continue
        gen = make_source(op.type, seed, op.params)
        for start in range(0, n, CHUNK):
            parts.append(oracle.to_table(gen(start, min(n, start + CHUNK))))
    return pa.concat_tables(parts)


def oracle_expected(spark: SparkSession, topology: Topology) -> dict[Any, Any]:
    """The oracle's value per key. Raises ConfigError when the topology has no oracle."""
    oracle = oracle_for(topology)
    if oracle is None:
        raise ConfigError(topology.name, "oracle", "the topology declares no oracle")
    frame = spark.createDataFrame(input_table(topology, oracle))
    rows = spark.sql(oracle.query, input=frame).collect()
    return {row["key"]: row["value"] for row in rows}


# ------------------------------------------------------------------ comparison


def final_per_key(records: Iterable[tuple[Any, Any]], how: str = "last") -> dict[Any, Any]:
    """One value per key: the last in output order, or the largest (``how="max"``)."""
    final: dict[Any, Any] = {}
    if how == "max":
        for k, v in records:
            if k not in final or v > final[k]:
                final[k] = v
    else:
        for k, v in records:
            final[k] = v
    return final


def compare(expected: dict[Any, Any], actual: dict[Any, Any],
            limit: int = MAX_MISMATCHES) -> tuple[int, list[tuple[Any, Any, Any]]]:
    """(number of differing keys, the first ``limit`` of them in key order)."""
    keys = _sorted_keys(set(expected) | set(actual))
    diffs = [(k, expected.get(k), actual.get(k)) for k in keys
             if k not in expected or k not in actual or expected[k] != actual[k]]
    return len(diffs), diffs[:limit]


def oracle_check(spark: SparkSession, topology: Topology,
                 outputs: dict[str, list[tuple[Any, Any]]]) -> OracleResult | None:
    """The sink's final values per key against the oracle; None without an oracle."""
    oracle = oracle_for(topology)
    if oracle is None:
        return None
    sink = oracle_sink(topology)
    expected = oracle_expected(spark, topology)
    actual = final_per_key(outputs.get(sink, []), oracle.final)
    total, first = compare(expected, actual)
    return OracleResult(passed=total == 0, keys=len(expected), mismatches=first,
                        total_mismatches=total, oracle=oracle.name, sink=sink)


def _sorted_keys(keys: set[Any]) -> list[Any]:
    # Keys of one sink share a type in practice; fall back to repr order for mixed keys.
    try:
        return sorted(keys)
    except TypeError:
        return sorted(keys, key=repr)
