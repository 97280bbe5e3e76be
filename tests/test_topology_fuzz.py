"""Property-based fuzzing of topology files through the command line.

Topologies are drawn as mutants of every bundled file (a field deleted, set to a value of
the wrong kind or size, an operator, function, partition or mode swapped for another, an
unknown key added), as legal variations of them (another parallelism, partition, sink
mode, size), as chains built from scratch out of the operator catalogue, and as files that
are not a topology at all (binary, a YAML list, a broken document). For each:
`ftctl validate` exits 0, or 2 with one line naming the file and no traceback; a file that
validates runs the determinism check and one schedule of `ftctl sim` under checkpoint
without a crash: exit 0 or 1 with its JSON summary, or 2 with one line (a protocol can
refuse a topology it does not cover, the check one whose output depends on the order of
deliveries, a user function can return what its operator cannot use).
"""

from __future__ import annotations

import copy
import math
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.cli_fuzz import FUZZ_SETTINGS, runs, validates

pytestmark = pytest.mark.sim

ROOT = Path(__file__).resolve().parent.parent / "topologies"
# Sized down (records of Nexmark and progressive15 are sized for Spark) so that one
# simulated schedule of a mutant that still validates takes well under a second.
SMALL = 3000


def _small(doc: dict[str, Any]) -> dict[str, Any]:
    doc["input"]["records"] = min(doc["input"]["records"], SMALL)
    for op in doc["operators"]:
        if isinstance(op.get("input"), dict) and "records" in op["input"]:
            op["input"]["records"] = min(op["input"]["records"], SMALL)
    return doc


BUNDLED = {str(p.relative_to(ROOT)): _small(yaml.safe_load(p.read_text()))
           for p in sorted([*ROOT.glob("*.yaml"), *ROOT.glob("*/*.yaml")])}

NASTY: list[Any] = [0, -1, 1, 2, 2.5, 2**63, 10**12, math.inf, -math.inf, math.nan, "", "x",
                    "count[1]", [], {}, [1, 2], {"a": 1}, True, None]
TYPES = ["source.text", "source.votes", "source.hashtags", "source.nexmark", "source.table",
         "map", "filter", "flat_map", "count", "sum", "max", "avg", "tail_avg", "key_by",
         "window", "join", "window_join", "reorder", "nexmark.winning_bids", "sink",
         "print", "os.system", "builtins:eval", "source.nope"]
FUNCTIONS = ["split_words", "key_one", "identity", "nexmark.is_bid", "nexmark.is_person",
             "nexmark.is_auction", "nexmark.q1_to_euro", "nexmark.q7_project", "print", "len",
             "os:system", "builtins:eval", "math:sqrt", "json:loads", "nope"]
NAMES = st.sampled_from(["lines", "split", "count", "out", "events", "bids", "join", "left",
                         "right", "nosuch", "", "two words"])
VALUE = st.one_of(st.sampled_from(NASTY), st.sampled_from(TYPES), st.sampled_from(FUNCTIONS),
                  st.sampled_from(["hash", "forward", "broadcast", "round-robin",
                                   "multiset", "final-per-key", "ordered-per-key",
                                   "range", "strided"]),
                  NAMES, st.integers(-3, 100_000), st.floats(allow_nan=True))
PARAM_KEYS = ["words_per_line", "vocabulary", "skew", "keys", "users", "ms_per_record",
              "event_rate", "in_flight_auctions", "active_people", "categories", "pad_bytes",
              "kinds", "rows", "record_type", "size", "slide", "agg", "field", "n",
              "time_bucket", "bogus"]


def _mutate_in(target: dict[str, Any], draw: st.DrawFn, keys: list[str]) -> None:
    key = draw(st.sampled_from(sorted({*target, *keys})))
    if key in target and draw(st.integers(0, 3)) == 0:
        del target[key]
    else:
        target[key] = draw(VALUE)


@st.composite
def mutant(draw: st.DrawFn) -> Any:
    doc = copy.deepcopy(BUNDLED[draw(st.sampled_from(sorted(BUNDLED)))])
    for _ in range(draw(st.integers(1, 3))):
        where = draw(st.sampled_from(["top", "input", "operator", "params", "edge", "list"]))
        ops, edges = doc.get("operators"), doc.get("edges")
        if where == "top":
            _mutate_in(doc, draw, ["name", "input", "operators", "edges", "oracle", "bogus"])
        elif where == "input" and isinstance(doc.get("input"), dict):
            _mutate_in(doc["input"], draw, ["records", "rate", "seed", "batch", "rate_change"])
        elif where in ("operator", "params") and isinstance(ops, list) and ops:
            op = ops[draw(st.integers(0, len(ops) - 1))]
            if not isinstance(op, dict):
                continue
            if where == "params" and isinstance(op.get("params"), dict):
                _mutate_in(op["params"], draw, PARAM_KEYS)
            else:
                _mutate_in(op, draw, ["name", "type", "parallelism", "function", "params",
                                      "mode", "split", "input", "out_type", "bogus"])
        elif where == "edge" and isinstance(edges, list) and edges:
            edge = edges[draw(st.integers(0, len(edges) - 1))]
            if isinstance(edge, dict):
                _mutate_in(edge, draw, ["from", "to", "partition", "port", "bogus"])
        elif where == "list" and isinstance(edges, list) and edges:
            # an edge dropped or duplicated: dangling operators, parallel edges
            k = draw(st.integers(0, len(edges) - 1))
            if draw(st.booleans()):
                del edges[k]
            else:
                edges.append(copy.deepcopy(edges[k]))
    return doc


