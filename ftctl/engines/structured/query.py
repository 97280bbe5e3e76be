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


def _start(spark: Any, plan: Any, sink: str, spec: dict[str, Any], events: Events) -> Any:
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
    write = _sink_writer(Path(spec["sinks"]), sink, spec, events)
    return (df.writeStream.foreachBatch(write).outputMode("append")
            .option("checkpointLocation", str(Path(spec["checkpoints"]) / sink))
            .trigger(processingTime=f"{int(spec['trigger_ms'])} milliseconds")
            .queryName(sink).start())


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
