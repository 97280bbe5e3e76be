"""Structured Streaming as an engine target, without Spark: what compiles and what is
refused, the sink store keyed by batch id, the fed input, the options."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from chaos.schedule import PlannedFault
from ftctl.config.errors import ConfigError
from ftctl.config.load import load_topology
from ftctl.engines import engine_of
from ftctl.engines.structured import cli, rows, sinkdir
from ftctl.engines.structured.feed import Feed
from ftctl.engines.structured.plan import Refused, compile_plan
from ftctl.runtime.graph import ExecutionGraph
from ftctl.runtime.topology import Topology

ROOT = Path(__file__).resolve().parent.parent
BUNDLED = sorted((ROOT / "topologies").rglob("*.yaml"))
# A stream joined with a bounded table (a stream-static join), and a window_join of two
# streams; tests/test_structured_spark.py runs it on Spark.
JOINS = """
name: joins
description: hashtags with their topics from a table, and pairs of users in one window
input: {records: 600, seed: 5, batch: 50}
operators:
  - {name: tags, type: source.hashtags, parallelism: 2, params: {keys: 6, skew: 0.5}}
  - {name: topics, type: source.table, params: {record_type: any, rows: [
      ["#tag0", "music"], ["#tag1", "sport"], ["#tag1", "news"], ["#tag3", "art"]]}}
  - {name: topic, type: join, parallelism: 2}
  - {name: enriched, type: sink, mode: multiset}
  - {name: other, type: source.hashtags, input: {records: 300, seed: 6},
     params: {keys: 6, skew: 0.5}}
  - {name: together, type: window_join, params: {size: 40}, parallelism: 2}
  - {name: pairs, type: sink, mode: multiset}
edges:
  - {from: tags, to: topic, partition: hash}
  - {from: topics, to: topic, partition: hash, port: 1}
  - {from: topic, to: enriched, partition: hash}
  - {from: tags, to: together, partition: hash}
  - {from: other, to: together, partition: hash, port: 1}
  - {from: together, to: pairs, partition: hash}
