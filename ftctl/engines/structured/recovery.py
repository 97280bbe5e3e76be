"""Recovery metrics of a Structured Streaming run, by micro-batch, from the same history.

Every micro-batch written to the sink store is one output point: its time (when
``foreachBatch`` wrote it, on the run's clock), its latency (from when its inputs were
written; p50 and p99 over its records) and its throughput (records over the time since the
batch before). ``ftctl.metrics.runreport.analyze`` then measures detection, restart, first
output and back-within-10% per fault exactly as it does for a protocol's run.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

from ftctl.engines.structured.sinkdir import read_batches
from ftctl.metrics.runreport import RunSeries, analyze
from ftctl.metrics.series import bucket_quantiles
from ftctl.results import RunStore

BUCKET = 0.05  # seconds: finer than any trigger interval, so one point per batch


def series_of(sink_root: Path, sinks: list[str], epoch0: float) -> RunSeries:
    samples: list[tuple[float, float]] = []
    by_sink: dict[str, list[tuple[float, float]]] = {}
    counts: list[tuple[float, int]] = []
    for sink in sinks:
        for b in read_batches(sink_root, sink):
            if not b.records:
                continue
            t = b.written - epoch0
            pts = [(t, b.written - d) for d in b.due]
            samples += pts
            by_sink.setdefault(sink, []).extend(pts)
            counts.append((t, len(b.records)))
    q = bucket_quantiles(samples, BUCKET, (50, 99))
    thr: list[tuple[float, float]] = []
    counts.sort()
    for (t_prev, _), (t, n) in itertools.pairwise(counts):
        thr.append((t, n / max(t - t_prev, 1e-3)))
    per_sink = {k: bucket_quantiles(v, BUCKET, (50,))[50] for k, v in by_sink.items()}
    return RunSeries(q[50], q[99], thr, per_sink)


def write_recovery(store: RunStore, series: RunSeries) -> list[dict[str, Any]]:
    """recovery.json and its plots in the run directory; the per-fault rows."""
    report, _ = analyze(store.path, store.read_events(), series, 0.0,
                        title=f"{store.meta.get('topology')} on Structured Streaming")
    return [f.to_json() for f in report.faults]
