"""Building the time series the recovery metrics and plots take, from raw samples."""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

Series = list[tuple[float, float]]
# Every run's plotted series on its event clock (``ftctl.metrics.runreport.write_series``).
SERIES_JSON = "series.json"
# Output in the first second is start-up, not steady state.
WARMUP_S = 1.0


def bucket_quantiles(
    samples: Iterable[tuple[float, float]], bucket: float = 0.1, qs: Sequence[float] = (50, 99)
) -> dict[float, Series]:
    """Per-bucket percentiles of ``(t, latency)`` samples: ``{q: [(bucket start, value)]}``.

    Buckets without samples get no point: a gap in output stays a gap, which is how the
    recovery metrics see an outage.
    """
    by_bucket: dict[int, list[float]] = {}
    for t, v in samples:
        by_bucket.setdefault(math.floor(t / bucket), []).append(v)
    out: dict[float, Series] = {q: [] for q in qs}
    for k in sorted(by_bucket):
        values = np.asarray(by_bucket[k])
        for q in qs:
            out[q].append((round(k * bucket, 9), float(np.percentile(values, q))))
    return out


def throughput_from_counts(
    rows: Iterable[Mapping[str, Any]], instances: Sequence[str], field: str = "records_out"
) -> Series:
    """Records/s of the given instances from cumulative counter samples.

    ``rows`` are the Spark host's metric rows (``{"t", "instance", "records_out", ...}``,
    one per instance per sample time); counts of the instances are summed per sample time
    and differenced. A counter that goes down (a restarted task starts from zero again)
    counts as zero progress for that interval rather than negative throughput.
    """
    wanted = set(instances)
    per_t: dict[float, dict[str, int]] = {}
    for row in rows:
        if row.get("instance") in wanted:
            per_t.setdefault(float(row["t"]), {})[str(row["instance"])] = int(row[field])
    times = sorted(per_t)
    out: Series = []
    last: dict[str, int] = {}
    for a, b in itertools.pairwise(times):
        if b <= a:
            continue
        prev = {**last, **per_t[a]}
        cur = {**prev, **per_t[b]}
        delta = sum(max(0, cur[i] - prev.get(i, 0)) for i in cur)
        out.append((b, delta / (b - a)))
        last = cur
    return out


def steady_window(start: float, faults: Sequence[float]) -> tuple[float, float]:
    """From the first output plus a warm-up to the first fault (or forever).

    Only this window is fault-free for every protocol: after a fault, protocols that roll
    back or recompute replay old records (high latency) and then catch up (a throughput
    burst), which would flatter or penalise them for reasons that are not overhead.
    """
    return (start + WARMUP_S, min(faults, default=float("inf")))


def steady_figures(throughput: Sequence[tuple[float, float]],
                   latency_p50: Sequence[tuple[float, float]],
                   faults: Sequence[float]) -> tuple[float | None, float | None]:
    """(sink records/s, median latency s) of a run's fault-free steady state, read off the
    series its report plots: the mean of the throughput points and the median of the
    p50 latency points in ``steady_window``, from the first output (the first point
    above 0, not the host's first sample: tasks start for seconds before anything runs,
    and those zeros once cut none's figure to a fifth of what its plot showed)."""
    start = next((t for t, v in throughput if v > 0), None)
    if start is None:
        return None, None
    lo, hi = steady_window(start, faults)
    thr = [v for t, v in throughput if lo <= t < hi]
    lat = [v for t, v in latency_p50 if lo <= t < hi]
    return (statistics.fmean(thr) if thr else None,
            statistics.median(lat) if lat else None)