"""


def bundled_table() -> dict[str, str | None]:
    """docs/structured-streaming.md's table of the bundled topologies: each one's name
    (its path under topologies/, no suffix) and the reason it is refused, None when it
    compiles."""
    text = (ROOT / "docs/structured-streaming.md").read_text()
    after = text.split("<!-- bundled-topologies:", 1)[1].split("\n", 1)[1]
    table: dict[str, str | None] = {}
    for line in after.split("\n\n", 1)[0].splitlines()[2:]:
        m = re.fullmatch(r"\| `([\w/-]+)` \| (?:compiles|refused: `([^`]+)`.*) \|", line)
        assert m, f"not a row of the table: {line!r}"
        table[m[1]] = m[2]
    return table


def bundled_name(path: Path) -> str:
    return str(path.relative_to(ROOT / "topologies").with_suffix(""))


def test_the_docs_table_of_bundled_topologies_is_complete_and_true() -> None:
    """Every bundled topology has a row, and the row says what ``compile_plan`` does (the
    Spark test checks the compiled ones on Spark)."""
    table = bundled_table()
    assert sorted(table) == sorted(bundled_name(p) for p in BUNDLED)
    for path in BUNDLED:
        reason = table[bundled_name(path)]
        if reason is None:
            compile_plan(load_topology(path), str(path))
        else:
            with pytest.raises(Refused) as refused:
                compile_plan(load_topology(path), str(path))
            assert reason in str(refused.value), (path, str(refused.value))


def joins_topology(tmp_path: Path, text: str = JOINS) -> Topology:
    path = tmp_path / "joins.yaml"
    path.write_text(text)
    return load_topology(path)


@pytest.mark.parametrize("path", BUNDLED, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_bundled_topology_compiles_or_is_refused_in_one_line(path: Path) -> None:
    topology = load_topology(path)
    try:
        plan = compile_plan(topology, str(path))
    except Refused as exc:
        text = str(exc)
        assert "\n" not in text and text.startswith(f"{path}: operators[")
        assert exc.why in ("cannot express", "at-least-once only")
        # what is refused is a join, an operator not compiled, or a chain of two stateful
        kinds = {op.type for op in topology.operators}
        assert "nexmark.winning_bids" in kinds or "argmax" in text \
            or "second stateful" in text
        return
    assert plan.sinks == [op.name for op in topology.operators if op.type == "sink"]
    # every source instance covers its range of the input once
    graph = ExecutionGraph(topology)
    got = {f"{s.op}[{s.index}]": (s.lo, s.hi) for s in plan.source_instances()}
    assert got == {iid: graph.source_range(iid) for iid in graph.sources}


def test_the_seed_topologies_and_the_stream_stream_joins_compile() -> None:
    assert compile_plan(load_topology(ROOT / "topologies/wordcount.yaml")).stages["count"].stateful
    windowed = compile_plan(load_topology(ROOT / "topologies/windowed.yaml"))
    assert windowed.windowed("out")
    q3 = compile_plan(load_topology(ROOT / "topologies/nexmark/q3.yaml"))
    match = q3.stages["match"]
    assert (match.kind, match.stateful, match.static_port) == ("join", True, None)
    assert match.port_inputs(0) == ["by-id"] and match.port_inputs(1) == ["by-seller"]
    q8 = compile_plan(load_topology(ROOT / "topologies/nexmark/q8.yaml")).stages["same-window"]
    assert (q8.kind, q8.stateful, q8.static_port) == ("window_join", True, None)
    # a window after a stream-stream join is a second stateful operator on the path
    with pytest.raises(Refused, match=r"operators\[4\] \(win\)\.type: .*second stateful"):
        compile_plan(load_topology(ROOT / "topologies/joins/join-then-window.yaml"))


def test_a_join_with_a_table_is_stream_static_and_holds_no_state(tmp_path: Path) -> None:
    plan = compile_plan(joins_topology(tmp_path))
    topic, together = plan.stages["topic"], plan.stages["together"]
    assert (topic.static_port, topic.stateful) == (1, False)
    assert (together.static_port, together.stateful) == (None, True)
    # stateless, so a running count may follow it; after a stream-stream join it may not
    counted = JOINS.replace("  - {name: enriched, type: sink, mode: multiset}",
                            "  - {name: n, type: count, parallelism: 2}\n"
                            "  - {name: enriched, type: sink, mode: multiset}").replace(
        "  - {from: topic, to: enriched, partition: hash}",
        "  - {from: topic, to: n, partition: hash}\n  - {from: n, to: enriched}")
    assert compile_plan(joins_topology(tmp_path, counted)).stages["n"].stateful
    streamed = re.sub(r"type: source\.table, params: \{.*?\]\]\}\}",
                      "type: source.hashtags, params: {keys: 6}}", counted, flags=re.S)
    with pytest.raises(Refused, match=r"\(n\)\.type: .*second stateful"):
        compile_plan(joins_topology(tmp_path, streamed))
    # tables on both ports: each is read as a stream
    both = JOINS.replace("  - {from: tags, to: topic, partition: hash}",
                         "  - {from: topics, to: topic, partition: hash}")
    assert compile_plan(joins_topology(tmp_path, both)).stages["topic"].static_port is None


@pytest.mark.parametrize("mode", ["ordered-per-key", "final-per-key"])
def test_a_sink_judging_order_after_a_join_is_refused(tmp_path: Path, mode: str) -> None:
    ordered = JOINS.replace("{name: pairs, type: sink, mode: multiset}",
                            f"{{name: pairs, type: sink, mode: {mode}}}")
    with pytest.raises(Refused, match=r"joins\.yaml: operators\[6\] \(pairs\)\.mode: "
                                      rf"structured-streaming cannot express: {mode} "
                                      r"after 'together'"):
        compile_plan(joins_topology(tmp_path, ordered), "joins.yaml")


def test_joined_rows_are_the_records_ftctls_join_emits() -> None:
    """The projection after Spark's join, on the rows Spark hands it (pure pandas)."""
    import pandas as pd

    from ftctl.engines.structured.query import _pairs
    from ftctl.runtime.operators import JoinOp, WindowJoinOp

    left = [("a", "x", 5, 100), ("a", "y", 37, 101)]  # (key, value, ts, seq)
    right = [("a", "p", 12, 7), ("a", "q", 41, 9)]
    frame = pd.DataFrame([{"l_seq": ls, "l_k": rows.dumps(k), "l_v": rows.dumps(lv),
                           "l_ts": lt, "l_due": 1.0, "l_w": lt - lt % 40, "l_rank": 1,
                           "r_seq": rs, "r_k": rows.dumps(k), "r_v": rows.dumps(rv),
                           "r_ts": rt, "r_due": 2.0, "r_w": rt - rt % 40, "r_rank": j + 1}
                          for k, lv, lt, ls in left for j, (_, rv, rt, rs) in enumerate(right)])

    def emitted(df: pd.DataFrame) -> list[tuple[object, object, int]]:
        return sorted((rows.loads(k), rows.loads(v), int(t))
                      for k, v, t in zip(df["k"], df["v"], df["ts"], strict=True))

    join = JoinOp()
    golden = join.process([(k, v, t) for k, v, t, _ in left], 0) + join.process(
        [(k, v, t) for k, v, t, _ in right], 1)
    out = next(_pairs(None, None)(iter([frame])))
    assert emitted(out) == sorted(golden)
    assert list(out["seq"]) == [100, 100, 101, 101] and set(out["due"]) == {2.0}
    # a window_join keeps the pairs of one window, at the window's last millisecond
    wj = WindowJoinOp(40)
    wj.process([(k, v, t) for k, v, t, _ in left], 0)
    wj.process([(k, v, t) for k, v, t, _ in right], 1)
    same = frame[frame["l_w"] == frame["r_w"]]
    assert emitted(next(_pairs(40, None)(iter([same])))) == sorted(wj.on_watermark(10**6))
    # stream-static, the stream on port 0: a record's pairs in the table's order
    static = next(_pairs(None, 0)(iter([frame])))
    assert list(static["seq"]) == [100 * rows.FANOUT, 100 * rows.FANOUT + 1,
                                   101 * rows.FANOUT, 101 * rows.FANOUT + 1]


