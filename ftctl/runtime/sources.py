"""Replayable sources: record ``i`` is a pure function of (seed, i).

Any offset can be regenerated, like re-reading a Kafka topic from an offset. Generation is
vectorised with numpy over a counter-based hash (splitmix64), so a batch costs a few numpy
calls rather than one random generator per record.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ftctl.runtime.nexmark import DEFAULTS as NEXMARK_DEFAULTS
from ftctl.runtime.nexmark import check as check_nexmark
from ftctl.runtime.nexmark import make_nexmark
from ftctl.runtime.records import Record

if TYPE_CHECKING:
    import numpy as np

# numpy is imported where records are generated, not at import: `ftctl validate` never
# generates a record and starts faster without it.


def mix(seed: int, counters: np.ndarray) -> np.ndarray:
    """splitmix64 of (seed, counter): uniform 64-bit values, one per counter."""
    import numpy as np

    u = np.uint64
    with np.errstate(over="ignore"):
        z = counters.astype(np.uint64) * u(0x9E3779B97F4A7C15) + u(seed & 0xFFFFFFFFFFFFFFFF)
        z = (z ^ (z >> u(30))) * u(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> u(27))) * u(0x94D049BB133111EB)
        return z ^ (z >> u(31))


def uniform(seed: int, counters: np.ndarray) -> np.ndarray:
    """Floats in [0, 1) from the counter hash."""
    import numpy as np

    return (mix(seed, counters) >> np.uint64(11)).astype(np.float64) / float(1 << 53)


def zipf_cdf(n: int, s: float) -> np.ndarray:
    import numpy as np

    weights = 1.0 / np.arange(1, n + 1, dtype=np.float64) ** s
    cdf = np.cumsum(weights)
    return cdf / cdf[-1]


@dataclass(frozen=True)
class SourceSpec:
    """A built-in source type: its parameters' defaults and a batch generator."""

    name: str
    description: str
    defaults: dict[str, Any]
    make: Callable[[int, dict[str, Any]], Callable[[int, int], list[Record]]]
    makes: str = "any"  # the record type (ftctl.runtime.records.RECORD_TYPES)


def _event_time(first: int, count: int, ms_per_record: float) -> list[int]:
    return [int((first + k) * ms_per_record) for k in range(count)]


def _text(seed: int, p: dict[str, Any]) -> Callable[[int, int], list[Record]]:
    import numpy as np

    words, vocab, ms = int(p["words_per_line"]), int(p["vocabulary"]), float(p["ms_per_record"])
    cdf = zipf_cdf(vocab, float(p["skew"]))
    names = np.array([f"w{k}" for k in range(vocab)], dtype=object)

    def gen(start: int, end: int) -> list[Record]:
        n = end - start
        if n <= 0:
            return []
        ctr = np.arange(start * words, end * words, dtype=np.uint64)
        ids = np.searchsorted(cdf, uniform(seed, ctr), side="right").clip(0, vocab - 1)
        grid = names[ids].reshape(n, words)
        ts = _event_time(start, n, ms)
        return [(start + k, " ".join(grid[k]), ts[k]) for k in range(n)]

    return gen


def _zipf_keyed(prefix: str | None, value_kind: str) -> Callable[..., Any]:
    def make(seed: int, p: dict[str, Any]) -> Callable[[int, int], list[Record]]:
        import numpy as np

        n_keys, ms = int(p["keys"]), float(p["ms_per_record"])
        cdf = zipf_cdf(n_keys, float(p["skew"]))
        users = int(p.get("users", 1))

        def gen(start: int, end: int) -> list[Record]:
            if end <= start:
                return []
            ctr = np.arange(start, end, dtype=np.uint64)
            ids = np.searchsorted(cdf, uniform(seed, ctr), side="right").clip(0, n_keys - 1)
            ts = _event_time(start, end - start, ms)
            if value_kind == "one":
                return [(int(k), 1, t) for k, t in zip(ids.tolist(), ts, strict=True)]
            who = (mix(seed ^ 0x5F5F, ctr) % np.uint64(users)).tolist()
            return [
                (f"{prefix}{k}", f"u{u}", t)
                for k, u, t in zip(ids.tolist(), who, ts, strict=True)
            ]

        return gen

    return make


def _tuples(value: Any) -> Any:
    """YAML lists as tuples, so table values compare and hash like generated ones."""
    return tuple(_tuples(v) for v in value) if isinstance(value, list) else value