@st.composite
def plausible(draw: st.DrawFn) -> Any:
    """Mutants most of which still validate: a parallelism, partition, sink mode, source
    split, size or batch changed to another legal value, so the sim runs shapes the
    bundled files do not have."""
    doc = copy.deepcopy(BUNDLED[draw(st.sampled_from(sorted(BUNDLED)))])
    ops, edges = doc["operators"], doc["edges"]
    for _ in range(draw(st.integers(1, 3))):
        op, edge = draw(st.sampled_from(ops)), draw(st.sampled_from(edges))
        change = draw(st.sampled_from(["parallelism", "partition", "mode", "split",
                                       "records", "batch"]))
        if change == "parallelism" and op["type"] != "sink":
            op["parallelism"] = draw(st.integers(1, 4))
        elif change == "partition":
            edge["partition"] = draw(st.sampled_from(["hash", "forward", "broadcast",
                                                      "round-robin"]))
        elif change == "mode" and op["type"] == "sink":
            op["mode"] = draw(st.sampled_from(["multiset", "final-per-key", "ordered-per-key"]))
        elif change == "split" and op["type"].startswith("source."):
            op["split"] = draw(st.sampled_from(["range", "strided"]))
        elif change == "records":
            doc["input"]["records"] = draw(st.integers(1, SMALL))
        elif change == "batch":
            doc["input"]["batch"] = draw(st.sampled_from([1, 7, 100, 5000]))
    return doc


@st.composite
def chain(draw: st.DrawFn) -> Any:
    """A source and up to four operators in a line, each of any catalogue type, ending in
    a sink: record types, keys and orders rarely fit, so validation has to say why."""
    source = draw(st.sampled_from(TYPES[:5]))
    ops: list[dict[str, Any]] = [{"name": "s0", "type": source,
                                  "parallelism": draw(st.integers(1, 3))}]
    if source == "source.nexmark":
        ops[0]["split"] = "strided"
    for i in range(1, draw(st.integers(1, 4)) + 1):
        op: dict[str, Any] = {"name": f"o{i}", "type": draw(st.sampled_from(TYPES[5:19])),
                              "parallelism": draw(st.integers(1, 3))}
        if op["type"] in ("map", "filter", "flat_map"):
            op["function"] = draw(st.sampled_from(FUNCTIONS))
        if draw(st.booleans()):
            op["params"] = draw(st.dictionaries(st.sampled_from(PARAM_KEYS),
                                                st.one_of(st.integers(0, 20_000), VALUE),
                                                max_size=2))
        ops.append(op)
    ops.append({"name": "out", "type": "sink",
                "mode": draw(st.sampled_from(["multiset", "final-per-key", "ordered-per-key"]))})
    edges = [{"from": a["name"], "to": b["name"],
              "partition": draw(st.sampled_from(["hash", "forward", "round-robin",
                                                 "broadcast"]))}
             for a, b in pairwise(ops)]
    return {"name": "chain", "input": {"records": draw(st.integers(1, SMALL)),
                                       "seed": draw(st.integers(0, 9)), "batch": 100},
            "operators": ops, "edges": edges}


GARBAGE = st.one_of(
    st.binary(max_size=64),
    st.sampled_from([b"", b"[]", b"- 1\n- 2\n", b"name: x\n", b"{a: [", b"operators: 7\n",
                     b"\xff\xfe\x00name", b"&a [*a]", b"x: !!python/object:os.system {}\n",
                     b"name: t\ninput: {records: 10}\noperators: []\nedges: []\n"]),
)


@settings(FUZZ_SETTINGS, max_examples=110)
@given(st.one_of(mutant(), plausible(), chain(), GARBAGE))
def test_a_topology_is_refused_in_one_line_or_runs_in_the_sim(tmp_path: Path, doc: Any) -> None:
    path = tmp_path / "fuzzed.yaml"
    if isinstance(doc, bytes):
        path.write_bytes(doc)
    else:
        path.write_text(yaml.safe_dump(doc, allow_unicode=True))
    if not validates(path, doc):
        return
    # Two interleavings of the determinism check run first: an order-dependent file is
    # refused in one line, like any other.
    summary = runs(["sim", str(path), "-p", "checkpoint", "-n", "1", "--json",
                    "--determinism", "2"], doc)
    assert summary is None or summary["schedules"] == 1