def test_validate_refuses_with_exit_2_and_one_line() -> None:
    env_path = str(ROOT)
    res = subprocess.run([sys.executable, "-m", "ftctl.cli", "validate", "-p",
                          "structured-streaming", "topologies/wordcount.yaml",
                          "topologies/progressive-small.yaml"],
                         cwd=ROOT, capture_output=True, text=True, timeout=60,
                         env={"PYTHONPATH": env_path, "PATH": "/usr/bin:/bin",
                              "COLUMNS": "200"})
    assert res.returncode == 2, res.stdout + res.stderr
    out = res.stdout + res.stderr
    assert "ok topologies/wordcount.yaml" in out
    bad = [line for line in out.splitlines() if "progressive-small" in line]
    assert len(bad) == 1 and "operators[4] (both).type: structured-streaming cannot express" \
        in bad[0]


def test_the_sink_store_is_idempotent_by_batch_id(tmp_path: Path) -> None:
    assert sinkdir.write_batch(tmp_path, "out", 3, [("a", 1)], [1.0])
    # the same batch again (replayed after a crash before its commit): not written twice
    assert not sinkdir.write_batch(tmp_path, "out", 3, [("a", 1)], [1.0])
    assert sinkdir.write_batch(tmp_path, "out", 4, [("a", 2)], [2.0])
    assert sinkdir.read_outputs(tmp_path, ["out"]) == {"out": [("a", 1), ("a", 2)]}


def test_the_mutant_sink_duplicates_a_replayed_batch(tmp_path: Path) -> None:
    for _ in range(2):
        assert sinkdir.write_batch(tmp_path, "out", 3, [("a", 1)], [1.0],
                                   ignore_batch_id=True)
    assert sinkdir.read_outputs(tmp_path, ["out"]) == {"out": [("a", 1), ("a", 1)]}


