"""``ftctl figure 004-fig5 --host spark`` without Spark: the figure's runs replaced by
histories and sink latencies written by hand, read back into when each query came back,
available queries and relative latency."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ftctl.figures import FigureOptions
from ftctl.figures.fig_004_spark import QUICK, RUNS, _Keep, spark_level
from ftctl.kernel.history import HistoryEvent
from ftctl.run.execute import RunRequest

KILL = 10.0
LOST = ["cnt[1]", "win[0]", "win[1]", "out1[0]", "out2[0]", "both[0]", "both[1]", "out3[0]"]
OUT1 = ["cnt[1]", "out1[0]"]


def _events(runs: list[tuple[float, list[str]]]) -> list[HistoryEvent]:
    recs: list[tuple[float, str, dict[str, Any]]] = [
        (KILL + 1.5, "fault-injected", {"type": "kill-group", "details": {"kills": [
            {"worker": "w0", "t": KILL}, {"worker": "w1", "t": KILL + 0.1}]}}),
        (KILL + 0.2, "failure-detected", {"instances": LOST}),
        # ftctl starts each worker again; the master sees it 2 s later.
        (KILL + 2.0, "fault-step", {"step": "worker-started", "worker": "w3"}),
        (KILL + 6.0, "fault-step", {"step": "worker-started", "worker": "w4"}),
        (KILL + 4.0, "capacity-changed", {"total": 8, "free": 4, "alive": ["w2", "w3"],
                                          "joined": ["w3"], "left": []}),
        (KILL + 8.0, "capacity-changed", {"total": 12, "free": 8, "alive": ["w2", "w3", "w4"],
                                          "joined": ["w4"], "left": []}),
        # Each worker offered to the protocol once a slot waits on it.
        (KILL + 5.5, "capacity-warm", {"workers": ["w3"], "seconds": 1.5}),
        (KILL + 9.5, "capacity-warm", {"workers": ["w4"], "seconds": 1.5}),
        *((t, "instance-running", {"instances": who}) for t, who in runs)]
    return [HistoryEvent(k, t, "spark", kind, data)
            for k, (t, kind, data) in enumerate(sorted(recs, key=lambda r: r[0]))]


def _latency(back: dict[str, float]) -> dict[str, list[tuple[float, float]]]:
    """0.1 s of latency every 0.25 s before the kill; after it, nothing until the query is
    back, then 0.5 s (its backlog) for a second, then 0.1 s again."""
    out: dict[str, list[tuple[float, float]]] = {}
    for q in ("out1", "out2", "out3"):
        pts = [(k * 0.25, 0.1) for k in range(int(KILL * 4))]
        pts += [(back[q] + k * 0.25, 0.5 if k < 4 else 0.1)
                for k in range(int((KILL + 16 - back[q]) * 4))]
        out[q] = pts
    return out


SCRIPTS = {
    # PRG: out1's two instances on the first worker back, the rest on the second.
    "PRG": ([(KILL + 6.0, OUT1), (KILL + 10.0, [i for i in LOST if i not in OUT1])],
            {"out1": KILL + 6.0, "out2": KILL + 10.0, "out3": KILL + 10.0}),
    # Blocking: nothing until every lost instance fits.
    "OPC (blocking)": ([(KILL + 10.0, LOST)],
                       {"out1": KILL + 10.0, "out2": KILL + 10.0, "out3": KILL + 10.0}),
}


def fake_runner(seen: list[RunRequest]) -> Any:
    def run(request: RunRequest, ext: Any) -> int:
        assert isinstance(ext, _Keep)
        seen.append(request)
        runs, back = SCRIPTS[ext.run.name]
        ext.run.events = _events(runs)
        ext.run.latency = _latency(back)
        ext.run.passed = True
        ext.run.t_kill = KILL
        return 0
    return run


def test_queries_come_back_in_steps_under_prg_and_at_once_under_blocking(
        tmp_path: Path) -> None:
    seen: list[RunRequest] = []
    result = spark_level(FigureOptions(tmp_path, host="spark", quick=True,
                                       options={"threshold": "1.2"}), fake_runner(seen))
    # The quick figure: PRG and blocking, each a chaos run of 3 workers x 5 cores with
    # the rack=a scenario, on its own cluster.
    assert [r.config["run"] for r in seen] == [name for name, _, _ in RUNS[:2]]
    assert all(r.master is None and r.workers == 3 and r.cores == 5 and r.spares == 0
               and r.labels == ["rack=a", "rack=a", "rack=b"] for r in seen)
    assert seen[1].params.model_dump()["schedule"] == "blocking"
    assert (tmp_path / "fig5-spark-scenario.yaml").read_text() == QUICK.scenario()
    rows = {r[0]: r for r in result.rows}
    assert rows["PRG"][1:8] == ("2.0 6.0", "4.0 8.0", "5.5 9.5",
                                "out1=6.0 out2=10.0 out3=10.0", "6.0", "10.0", "7.0")
    assert rows["OPC (blocking)"][1:8] == ("2.0 6.0", "4.0 8.0", "5.5 9.5",
                                           "out1=10.0 out2=10.0 out3=10.0", "10.0", "10.0",
                                           "11.0")
    assert result.summary["PRG"]["offered"] == [5.5, 9.5]
    assert result.summary["PRG"]["started"] == [2.0, 6.0]
    prg = result.summary["PRG"]
    opc = result.summary["OPC (blocking)"]
    at = {t: n for t, n in zip(prg["t"], prg["available"], strict=True)}
    # Before the kill all 3; out1 alone from the step after its backlog; all 3 again.
    assert at[-2.0] == 3 and at[3.0] == 0 and at[7.0] == 1 and at[12.0] == 3
    at_opc = {t: n for t, n in zip(opc["t"], opc["available"], strict=True)}
    assert at_opc[7.0] == 0 and at_opc[12.0] == 3
    # Relative latency: 5x the pre-kill median in the first second back.
    assert prg["rl"]["out1"][prg["t"].index(6.0)] == 5.0
    assert all(p.exists() for p in result.files)


def test_threshold_decides_what_counts_as_available(tmp_path: Path) -> None:
    result = spark_level(FigureOptions(tmp_path, host="spark", quick=True,
                                       options={"threshold": "6"}), fake_runner([]))
    # With Θ = 6 the backlog second already counts: out1 is available from 6 s.
    assert {r[0]: r[7] for r in result.rows} == {"PRG": "6.0", "OPC (blocking)": "10.0"}


def test_a_global_rollback_takes_every_query_down_until_its_group_runs() -> None:
    """checkpoint stops the survivors too (``instance-stopped``): out2, none of whose
    instances failed, is down from the stop until the whole group runs again."""
    from ftctl.config.load import load_topology
    from ftctl.figures.fig_004_spark import TOPOLOGY, timeline
    from ftctl.runtime.graph import ExecutionGraph
    from ftctl.runtime.queries import topology_queries

    graph = ExecutionGraph(load_topology(TOPOLOGY))
    every = list(graph.order)
    events = [HistoryEvent(0, KILL + 0.2, "spark", "failure-detected",
                           {"instances": ["out1[0]"]}),
              HistoryEvent(1, KILL + 0.3, "spark", "instance-stopped", {"instances": every}),
              HistoryEvent(2, KILL + 9.0, "spark", "instance-running", {"instances": every})]
    tl = timeline(events, {q.name: q.operators for q in topology_queries(graph.topology)},
                  {i: s.op for i, s in graph.instances.items()}, KILL, 40.0)
    assert tl.back == {"out1": 9.0, "out2": 9.0, "out3": 9.0}
    assert tl.up["out2"] == [(0.0, KILL + 0.3), (KILL + 9.0, 40.0)]
    assert tl.up["out1"] == [(0.0, KILL + 0.2), (KILL + 9.0, 40.0)]
