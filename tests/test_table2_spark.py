"""``ftctl figure 002-table2 --host spark`` without Spark: the cluster and the runs are
replaced, and the table must carry each run's seconds and peer messages through."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from ftctl.figures import FigureOptions
from ftctl.figures import table2_spark as table2
from ftctl.run.capture import Capture
from ftctl.run.execute import RunRequest
from tests.fakecluster import URL, FakeWarmCluster


def test_every_run_goes_to_one_warm_cluster_and_its_numbers_reach_the_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    cluster = FakeWarmCluster()
    requests: list[RunRequest] = []

    def fake_execute(request: RunRequest, keep: Any) -> int:
        assert isinstance(keep, Capture)
        requests.append(request)
        r = len(requests)  # seconds and messages grow with each run, EO after AMO
        keep.result = SimpleNamespace(
            complete=True, seconds=10.0 + r, started_at=10.0,
            stats={"peer_messages": {"ack": 10 * r, "data": r}}, outputs={"out[0]": [1, 2]})
        return 0

    monkeypatch.setattr(table2, "warm_cluster", cluster)
    monkeypatch.setattr(table2, "execute", fake_execute)
    res = table2.run_spark(FigureOptions(tmp_path, host="spark", quick=True,
                                         options={"factors": "2,3"}))
    # One cluster for all four runs, sized for the largest R, under the figure's own prefix.
    (master, cores, prefix), = cluster.started
    assert master is None and prefix == "ftctl-table2-" and cores > 0
    assert [r.master for r in requests] == [URL] * 4
    assert all(r.workers == table2.WORKERS and r.cores == cores for r in requests)
    assert [r.params.semantics for r in requests] == list(table2.SEMANTICS) * 2
    assert res.rows == ((2, 1.0, 2.0, 1.0, 11, 22, "yes"), (3, 3.0, 4.0, 1.0, 33, 44, "yes"))