def test_the_feed_writes_every_record_once_then_the_end(tmp_path: Path) -> None:
    topology = load_topology(ROOT / "topologies/diamond.yaml").with_input(records=300, batch=40)
    plan = compile_plan(topology)
    feed = Feed(plan, tmp_path / "in", tmp_path / "ctl")
    feed.start()
    assert feed.finished.wait(30)
    feed.close()
    graph = ExecutionGraph(topology)
    for s in plan.source_instances():
        files = sorted((tmp_path / "in" / s.dir_name).glob("*.parquet"))
        table = pq.read_table(files[:-1], schema=rows.arrow_schema()) if len(files) > 1 \
            else None
        assert files[-1].name == "end.parquet"
        assert pq.read_table(files[-1])["end"].to_pylist() == [True]
        assert table is not None
        got = [(rows.loads(k), rows.loads(v), t) for k, v, t in
               zip(table["k"].to_pylist(), table["v"].to_pylist(), table["ts"].to_pylist(),
                   strict=True)]
        gen = graph.make_operator(f"{s.op}[{s.index}]")
        assert callable(gen) and got == gen(s.lo, s.hi)
        assert table["seq"].to_pylist() == list(range(s.lo, s.hi))
    assert (tmp_path / "ctl" / "done").exists()


def test_engine_names_params_and_faults() -> None:
    assert engine_of("structured-streaming") == ("structured-streaming", None)
    assert engine_of("structured-streaming/ignore-batch-id") == (
        "structured-streaming", "ignore-batch-id")
    assert engine_of("checkpoint") is None
    assert cli.engine_params(["trigger_ms=200", "kill_point=commit"]) == {
        "trigger_ms": 200, "kill_point": "commit", "checkpoint_file": "offsets"}
    assert cli.engine_params(["checkpoint_file=state"])["checkpoint_file"] == "state"
    for bad in (["trigger_ms=fast"], ["kill_point=later"], ["alignment=aligned"],
                ["checkpoint_file=sources"]):
        with pytest.raises(ConfigError, match="--param"):
            cli.engine_params(bad)
    with pytest.raises(ConfigError, match="unknown mutant"):
        cli.check_mutant("drop-state")
    planned = [PlannedFault(0, 0, "kill-group", "w0", 5.0), PlannedFault(0, 1, "kill-group",
                                                                         "w1", 5.5),
               PlannedFault(1, 0, "restore-capacity", "w0", 10.0),
               PlannedFault(2, 0, "kill-task", "count[0]", 12.0)]
    faults = cli.from_planned(planned, "s.yaml")
    assert [(f.type, f.at) for f in faults] == [("kill-driver", 5.0), ("kill-task", 12.0)]
    with pytest.raises(ConfigError, match="does not carry out partition"):
        cli.from_planned([PlannedFault(0, 0, "partition", "x", 1.0)], "s.yaml")
    # on a cluster an executor kill is an executor's, in local mode the driver's
    executor = [PlannedFault(0, 0, "kill-executor", "count[0]", 3.0)]
    assert [f.type for f in cli.from_planned(executor, "s.yaml")] == ["kill-driver"]
    assert [f.type for f in cli.from_planned(executor, "s.yaml", cluster=True)] == [
        "kill-executor"]
    assert {f.type for f in cli.kills(2, "executor", 20.0, 1, cluster=True)} == {
        "kill-executor"}
    kills = cli.kills(3, "driver", 20.0, seed=1)
    assert len(kills) == 3 and all(4.0 <= k.at <= 16.0 for k in kills)


def test_compare_takes_the_engine_beside_the_protocols() -> None:
    from ftctl.commands.compare_cmd import _engines

    assert _engines("checkpoint, causal,structured-streaming") == (
        ["structured-streaming"], "checkpoint,causal")
    assert _engines("structured-streaming") == (["structured-streaming"], None)
    assert _engines(None) == ([], None)
    with pytest.raises(ConfigError, match="without mutants"):
        _engines("checkpoint,structured-streaming/ignore-batch-id")