def check_table(p: dict[str, Any]) -> list[Record]:
    """The rows of a table source as records; ValueError naming the first bad row."""
    from ftctl.runtime.records import RECORD_TYPES

    kind = str(p["record_type"])
    if kind not in RECORD_TYPES:
        raise ValueError(f"record_type: unknown type {kind!r} (ftctl list types)")
    rows = p["rows"]
    if not isinstance(rows, list) or not rows:
        raise ValueError("rows: expected a non-empty list of [key, value] or [key, value, ts]")
    out: list[Record] = []
    last = None
    fields = RECORD_TYPES[kind]
    for i, row in enumerate(rows):
        if not isinstance(row, list) or len(row) not in (2, 3):
            raise ValueError(f"rows[{i}]: expected [key, value] or [key, value, ts]")
        ts = row[2] if len(row) == 3 else -1
        if isinstance(ts, bool) or not isinstance(ts, int):
            raise ValueError(f"rows[{i}]: ts must be an integer, got {ts!r}")
        if last is not None and ts < last:
            raise ValueError(f"rows[{i}]: ts {ts} is before the previous row's {last}; "
                             "a table's event times must not decrease")
        last = ts
        value = _tuples(row[1])
        if len(fields) > 1 and not kind.startswith("nexmark.event") and (
                not isinstance(value, tuple) or len(value) != len(fields)):
            raise ValueError(f"rows[{i}]: a {kind} value has {len(fields)} fields "
                             f"({', '.join(fields)}), got {row[1]!r}")
        out.append((_tuples(row[0]), value, ts))
    return out


def _table(seed: int, p: dict[str, Any]) -> Callable[[int, int], list[Record]]:
    rows = check_table(p)
    return lambda start, end: rows[start:end]


SOURCES: dict[str, SourceSpec] = {
    "source.text": SourceSpec(
        "source.text",
        "lines of words drawn from a Zipf vocabulary: (line_no, line, ts)",
        {"words_per_line": 8, "vocabulary": 1000, "skew": 1.0, "ms_per_record": 1.0},
        _text,
        "text.line",
    ),
    "source.votes": SourceSpec(
        "source.votes",
        "votes for article ids with Zipf skew (the vote benchmark): (article, 1, ts)",
        {"keys": 10_000, "skew": 1.1, "ms_per_record": 1.0},
        _zipf_keyed(None, "one"),
        "tally",
    ),
    "source.hashtags": SourceSpec(
        "source.hashtags",
        "hashtags used by users, Zipf over hashtags: ('#tagN', 'uM', ts)",
        {"keys": 500, "skew": 1.2, "users": 2000, "ms_per_record": 1.0},
        _zipf_keyed("#tag", "user"),
        "tag.user",
    ),
    "source.table": SourceSpec(
        "source.table",
        "a bounded table of literal rows [key, value] or [key, value, ts] (ts -1 when "
        "omitted: reference data); record_type names their type",
        {"rows": [], "record_type": "any"},
        _table,
    ),
    "source.nexmark": SourceSpec(
        "source.nexmark",
        "the Nexmark auction benchmark: persons, auctions and bids 1:3:46 with event times "
        "(event e: (e, tagged tuple, ts)); use split: strided",
        dict(NEXMARK_DEFAULTS),
        make_nexmark,
        "nexmark.event",
    ),
}


# Bounds of numeric params: beyond them a golden run would not fit in memory (a million
# words per line, a vocabulary of 10**12 names) or event times overflow (an infinite
# ms_per_record). Validation reports them as one line.
LIMITS: dict[str, tuple[float, float]] = {
    "words_per_line": (1, 1000),
    "vocabulary": (1, 1_000_000),
    "keys": (1, 1_000_000),
    "users": (1, 10_000_000),
    "skew": (0.0, 10.0),
    "ms_per_record": (0.0, 1e9),
}


def check_params(params: dict[str, Any]) -> None:
    """ValueError naming the first numeric param outside its bounds (or not finite)."""
    for name, (lo, hi) in LIMITS.items():
        if name not in params:
            continue
        v = params[name]
        if isinstance(v, bool) or not isinstance(v, int | float):
            raise ValueError(f"{name} must be a number, got {v!r}")
        if not lo <= v <= hi:  # also false for nan
            raise ValueError(f"{name} must be between {lo:g} and {hi:g}, got {v!r}")


def check_source(kind: str, params: dict[str, Any]) -> dict[str, Any]:
    """The source's params with defaults filled in; ValueError for one out of bounds."""
    merged = {**SOURCES[kind].defaults, **params}
    check_params(merged)
    if kind == "source.nexmark":
        check_nexmark(merged)
    if kind == "source.table":
        check_table(merged)
    return merged


def make_source(kind: str, seed: int, params: dict[str, Any]) -> Callable[[int, int], list[Record]]:
    """A generator ``gen(start, end)`` returning records [start, end) of the source."""
    return SOURCES[kind].make(seed, check_source(kind, params))
