"""Operator logic: pure functions of (state, input batch) -> output records.

Operators know nothing of channels, protocols or hosts. Stateful operators expose
``snapshot``/``restore`` so protocols can persist and roll back their state.
"""

from __future__ import annotations

import copy
import importlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, ClassVar

from ftctl.runtime.records import Record, stable_hash

WATERMARK_MAX = 2**62


class Operator:
    """Base operator: stateless identity."""

    stateful: ClassVar[bool] = False
    inputs: ClassVar[int] = 1

    def process(self, records: list[Record], port: int) -> list[Record]:
        return records

    def on_watermark(self, watermark: int) -> list[Record]:
        """Called when the instance's input watermark advances."""
        return []

    def snapshot(self) -> Any:
        return None

    def restore(self, state: Any) -> None:
        pass

    def state_size(self) -> int:
        """Number of entries held (for reports and benchmarks)."""
        return 0


# ---------------------------------------------------------------- user functions

def _split_words(rec: Record) -> Iterable[Record]:
    _, line, ts = rec
    return [(w, 1, ts) for w in line.split()]


def _identity(rec: Record) -> Record:
    return rec


def _key_to_tag(rec: Record) -> Record:
    return (rec[0], 1, rec[2])


def _is_even_key(rec: Record) -> bool:
    return stable_hash(rec[0]) % 2 == 0


BUILTIN_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "split_words": _split_words,
    "identity": _identity,
    "key_one": _key_to_tag,
    "even_key": _is_even_key,
}


def resolve_function(name: str) -> Callable[..., Any]:
    """A built-in function name or ``module:function``."""
    if name in BUILTIN_FUNCTIONS:
        return BUILTIN_FUNCTIONS[name]
    if ":" not in name:
        raise LookupError(f"unknown function {name!r} (built-ins: {', '.join(BUILTIN_FUNCTIONS)})")
    module, _, attr = name.partition(":")
    try:
        fn = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as exc:
        raise LookupError(f"cannot import {name!r}: {exc}") from exc
    if not callable(fn):
        raise LookupError(f"{name!r} is not callable")
    return fn


class MapOp(Operator):
    def __init__(self, fn: Callable[[Record], Record]):
        self.fn = fn

    def process(self, records: list[Record], port: int) -> list[Record]:
        fn = self.fn
        return [fn(r) for r in records]


class FilterOp(Operator):
    def __init__(self, fn: Callable[[Record], bool]):
        self.fn = fn

    def process(self, records: list[Record], port: int) -> list[Record]:
        fn = self.fn
        return [r for r in records if fn(r)]


class FlatMapOp(Operator):
    def __init__(self, fn: Callable[[Record], Iterable[Record]]):
        self.fn = fn

    def process(self, records: list[Record], port: int) -> list[Record]:
        out: list[Record] = []
        fn = self.fn
        for r in records:
            out.extend(fn(r))
        return out


# ---------------------------------------------------------------- keyed aggregates

class _KeyedAggregate(Operator):
    """Emits ``(key, aggregate, ts)`` for every input record: the running value."""

    stateful = True

    def __init__(self) -> None:
        self.state: dict[Any, Any] = {}

    def snapshot(self) -> Any:
        return dict(self.state)

    def restore(self, state: Any) -> None:
        self.state = dict(state or {})

    def state_size(self) -> int:
        return len(self.state)


class CountOp(_KeyedAggregate):
    def process(self, records: list[Record], port: int) -> list[Record]:
        st = self.state
        out = []
        for k, _, ts in records:
            c = st.get(k, 0) + 1
            st[k] = c
            out.append((k, c, ts))
        return out


class SumOp(_KeyedAggregate):
    def process(self, records: list[Record], port: int) -> list[Record]:
        st = self.state
        out = []
        for k, v, ts in records:
            s = st.get(k, 0) + v
            st[k] = s
            out.append((k, s, ts))
        return out


class MaxOp(_KeyedAggregate):
    def process(self, records: list[Record], port: int) -> list[Record]:
        st = self.state
        out = []
        for k, v, ts in records:
            cur = st.get(k)
            if cur is None or v > cur:
                st[k] = v
                cur = v
            out.append((k, cur, ts))
        return out


# ---------------------------------------------------------------- windows

_AGGS: dict[str, Callable[[Any, Any], Any]] = {
    "count": lambda acc, v: acc + 1,
    "sum": lambda acc, v: acc + v,
    "max": lambda acc, v: v if acc is None or v > acc else acc,
}
_INIT: dict[str, Any] = {"count": 0, "sum": 0, "max": None}