def test_a_stored_engine_run_is_reverified_exactly_once(tmp_path: Path) -> None:
    from ftctl.results import RunStore
    from ftctl.sim.golden import golden_output
    from ftctl.verify.reverify import reverify

    topology = load_topology(ROOT / "topologies/windowed.yaml").with_input(records=200)
    golden = golden_output(ExecutionGraph(topology))
    for outputs, passed in ((golden, True), ({"out": golden["out"] + golden["out"][:1]}, False)):
        run = RunStore.create(tmp_path, topology=topology.name, protocol="structured-streaming")
        run.write_config({"topology": topology.model_dump(by_alias=True),
                          "protocol": "structured-streaming", "engine": "structured-streaming"})
        run.write_outputs(outputs)
        run.mark("complete")
        again = reverify(run, golden_output)
        assert again.verdict.passed is passed


def test_an_executor_loss_is_read_from_the_driver_log_as_it_grows(tmp_path: Path) -> None:
    from ftctl.engines.structured.runner import _SchedulerLog

    log = tmp_path / "driver-0.log"
    log.write_text("26/11/28 10:03:40 WARN Something else\n")
    lost = _SchedulerLog()
    lost.follow(log)
    assert lost.poll() == []
    with open(log, "a") as f:  # a whole line, then half of the next
        f.write("26/11/28 10:03:48 ERROR TaskSchedulerImpl: Lost executor 0 on 127.0.0.1: "
                "Command exited with code 137\n26/11/28 10:03:49 ERROR TaskSchedulerImpl: Lost")
    assert lost.poll() == [("lost", "Lost executor 0 on 127.0.0.1: Command exited with code 137")]
    with open(log, "a") as f:
        f.write(" executor 1 on 127.0.0.1: gone\n26/11/28 10:03:50 INFO TaskSetManager: "
                "Starting task 0.1 in stage 7.0 (TID 31) (127.0.0.1,executor 2, partition 0, "
                "PROCESS_LOCAL, 9342 bytes)\n")
    assert lost.poll() == [("lost", "Lost executor 1 on 127.0.0.1: gone"),
                           ("start", "Starting task 0.1 in stage 7.0 (TID 31) (127.0.0.1,"
                                     "executor 2, partition 0, PROCESS_LOCAL, 9342 bytes)")]


def test_the_first_task_launch_after_an_executor_loss_is_its_restart(tmp_path: Path) -> None:
    """Each lost executor gets one ``instance-started`` (start ``task``): at the first task
    launch after its loss, not at a launch before it; the recovery report then has a
    restart for the worker fault."""
    from ftctl.engines.structured.runner import _Outcome, _Rescheduled
    from ftctl.metrics.recovery import FaultWindow, fault_recovery
    from ftctl.results import RunStore

    store = RunStore.create(tmp_path, topology="t", protocol="structured-streaming")
    out = _Outcome(complete=False)
    resched = _Rescheduled()
    start = ("start", "Starting task 0.0 in stage 3.0 (TID 9) (127.0.0.1,executor 1, ...)")
    resched.lines(store, out, [start])  # a launch with nothing lost: no restart
    t_fault = store.clock()
    resched.lines(store, out, [("lost", "Lost executor 1 on 127.0.0.1: worker lost"),
                               ("lost", "Lost executor 3 on 127.0.0.1: worker lost")])
    resched.lines(store, out, [start, start])
    events = store.read_events()
    started = [e for e in events if e["kind"] == "instance-started"]
    assert [(e["instance"], e["data"]["start"]) for e in started] == [
        ("executor 1", "task"), ("executor 3", "task")]
    assert out.detections == 2 and out.rescheduled == 2
    rec = fault_recovery(FaultWindow(t_fault, fault="kill-worker", target="w0"), events, [], [])
    assert rec.restart_s is not None and rec.detection_s is not None
    assert rec.restart_s >= rec.detection_s
    assert rec.breakdown["started_by"] == {"task": 2}


