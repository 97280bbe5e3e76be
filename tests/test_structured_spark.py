"""Structured Streaming on Spark: every bundled topology the engine compiles is a plan
Spark accepts, and runs for real (Spark local mode in the driver ftctl starts): a driver
killed between a micro-batch's sink write and its commit recovers exactly once from its
checkpoint location (the state file that batch wrote deleted meanwhile), a sink that
ignores the batch id is caught duplicating, a killed task's batch is run again exactly
once, and a stream-static join and a window_join give ftctl's pairs.

The kill waits for a batch whose output is written and not committed (``kill_point=
commit``), so the replay this tests happens in every run, not by chance.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from ftctl.config.load import load_topology
from ftctl.engines.structured import driverproc, query, rows
from ftctl.engines.structured.plan import compile_plan
from ftctl.engines.structured.runner import EngineRequest, Fault, execute
from tests.test_structured_plan import BUNDLED, bundled_name, bundled_table, joins_topology

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def session() -> Iterator[Any]:
    """A Spark session in this process, configured as the engine's driver is (local[1]:
    nothing runs, Spark only analyzes and checks the queries)."""
    from pyspark.sql import SparkSession

    builder = SparkSession.builder
    for key, value in driverproc.conf("local[1]", "compile-check").items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    try:
        yield spark
    finally:
        spark.stop()


def _spark_checks(spark: Any, df: Any) -> None:
    """What ``writeStream.start()`` checks before a query runs: the plan is analyzed, and
    it is one Spark runs as a stream in append mode (the engine's output mode)."""
    jvm = spark._jvm
    execution = df._jdf.queryExecution()
    execution.assertAnalyzed()
    jvm.org.apache.spark.sql.catalyst.analysis.UnsupportedOperationChecker.checkForStreaming(
        execution.analyzed(), jvm.org.apache.spark.sql.streaming.OutputMode.Append())


def test_every_bundled_topology_compiles_on_spark_or_is_refused(session: Any,
                                                                tmp_path: Path) -> None:
    """docs/structured-streaming.md's table of the bundled topologies, on Spark: each one
    it says compiles is built into its queries and accepted by Spark's checks; each one it
    says is refused, ``validate`` refuses in one line naming the reason."""
    table = bundled_table()
    res = subprocess.run([sys.executable, "-m", "ftctl.cli", "validate", "-p",
                          "structured-streaming", *map(str, BUNDLED)], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    lines = (res.stdout + res.stderr).splitlines()
    assert res.returncode == 2
    rejected: dict[str, Exception] = {}
    for path in BUNDLED:
        reason = table[bundled_name(path)]
        said = [line for line in lines if f"{path}" in line]
        if reason is not None:
            assert len(said) == 1 and said[0].startswith(f"error: {path}: operators["), said
            assert "structured-streaming cannot express" in said[0] and reason in said[0]
            continue
        assert len(said) == 1 and said[0].startswith(f"ok {path} "), said
        plan = compile_plan(load_topology(path), str(path))
        inputs = tmp_path / bundled_name(path) / "input"
        for s in plan.source_instances():  # a file source needs its folder
            (inputs / s.dir_name).mkdir(parents=True, exist_ok=True)
        spec = {"input": str(inputs)}
        for sink in plan.sinks:
            try:
                _spark_checks(session, query.stream(session, plan, sink, spec))
            except Exception as exc:  # every topology Spark rejects, not only the first
                rejected[f"{bundled_name(path)}:{sink}"] = exc
    assert not rejected, {k: str(v).splitlines()[0] for k, v in rejected.items()}
    # the checks reject what Spark would: a window aggregation without a watermark
    from pyspark.sql import functions as F

    src = next((tmp_path / "windowed" / "input").iterdir())
    unmarked = (session.readStream.schema(rows.SCHEMA).parquet(str(src))
                .withColumn("et", F.timestamp_millis("ts"))
                .groupBy(F.window("et", "10 milliseconds"), "k").count())
    with pytest.raises(Exception, match="watermark"):
        _spark_checks(session, unmarked)


def _run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mutant: str | None,
         also: tuple[Fault, ...] = ()) -> EngineRequest:
    monkeypatch.chdir(tmp_path)  # the golden cache and the watchdog's state dir go here
    topology = load_topology(ROOT / "topologies/wordcount.yaml").with_input(
        records=300, rate=50.0, batch=50)
    req = EngineRequest(topology, mutant=mutant, master="local[1]", results=tmp_path / "r",
                        timeout=240, trigger_ms=200, kill_point="commit",
                        checkpoint_file="state", faults=[Fault(1.0, "kill-driver"), *also],
                        kind="chaos", quiet=True)
    req.config["code"] = execute(req)
    return req


def _driver_events(req: EngineRequest) -> list[dict[str, Any]]:
    path = Path(req.summary["path"]) / "engine" / "driver-events.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def _no_driver_left(req: EngineRequest) -> bool:
    run_id = req.summary["run_id"]
    return not any(run_id in " ".join(p.info["cmdline"] or ())
                   for p in psutil.process_iter(["cmdline"]))


def test_a_driver_killed_mid_commit_recovers_exactly_once(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """With the state version the held batch wrote deleted while the driver is down (a
    store fault on the checkpoint location): the batch, run again, writes it anew."""
    req = _run(tmp_path, monkeypatch, None, also=(Fault(1.05, "delete", 1, target="out"),))
    s = req.summary
    assert req.config["code"] == 0 and s["passed"] and s["complete"], s
    assert s["restarts"] == 1 and s["anomalies"] == {}
    events = _driver_events(req)
    held = [e for e in events if e["kind"] == "held"]
    assert held, "the kill did not strike between a batch's write and its commit"
    # the restarted driver ran the held batch again; the sink kept its first write
    again = [e for e in events if e["kind"] == "batch" and e["attempt"] == 1
             and e["batch"] == held[0]["batch"]]
    assert again and again[0]["written"] is False
    assert s["faults"] and s["faults"][0]["restart_s"] is not None
    # the deleted file: RocksDB's state of the held batch (version batch + 1), which the
    # batch run again wrote anew
    [deleted] = [e["data"]["details"]["files"] for e in _history(req)
                 if e["kind"] == "fault-injected" and e["data"]["type"] == "delete"]
    assert len(deleted) == 1 and deleted[0].endswith(f"/{held[0]['batch'] + 1}.zip")
    assert (Path(s["path"]) / "checkpoints" / deleted[0]).is_file()
    assert _no_driver_left(req)


def test_a_sink_ignoring_the_batch_id_is_caught(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    req = _run(tmp_path, monkeypatch, "ignore-batch-id")
    s = req.summary
    assert req.config["code"] == 1 and not s["passed"]
    assert s["anomalies"].get("duplicated", 0) > 0 and not s["anomalies"].get("lost")
    assert _no_driver_left(req)


def _history(req: EngineRequest) -> list[dict[str, Any]]:
    path = Path(req.summary["path"]) / "events.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_a_killed_task_recovers_exactly_once_and_joins_give_ftctls_pairs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One run for two things (each Spark run costs a driver's start): a table join and a
    window join give the golden run's pairs, through a task killed mid-batch."""
    monkeypatch.chdir(tmp_path)  # the golden cache and the watchdog's state dir go here
    topology = joins_topology(tmp_path).with_input(rate=150.0)
    req = EngineRequest(topology, master="local[1]", results=tmp_path / "r", timeout=240,
                        trigger_ms=300, kill_point="any", faults=[Fault(1.0, "kill-task")],
                        kind="chaos", quiet=True)
    code = execute(req)
    s = req.summary
    assert code == 0 and s["passed"] and s["complete"] and s["anomalies"] == {}, s
    verdict = json.loads((Path(s["path"]) / "verdict.json").read_text())
    # each sink holds the golden run's pairs, and there are some to hold
    got = {x["sink"]: (x["output_records"], x["golden_records"]) for x in verdict["sinks"]}
    assert set(got) == {"enriched", "pairs"}
    assert all(out == golden > 0 for out, golden in got.values()), got
    history = _history(req)
    struck = [e["data"] for e in history if e["kind"] == "fault-injected"]
    assert [e["type"] for e in struck] == ["kill-task"] and struck[0]["pids"]
    # Spark lost the task mid-batch; in local mode that fails the query, so the driver
    # is restarted from its checkpoint location and runs the batch again
    log = (Path(s["path"]) / "logs" / "driver-0.log").read_text()
    assert "Lost task" in log
    detected = [e["data"] for e in history if e["kind"] == "failure-detected"]
    assert [d["cause"] for d in detected] == ["query-failed"] and s["restarts"] == 1
    assert _no_driver_left(req)