class WindowOp(Operator):
    """Tumbling (slide == size) or sliding event-time windows per key.

    A window [start, start+size) fires once the input watermark reaches its end and
    emits ``(key, (window_end, aggregate), window_end - 1)``. Sources are in order and
    watermarks travel behind records on FIFO channels, so no record is ever late.
    """

    stateful = True

    def __init__(self, size: int, slide: int, agg: str):
        if size <= 0 or slide <= 0:
            raise ValueError("window size and slide must be positive")
        if agg not in _AGGS:
            raise ValueError(f"unknown aggregate {agg!r} (count, sum, max)")
        self.size, self.slide, self.agg = size, slide, agg
        self._fold = _AGGS[agg]
        # window_start -> key -> accumulator
        self.windows: dict[int, dict[Any, Any]] = {}

    def process(self, records: list[Record], port: int) -> list[Record]:
        size, slide, fold, init = self.size, self.slide, self._fold, _INIT[self.agg]
        wins = self.windows
        for k, v, ts in records:
            last = ts - ts % slide
            start = last
            while start > ts - size:
                w = wins.get(start)
                if w is None:
                    w = wins[start] = {}
                w[k] = fold(w.get(k, init), v)
                start -= slide
        return []

    def on_watermark(self, watermark: int) -> list[Record]:
        out: list[Record] = []
        for start in sorted(s for s in self.windows if s + self.size <= watermark):
            end = start + self.size
            for k, acc in sorted(self.windows.pop(start).items(), key=lambda kv: str(kv[0])):
                out.append((k, (end, acc), end - 1))
        return out

    def snapshot(self) -> Any:
        return {s: dict(w) for s, w in self.windows.items()}

    def restore(self, state: Any) -> None:
        self.windows = {s: dict(w) for s, w in (state or {}).items()}

    def state_size(self) -> int:
        return sum(len(w) for w in self.windows.values())


# ---------------------------------------------------------------- join

class JoinOp(Operator):
    """Symmetric keyed inner join of port 0 (left) and port 1 (right).

    Every matching pair is emitted once, when its later side arrives:
    ``(key, (left_value, right_value), max_ts)``.
    """

    stateful = True
    inputs = 2

    def __init__(self) -> None:
        self.sides: tuple[dict[Any, list[Any]], dict[Any, list[Any]]] = ({}, {})

    def process(self, records: list[Record], port: int) -> list[Record]:
        mine, other = self.sides[port], self.sides[1 - port]
        out: list[Record] = []
        for k, v, ts in records:
            mine.setdefault(k, []).append((v, ts))
            for ov, ots in other.get(k, ()):
                pair = (v, ov) if port == 0 else (ov, v)
                out.append((k, pair, max(ts, ots)))
        return out

    def snapshot(self) -> Any:
        return copy.deepcopy(self.sides)

    def restore(self, state: Any) -> None:
        self.sides = copy.deepcopy(state) if state else ({}, {})

    def state_size(self) -> int:
        return sum(len(v) for side in self.sides for v in side.values())


class SinkOp(Operator):
    """Passes records to the external sink; the protocol decides when they become visible."""


# ---------------------------------------------------------------- registry

@dataclass(frozen=True)
class OperatorType:
    name: str
    description: str
    build: Callable[[dict[str, Any], str | None], Operator]
    needs_function: bool = False
    inputs: int = 1


def _need(fn: str | None) -> str:
    if not fn:
        raise LookupError("needs a 'function'")
    return fn


OPERATORS: dict[str, OperatorType] = {
    "map": OperatorType(
        "map", "one record in, one out, via `function`",
        lambda p, f: MapOp(resolve_function(_need(f))), needs_function=True),
    "filter": OperatorType(
        "filter", "keeps records for which `function` is true",
        lambda p, f: FilterOp(resolve_function(_need(f))), needs_function=True),
    "flat_map": OperatorType(
        "flat_map", "one record in, zero or more out, via `function`",
        lambda p, f: FlatMapOp(resolve_function(_need(f))), needs_function=True),
    "count": OperatorType("count", "keyed running count: (key, count, ts)",
                          lambda p, f: CountOp()),
    "sum": OperatorType("sum", "keyed running sum of values: (key, sum, ts)",
                        lambda p, f: SumOp()),
    "max": OperatorType("max", "keyed running maximum of values: (key, max, ts)",
                        lambda p, f: MaxOp()),
    "window": OperatorType(
        "window",
        "event-time tumbling/sliding window per key; params size, slide (ms), agg",
        lambda p, f: WindowOp(int(p.get("size", 100)), int(p.get("slide", p.get("size", 100))),
                              str(p.get("agg", "count")))),
    "join": OperatorType("join", "two-input keyed inner join (port 0 left, port 1 right)",
                         lambda p, f: JoinOp(), inputs=2),
    "sink": OperatorType("sink", "the external world: output compared against golden",
                         lambda p, f: SinkOp()),
}


def is_source(kind: str) -> bool:
    return kind.startswith("source.")


def operator_names() -> list[str]:
    from ftctl.runtime.sources import SOURCES

    return sorted([*SOURCES, *OPERATORS])


def build_operator(kind: str, params: dict[str, Any], function: str | None) -> Operator:
    return OPERATORS[kind].build(params, function)
