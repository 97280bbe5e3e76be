"""Validation refuses topologies ftctl cannot verify: record types that do not fit
(V1), keyed state split across instances (V2), output that depends on arrival order
(V3). (V4, event-time operators without event-time
sources, cannot be written today: every built-in source emits ordered event times.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from ftctl.config.errors import ConfigError
from ftctl.config.load import load_topology

ROOT = Path(__file__).resolve().parent.parent / "topologies"
BUNDLED = sorted([*ROOT.glob("*.yaml"), *ROOT.glob("nexmark/*.yaml"), *ROOT.glob("joins/*.yaml")])


@pytest.mark.parametrize("path", BUNDLED, ids=lambda p: p.stem)
def test_bundled_topologies_validate(path: Path) -> None:
    load_topology(path)


def _refused(tmp_path: Path, base: str, *edits: tuple[str, str]) -> str:
    text = (ROOT / base).read_text()
    for old, new in edits:
        assert old in text, old
        text = text.replace(old, new)
    path = tmp_path / "t.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_topology(path)
    return str(info.value).split(": ", 1)[1]


def test_v1_record_type_mismatch(tmp_path: Path) -> None:
    msg = _refused(tmp_path, "wordcount.yaml",
                   ("source.text, params: {words_per_line: 8, vocabulary: 1000}",
                    "source.votes"))
    assert msg == "edges[0]: 'split' port 0 takes text.line, 'lines' makes tally"


def test_v1_key_by_unknown_field(tmp_path: Path) -> None:
    msg = _refused(tmp_path, "nexmark/q3.yaml", ("field: seller", "field: sellr"))
    assert msg == ("operators[4].params: 'sellr' is not a field of nexmark.auction "
                   "(fields: kind, id, seller, category, initial_bid, reserve, date_time, "
                   "expires)")


def test_v2_round_robin_into_keyed_count(tmp_path: Path) -> None:
    msg = _refused(tmp_path, "wordcount.yaml",
                   ("{from: split, to: count, partition: hash}",
                    "{from: split, to: count, partition: round-robin}"))
    assert msg == ("edges[1].partition: round-robin into 'count' (count, keyed state, "
                   "parallelism 2) splits a key's records across instances; use hash")


def test_v3_final_per_key_after_a_join(tmp_path: Path) -> None:
    msg = _refused(tmp_path, "nexmark/q3.yaml", ("mode: multiset", "mode: final-per-key"))
    assert msg == ("operators[7]: mode final-per-key, but 'project' (map, operators[6]) "
                   "delivers records in the order its inputs interleave; use multiset, or "
                   "a window_join or reorder before it")


def test_v3_q6_without_reorder(tmp_path: Path) -> None:
    msg = _refused(
        tmp_path, "nexmark/q6.yaml",
        ("  - {name: in-order, type: reorder, parallelism: 4}\n", ""),
        ("{from: by-seller, to: in-order, partition: hash}",
         "{from: by-seller, to: last10, partition: hash}"),
        ("  - {from: in-order, to: last10}\n", ""))
    assert msg == ("operators[7]: 'last10' (tail_avg) depends on the order its input "
                   "arrives in from 'by-seller'; add a reorder before it")


def test_v3_ordered_sink_after_merge_of_running_sums(tmp_path: Path) -> None:
    # Q4's per-category means as a sequence: instances of winning bids race.
    msg = _refused(tmp_path, "nexmark/q4.yaml",
                   ("mode: final-per-key", "mode: ordered-per-key"))
    assert "mode ordered-per-key, but 'mean' (avg, operators[7])" in msg


def test_v1_sum_of_text(tmp_path: Path) -> None:
    # Found by tests/test_topology_fuzz.py: the sum crashed mid-run adding a line to 0.
    msg = _refused(tmp_path, "wordcount.yaml",
                   ("type: flat_map, function: split_words", "type: map, function: identity"),
                   ("type: count", "type: sum"))
    assert msg == ("operators[2]: 'count' (sum) adds up values, but its input is text.line, "
                   "not a number; map it to numbers first")


def test_v1_window_sum_of_tuples(tmp_path: Path) -> None:
    msg = _refused(tmp_path, "nexmark/q7.yaml", ("agg: argmax, field: price", "agg: sum"))
    assert msg == ("operators[4]: 'highest' (window, agg sum) adds up values, but its input "
                   "is nexmark.q7, not a number; map it to numbers first, or name a 'field'")


def test_v1_flat_map_function_in_a_map(tmp_path: Path) -> None:
    # Found by tests/test_topology_fuzz.py: each line became a list, and the count
    # downstream failed to unpack it as a record.
    msg = _refused(tmp_path, "wordcount.yaml", ("type: flat_map", "type: map"))
    assert msg == ("operators[1].function: 'split_words' is a flat_map function (it returns "
                   "a list of records); use it in a flat_map")


def test_v1_sum_over_words_still_validates(tmp_path: Path) -> None:
    # A word's value is 1: summing words is counting them.
    path = tmp_path / "t.yaml"
    path.write_text((ROOT / "wordcount.yaml").read_text().replace("type: count", "type: sum")
                    .replace("mode: ordered-per-key", "mode: final-per-key"))
    load_topology(path)
