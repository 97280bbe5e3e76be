"""``benchmarks/sim_at_size.py`` on a small input: one row per pair, schedules run."""

from __future__ import annotations

import pytest

from tests.benchscripts import load_benchmark

pytestmark = pytest.mark.sim


def test_prints_a_row_per_topology_and_protocol(capsys: pytest.CaptureFixture[str]) -> None:
    load_benchmark("sim_at_size").main(["-n", "2", "--records", "4000", "--topologies",
                                        "nexmark/q5", "--protocols", "checkpoint,none"])
    rows = [line.split() for line in capsys.readouterr().out.splitlines()
            if line.startswith("nexmark/q5")]
    assert [r[1] for r in rows] == ["checkpoint", "none"]
    for row in rows:
        assert row[3] == "2" and float(row[4]) > 0 and row[6] == "yes", row