def test_a_scenarios_kill_driver_is_the_engines_and_refused_for_a_protocol(
        tmp_path: Path) -> None:
    """``kill-driver`` in a scenario file: the engine kills its driver at that time; a
    protocol's run (Spark or simulation) refuses it in one line, before anything runs."""
    from typer.testing import CliRunner

    from chaos.plan import from_scenario
    from ftctl.cli import app
    from ftctl.engines.structured.cli import from_planned
    from tests.cli_fuzz import one_line

    path = tmp_path / "driver.yaml"
    path.write_text("name: driver\nfaults:\n  - {type: kill-driver, at: 2.0, target: random}\n"
                    "  - {type: kill-task, at: 3.0, target: 'count[0]'}\n")
    schedule = from_scenario(path, ["lines[0]", "split[0]", "count[0]", "out[0]"], 10.0, 1)
    assert [(f.at, f.type) for f in from_planned(schedule.faults, str(path))] == [
        (2.0, "kill-driver"), (3.0, "kill-task")]
    topo = str(ROOT / "topologies" / "wordcount.yaml")
    for argv in (["sim", topo, "-p", "checkpoint", "--scenario", str(path)],
                 ["validate", str(path), "--backend", "local"]):
        res = CliRunner().invoke(app, argv)
        assert res.exit_code == 2, (argv, res.output)
        one_line(res.output, "structured-streaming only")


def test_the_drivers_spec_holds_absolute_paths(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """The driver runs in the run's engine folder: a relative ``--results`` (the default)
    must not reach it as relative paths."""
    import json

    from ftctl.engines.structured import driverproc
    from ftctl.engines.structured.runner import EngineRequest, execute

    class Stop(Exception):
        pass

    seen: dict[str, object] = {}

    def start(self: object, spec_path: Path, attempt: int, log: Path) -> None:
        seen.update(json.loads(spec_path.read_text()), spec=spec_path)
        raise Stop

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(driverproc.DriverGroup, "start", start)
    topology = load_topology(ROOT / "topologies/wordcount.yaml").with_input(records=20)
    with pytest.raises(Stop):
        execute(EngineRequest(topology, results=Path("results"), quiet=True))
    paths = [seen["spec"]] + [seen[k] for k in ("events", "input", "sinks", "control",
                                                "checkpoints")]
    assert all(Path(str(p)).is_absolute() for p in paths), paths


def test_an_engine_runs_summary_names_no_cluster_or_session_it_did_not_start(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The engine's summary has only a total: the line says no ``cluster 0.0 s``; a
    protocol's run that started both still names both."""
    import io

    from rich.console import Console

    import ftctl.console as consoles
    from ftctl.run.execute import show_summary
    from ftctl.verify.checker import Verdict
    from protocols.contract.spec import Guarantee

    out = io.StringIO()
    monkeypatch.setattr(consoles, "console", Console(file=out, width=200, color_system=None))
    monkeypatch.setattr("ftctl.run.execute.console", consoles.console)
    base = {"run_id": "r", "path": "p", "topology": "t", "protocol": "structured-streaming",
            "guarantee": "exactly-once", "passed": True, "records": 10, "records_per_s": 1.0,
            "processing_s": 10.0, "detections": 1, "restarts": 1, "complete": True}
    verdict = Verdict(Guarantee.EXACTLY_ONCE, [])
    show_summary({**base, "timings": {"total_s": 74.1}}, verdict, None, quiet=False,
                 as_json=False)
    show_summary({**base, "timings": {"total_s": 53.8, "cluster_s": 9.7, "session_s": 18.9}},
                 verdict, None, quiet=False, as_json=False)
    lines = [x for x in out.getvalue().splitlines() if "records in" in x]
    assert lines[0].endswith("restarts 1; total 74.1 s")
    assert lines[1].endswith("total 53.8 s (cluster 9.7 s, session 18.9 s)")
