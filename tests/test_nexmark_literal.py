"""The bundled Nexmark queries on the spec's literal 18-event stream (a source.table),
windows scaled down to 10 ms: every result worked out by hand in shared spec nexmark.md,
section 6 (persons 1000-1002, auctions 2000-2004, a bid below reserve, one after expiry,
one on auction 2214 = 18 x 123, a price tie)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ftctl.config.checks import check_topology
from ftctl.config.load import load_topology
from ftctl.config.topology import OperatorSpec
from ftctl.runtime.graph import ExecutionGraph
from ftctl.sim.golden import golden_output
from ftctl.verify.oracle import final_per_key

pytestmark = pytest.mark.sim

ROOT = Path(__file__).resolve().parent.parent / "topologies" / "nexmark"


def P(e: int, pid: int, name: str, city: str, state: str, t: int) -> list[Any]:
    return [e, ["P", pid, name, city, state, t], t]


def A(e: int, aid: int, seller: int, cat: int, ini: int, res: int, t: int, exp: int
      ) -> list[Any]:
    return [e, ["A", aid, seller, cat, ini, res, t, exp], t]


def B(e: int, auction: int, bidder: int, price: int, t: int) -> list[Any]:
    return [e, ["B", auction, bidder, price, "Google", t], t]


LITERAL = [
    P(0, 1000, "ann lee", "boise", "ID", 0), P(1, 1001, "bob kim", "phoenix", "AZ", 1),
    A(2, 2000, 1000, 10, 100, 150, 2, 12), A(3, 2001, 1001, 10, 50, 60, 3, 8),
    A(4, 2002, 1000, 11, 10, 10, 4, 25), B(5, 2000, 1001, 120, 5), B(6, 2001, 1000, 70, 6),
    B(7, 2000, 1001, 200, 7), B(8, 2001, 1000, 90, 9), B(9, 2002, 1001, 40, 11),
    B(10, 2000, 1000, 180, 11), P(11, 1002, "cy ng", "bend", "OR", 13),
    A(12, 2003, 1002, 10, 5, 5, 14, 30), B(13, 2003, 1000, 30, 15),
    B(14, 2002, 1002, 40, 16), B(15, 2214, 1000, 500, 17), B(16, 2002, 1001, 500, 19),
    A(17, 2004, 1001, 12, 1, 1, 21, 40),
]
SCALED = {  # operator -> params, windows of 10 ms (Q5 sliding by 5)
    "counts": {"size": 10, "slide": 5, "agg": "count"},
    "hottest": {"size": 5, "slide": 5, "agg": "argmax", "field": "count"},
    "by-window": {"time_bucket": 10},
    "highest": {"size": 10, "slide": 10, "agg": "argmax", "field": "price"},
    "same-window": {"size": 10},
}


def literal_result(query: str, parallelism: int = 2) -> dict[Any, Any]:
    loaded = load_topology(ROOT / f"{query}.yaml")
    operators = []
    for op in loaded.operators:
        change: dict[str, Any] = {}
        if op.type == "source.nexmark":
            change = {"type": "source.table",
                      "params": {"rows": LITERAL, "record_type": "nexmark.event"}}
        if op.name in SCALED:
            change["params"] = dict(SCALED[op.name])
        if op.type != "sink":
            change["parallelism"] = parallelism
        operators.append(op.model_copy(update=change))
    topo = check_topology(loaded.with_operators(operators))
    (records,) = golden_output(ExecutionGraph(topo)).values()
    return final_per_key(records)


EXPECTED: dict[str, dict[Any, Any]] = {
    "q1": {5: (2000, 1001, 108, 5), 6: (2001, 1000, 63, 6), 7: (2000, 1001, 181, 7),
           8: (2001, 1000, 81, 9), 9: (2002, 1001, 36, 11), 10: (2000, 1000, 163, 11),
           13: (2003, 1000, 27, 15), 14: (2002, 1002, 36, 16), 15: (2214, 1000, 454, 17),
           16: (2002, 1001, 454, 19)},
    "q2": {15: (2214, 500)},
    "q3": {2000: ("ann lee", "boise", "ID", 2000), 2003: ("cy ng", "bend", "OR", 2003)},
    "q4": {10: (300, 3), 11: (500, 1)},
    "q5": {10: (10, (2, ((2000, 2), (2001, 2)))), 15: (15, (3, ((2000, 3),))),
           20: (20, (3, ((2002, 3),))), 25: (25, (2, ((2002, 2),)))},
    "q6": {1000: (700, 2), 1001: (70, 1), 1002: (30, 1)},
    "q7": {0: (10, (200, ((2000, 1001, 200),))),
           10: (20, (500, ((2002, 1001, 500), (2214, 1000, 500))))},
    "q8": {2000: (1000, "ann lee", 150, 10), 2001: (1001, "bob kim", 60, 10),
           2002: (1000, "ann lee", 10, 10), 2003: (1002, "cy ng", 5, 20)},
}


@pytest.mark.parametrize("query", sorted(EXPECTED))
@pytest.mark.parametrize("parallelism", [1, 3])
def test_literal_stream_gives_the_hand_worked_result(query: str, parallelism: int) -> None:
    assert literal_result(query, parallelism) == EXPECTED[query]


def test_q0_passes_the_table_through() -> None:
    result = literal_result("q0")
    assert len(result) == 18 and result[12] == ("A", 2003, 1002, 10, 5, 5, 14, 30)


def test_table_rows_must_not_go_back_in_time() -> None:
    op = OperatorSpec(name="t", type="source.table",
                      params={"rows": [[1, 1, 5], [2, 1, 4]], "record_type": "tally"})
    from ftctl.runtime.sources import check_source

    with pytest.raises(ValueError, match="rows\\[1\\]: ts 4 is before"):
        check_source(op.type, op.params)
