"""The driver program of a Structured Streaming run (``spark-submit`` runs this file).

It builds one streaming query per sink from the plan (``plan``), starts them from their
checkpoint locations (a restarted driver resumes where the last committed batch left
off), writes every micro-batch through ``foreachBatch`` into the sink store by batch id
(``sinkdir``), and reports what it does as JSON lines in the events file ftctl reads.
Once ftctl says the input is complete (a ``done`` file), it drains every query and exits 0;
a failed query exits 3, and ftctl restarts the driver.

Runs only inside the driver process: imports pyspark, never imported by ftctl itself.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

EXIT_QUERY_FAILED = 3
HOLD_S = 120.0  # a held batch waits this long for ftctl's kill
# A join drops the rows at or before the watermark, which starts at 0 (the epoch): a
# record of event time 0 would be lost. Its side's event-time column is shifted by a day;
# the time-range condition compares differences, which the shift keeps.
JOIN_TIME_SHIFT_MS = 86_400_000


class Events:
    def __init__(self, path: Path, attempt: int) -> None:
        self.path, self.attempt = path, attempt

    def __call__(self, kind: str, **data: Any) -> None:
        line = json.dumps({"t": time.time(), "kind": kind, "attempt": self.attempt, **data})
        with open(self.path, "a") as f:  # one write per line: ftctl reads whole lines
            f.write(line + "\n")


def main(spec_path: str, attempt: int) -> int:
    spec = json.loads(Path(spec_path).read_text())
    from pyspark.sql import SparkSession

    from ftctl.engines.structured.plan import compile_plan
    from ftctl.runtime.topology import Topology

    events = Events(Path(spec["events"]), attempt)
    plan = compile_plan(Topology.model_validate(spec["topology"]))
    builder = SparkSession.builder.appName(f"ftctl-{spec['run_id']}")
    for key, value in spec["conf"].items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    if str(spark.sparkContext.master).startswith("spark://"):
        _log_task_starts(spark)
        _await_executors(spark, int(spec.get("executors") or 0), events)
    events("session", master=spark.sparkContext.master,
           app=spark.sparkContext.applicationId)
    queries = [_start(spark, plan, sink, spec, events) for sink in plan.sinks]
    events("started", queries=len(queries))
    done = Path(spec["control"]) / "done"
    try:
        while True:
            for q in queries:
                if q.exception() is not None:
                    raise RuntimeError(str(q.exception()).splitlines()[0])
            if done.exists():
                for q in queries:
                    q.processAllAvailable()
                for q in queries:
                    q.stop()
                events("finished")
                return 0
            time.sleep(0.2)
    except Exception as exc:
        events("query-failed", error=f"{type(exc).__name__}: {str(exc).splitlines()[0]}")
        return EXIT_QUERY_FAILED


def _log_task_starts(spark: Any) -> None:
    """Log each task launch (``Starting task ...``, the task set manager's INFO line) into
    the driver's log: after an executor is lost, the first launch is its work running again
    on another executor, which ftctl reads as the restart. The rest stays at WARN."""
    jvm = spark.sparkContext._jvm
    jvm.org.apache.logging.log4j.core.config.Configurator.setLevel(
        "org.apache.spark.scheduler.TaskSetManager", jvm.org.apache.logging.log4j.Level.INFO)


def _await_executors(spark: Any, want: int, events: Events, timeout: float = 120.0) -> None:
    """Hold the start until ``want`` executors have registered (or ``timeout``): the run's
    input, and the faults timed from it, start on a query whose executors are up. An
    executor killed before it registers is one Spark never had: no loss, no restart."""
    end = time.monotonic() + timeout
    got = 0
    while time.monotonic() < end:
        got = int(spark.sparkContext._jsc.sc().getExecutorIds().size())
        if got >= want:
            break
        time.sleep(0.2)
    events("executors", registered=got, wanted=want)


def _start(spark: Any, plan: Any, sink: str, spec: dict[str, Any], events: Events) -> Any:
    write = _sink_writer(Path(spec["sinks"]), sink, spec, events)
    return writer(stream(spark, plan, sink, spec), sink, spec, write).start()


def writer(df: Any, sink: str, spec: dict[str, Any], write: Callable[[Any, int], None]) -> Any:
    """The sink's query as the driver starts it: ``foreachBatch`` in append mode from its
    checkpoint location (``start()`` is where Spark checks the plan for streaming)."""
    return (df.writeStream.foreachBatch(write).outputMode("append")
            .option("checkpointLocation", str(Path(spec["checkpoints"]) / sink))
            .trigger(processingTime=f"{int(spec['trigger_ms'])} milliseconds")
            .queryName(sink))


def stream(spark: Any, plan: Any, sink: str, spec: dict[str, Any]) -> Any:
    """The streaming DataFrame of ``sink``: every source instance's folder under
    ``spec["input"]`` through the plan's stages."""
    from pyspark.sql import functions as F

    from ftctl.engines.structured import rows

    built: dict[str, list[Any]] = {}

    def branches(name: str) -> list[Any]:
        """The operator's output as one stream per source instance it descends from, so
        each keeps its own watermark until a stateful operator unions them (Spark takes
        the minimum, as ftctl's runtime does)."""
        if name in built:
            return built[name]
        if name in plan.sources:
            out = [spark.readStream.schema(rows.SCHEMA).parquet(
                str(Path(spec["input"]) / s.dir_name)) for s in plan.sources[name]]
        else:
            stage = plan.stages[name]
            ins = [b for n in stage.inputs for b in branches(n)]
            if stage.kind in ("map", "filter", "flat_map", "key_by"):
                out = [b.mapInPandas(_stateless(stage), rows.SCHEMA) for b in ins]
            elif stage.kind in ("join", "window_join") and stage.static_port is not None:
                port = 1 - stage.static_port
                table = _static(spark, plan, stage.port_inputs(stage.static_port), F)
                out = [_join_static(stage, b, table, port, F)
                       for n in stage.port_inputs(port) for b in branches(n)]
            elif stage.kind in ("join", "window_join"):
                out = [_join_streams(stage, [[b for n in stage.port_inputs(p)
                                              for b in branches(n)] for p in (0, 1)], F)]
            elif stage.kind == "window":
                out = [_window(stage, ins, F)]
            elif stage.kind == "sink":
                out = ins
            else:
                out = [_keyed(stage, ins)]
        built[name] = out
        return out

    streams = branches(sink)
    df = streams[0]
    for other in streams[1:]:
        df = df.unionByName(other)
    return df


def _static(spark: Any, plan: Any, names: list[str], F: Any) -> Any:
    """The table side of a stream-static join, read once: the table sources' records
    through the same stateless operators, each record ranked among its key's (in table
    order), which orders a stream record's pairs as ftctl's join emits them."""
    from pyspark.sql import Window

    from ftctl.engines.structured import rows
    from ftctl.runtime.graph import ExecutionGraph

    graph = ExecutionGraph(plan.topology)

    def frame(name: str) -> Any:
        if name in plan.sources:
            recs = []
            for s in plan.sources[name]:  # seq: the offset, as the feed numbers records
                gen: Any = graph.make_operator(f"{s.op}[{s.index}]")
                got = gen(s.lo, s.hi)
                recs += [(s.lo + i, k, v, ts, 0.0) for i, (k, v, ts) in enumerate(got)]
            return spark.createDataFrame(rows.table(recs).to_pandas(), rows.SCHEMA)
        stage = plan.stages[name]
        ins = [frame(n) for n in stage.inputs]
        df = ins[0]
        for other in ins[1:]:
            df = df.unionByName(other)
        return df.mapInPandas(_stateless(stage), rows.SCHEMA)

    parts = [frame(n) for n in names]
    df = parts[0]
    for other in parts[1:]:
        df = df.unionByName(other)
    return df.withColumn("rank", F.row_number().over(Window.partitionBy("k").orderBy("seq")))


def _side(df: Any, port: int, size: int | None, F: Any, stream: bool) -> Any:
    """One input of a join, its columns prefixed by port (``l_``, ``r_``: both sides may
    come from the same source); a window_join's side carries its window's start, and a
    stream its watermark (one window: a record that late could not share a window)."""
    p = "lr"[port] + "_"
    cols = [F.col(c).alias(p + c) for c in ("seq", "k", "v", "ts", "due")]
    if stream:
        df = df.filter("NOT end")
    if "rank" in df.columns:
        cols.append(F.col("rank").alias(p + "rank"))
    if size is not None:
        cols += [F.timestamp_millis(F.col("ts") + JOIN_TIME_SHIFT_MS).alias(p + "et"),
                 (F.col("ts") - F.pmod("ts", F.lit(size))).alias(p + "w")]
    out = df.select(*cols)
    if size is not None and stream:
        out = out.withWatermark(p + "et", f"{size} milliseconds")
    return out


def _join_condition(size: int | None, F: Any, ranged: bool) -> Any:
    cond = F.col("l_k") == F.col("r_k")
    if size is None:
        return cond
    cond = cond & (F.col("l_w") == F.col("r_w"))
    if ranged:  # what lets Spark drop state: implied by the same window, never narrower
        gap = f"interval {size - 1} milliseconds"
        cond = cond & F.expr(f"r_et >= l_et - {gap}") & F.expr(f"r_et <= l_et + {gap}")
    return cond


def _join_size(stage: Any) -> int | None:
    return int(_operator(stage).size) if stage.kind == "window_join" else None


def _join_streams(stage: Any, ports: list[list[Any]], F: Any) -> Any:
    """A stream-stream inner join: every matching pair once, when its second side
    arrives; in a window_join only pairs of one tumbling window."""
    from ftctl.engines.structured import rows

    size = _join_size(stage)
    sides = []
    for port, branches in enumerate(ports):
        marked = [_side(b, port, size, F, stream=True) for b in branches]
        df = marked[0]
        for other in marked[1:]:
            df = df.unionByName(other)
        sides.append(df)
    joined = sides[0].join(sides[1], _join_condition(size, F, ranged=True), "inner")
    return joined.mapInPandas(_pairs(size, None), rows.SCHEMA)


def _join_static(stage: Any, branch: Any, table: Any, port: int, F: Any) -> Any:
    """A stream-static inner join of one stream branch: each record with the table's
    records of its key (and window). The end marker passes by the join, so a window
    after it still closes."""
    from ftctl.engines.structured import rows

    size = _join_size(stage)
    sides = {port: _side(branch, port, size, F, stream=True),
             1 - port: _side(table, 1 - port, size, F, stream=False)}
    joined = sides[0].join(sides[1], _join_condition(size, F, ranged=False), "inner")
    pairs = joined.mapInPandas(_pairs(size, port), rows.SCHEMA)
    return pairs.unionByName(branch.filter("end"))


def _pairs(size: int | None, stream_port: int | None) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """Joined rows as ftctl's join emits them: ``(key, (left, right), ts)``, ``ts`` the
    later side's (join) or the window's last millisecond (window_join). ``seq`` orders a
    batch's output: a stream record's pairs in table order (stream-static), else the
    later side's offset."""
    def run(frames: Iterator[Any]) -> Iterator[Any]:
        import pandas as pd

        from ftctl.engines.structured import rows

        for pdf in frames:
            values = [rows.dumps((rows.loads(lv), rows.loads(rv)))
                      for lv, rv in zip(pdf["l_v"], pdf["r_v"], strict=True)]
            ts = pdf[["l_ts", "r_ts"]].max(axis=1) if size is None else pdf["l_w"] + size - 1
            if stream_port is None:
                seq = pdf[["l_seq", "r_seq"]].max(axis=1)
            else:
                p, t = "lr"[stream_port], "lr"[1 - stream_port]
                seq = pdf[f"{p}_seq"] * rows.FANOUT + (pdf[f"{t}_rank"] - 1)
            yield pd.DataFrame({"seq": seq.astype("int64"), "k": pdf["l_k"], "v": values,
                                "ts": ts.astype("int64"),
                                "due": pdf[["l_due", "r_due"]].max(axis=1),
                                "end": [False] * len(pdf)})

    return run


def _operator(stage: Any) -> Any:
    from ftctl.runtime.operators import build_operator

    return build_operator(stage.kind, stage.params, stage.function, stage.in_type)


def _stateless(stage: Any) -> Callable[[Iterator[Any]], Iterator[Any]]:
    def run(frames: Iterator[Any]) -> Iterator[Any]:
        import pandas as pd

        from ftctl.engines.structured import rows

        op = _operator(stage)
        for recs, pdf in rows.records_of(frames):
            out: dict[str, list[Any]] = {c: [] for c in ("seq", "k", "v", "ts", "due", "end")}
            for rec, seq, due, end, k, v in zip(recs, pdf["seq"], pdf["due"], pdf["end"],
                                                pdf["k"], pdf["v"], strict=True):
                if end:  # the end marker passes every operator untouched
                    produced: list[tuple[int, bytes, bytes, int]] = [
                        (int(seq), k, v, rows.END_TS)]
                else:
                    assert rec is not None
                    got = op.process([rec], 0)
                    scale = rows.FANOUT if stage.kind == "flat_map" else 1
                    produced = [(int(seq) * scale + j, rows.dumps(o[0]), rows.dumps(o[1]),
                                 int(o[2])) for j, o in enumerate(got)]
                for s, kk, vv, ts in produced:
                    out["seq"].append(s)
                    out["k"].append(kk)
                    out["v"].append(vv)
                    out["ts"].append(ts)
                    out["due"].append(float(due))
                    out["end"].append(bool(end))
            yield pd.DataFrame(out)

    return run


def _keyed(stage: Any, ins: list[Any]) -> Any:
    """A running aggregate per key, one output per input as ftctl's operator emits, its
    accumulator in the state store (RocksDB)."""
    from pyspark.sql.streaming.state import GroupStateTimeout

    from ftctl.engines.structured import rows

    df = ins[0]
    for other in ins[1:]:
        df = df.unionByName(other)

    def run(key: tuple[bytes], frames: Iterator[Any], state: Any) -> Iterator[Any]:
        import pandas as pd

        pdf = pd.concat(list(frames)).sort_values("seq", kind="stable")
        op = _operator(stage)
        k = rows.loads(key[0])
        if state.exists:
            op.restore({k: rows.loads(state.get[0])})
        recs = [(k, rows.loads(v), int(t)) for v, t in zip(pdf["v"], pdf["ts"], strict=True)]
        got = op.process(recs, 0)
        state.update((rows.dumps(op.snapshot()[k]),))
        yield pd.DataFrame({"seq": pdf["seq"].to_numpy(), "k": [key[0]] * len(got),
                            "v": [rows.dumps(o[1]) for o in got],
                            "ts": [int(o[2]) for o in got], "due": pdf["due"].to_numpy(),
                            "end": [False] * len(got)})

    return (df.filter("NOT end").groupBy("k")
            .applyInPandasWithState(run, rows.SCHEMA, "acc binary", "append",
                                    GroupStateTimeout.NoTimeout))


def _window(stage: Any, ins: list[Any], F: Any) -> Any:
    """Spark's own sliding/tumbling window with a watermark, in append mode: a window is
    output once, when the watermark passes its end (the end marker passes them all)."""
    from ftctl.engines.structured import rows

    op = _operator(stage)
    size, slide, agg, fld = op.size, op.slide, op.agg, op.field
    marked = []
    for b in ins:
        if agg != "count":
            b = b.mapInPandas(_numbers(fld), rows.SCHEMA + ", num long")
        marked.append(b.withColumn("et", F.timestamp_millis("ts"))
                      .withWatermark("et", "1 millisecond"))
    df = marked[0]
    for other in marked[1:]:
        df = df.unionByName(other)
    aggs = [F.count(F.lit(1)).alias("n"), F.max("due").alias("due")]
    if agg != "count":
        aggs += [F.sum("num").alias("s"), F.max("num").alias("m")]
    grouped = (df.groupBy(F.window("et", f"{size} milliseconds", f"{slide} milliseconds"), "k")
               .agg(*aggs).withColumn("wend", F.unix_millis(F.col("window.end"))))
    cols = ["k", "wend", "n", "due"] + (["s", "m"] if agg != "count" else [])
    return grouped.select(*cols).mapInPandas(_window_rows(agg), rows.SCHEMA)


def _numbers(fld: int | None) -> Callable[[Iterator[Any]], Iterator[Any]]:
    def run(frames: Iterator[Any]) -> Iterator[Any]:
        from ftctl.engines.structured import rows

        for pdf in frames:
            vals = [None if e else rows.loads(v) for v, e in zip(pdf["v"], pdf["end"],
                                                                 strict=True)]
            pdf = pdf.copy()
            pdf["num"] = [0 if v is None else int(v if fld is None else v[fld]) for v in vals]
            yield pdf

    return run


def _window_rows(agg: str) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """A window's result as ftctl's WindowOp emits it: ``(key, (end, acc), end - 1)``."""
    def run(frames: Iterator[Any]) -> Iterator[Any]:
        import pandas as pd

        from ftctl.engines.structured import rows

        for pdf in frames:
            vals = []
            for i in range(len(pdf)):
                end, n = int(pdf["wend"].iat[i]), int(pdf["n"].iat[i])
                acc: Any = n
                if agg == "sum":
                    acc = int(pdf["s"].iat[i])
                elif agg == "max":
                    acc = int(pdf["m"].iat[i])
                elif agg == "avg":
                    acc = (int(pdf["s"].iat[i]), n)
                vals.append(rows.dumps((end, acc)))
            yield pd.DataFrame({"seq": pdf["wend"].astype("int64"), "k": pdf["k"], "v": vals,
                                "ts": pdf["wend"].astype("int64") - 1, "due": pdf["due"],
                                "end": [False] * len(pdf)})

    return run


def _sink_writer(root: Path, sink: str, spec: dict[str, Any],
                 events: Events) -> Callable[[Any, int], None]:
    from ftctl.engines.structured import rows, sinkdir

    ignore = spec.get("mutant") == "ignore-batch-id"
    hold = Path(spec["control"]) / "hold"

    def write(df: Any, batch_id: int) -> None:
        got = sorted(df.filter("NOT end").select("seq", "k", "v", "due").collect(),
                     key=lambda r: r["seq"])
        records = [(rows.loads(r["k"]), rows.loads(r["v"])) for r in got]
        fresh = sinkdir.write_batch(root, sink, batch_id, records, [r["due"] for r in got],
                                    ignore_batch_id=ignore)
        events("batch", sink=sink, batch=batch_id, records=len(records), written=fresh)
        if hold.exists():  # ftctl kills the driver here: output written, batch uncommitted
            events("held", sink=sink, batch=batch_id)
            time.sleep(HOLD_S)

    return write


if __name__ == "__main__":
    sys.path.insert(0, os.environ.get("FTCTL_ROOT", ""))
    raise SystemExit(main(sys.argv[1], int(sys.argv[2])))
