"""Mutated copies of every bundled topology and scenario file: each either validates and
then passes a few simulated schedules under checkpoint, or is refused by `ftctl validate`
with exit 2 and one line naming the file, never with a traceback.

The mutations are the ones that found crashes: a value replaced by zero, a negative or
huge number, infinity, NaN, a string, a list or nothing; a key deleted; an operator's
type, function, partition or sink mode swapped for another valid one.
"""

from __future__ import annotations

import copy
import math
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from ftctl.cli import app
from ftctl.config.errors import ConfigError
from ftctl.config.load import load_config, load_topology
from ftctl.config.topology import Topology
from ftctl.runtime.operators import BUILTIN_FUNCTIONS, operator_names
from ftctl.sim.runner import Simulator
from protocols.registry import PROTOCOLS

ROOT = Path(__file__).resolve().parent.parent
FILES = sorted([*ROOT.glob("topologies/*.yaml"), *ROOT.glob("topologies/nexmark/*.yaml"),
                *ROOT.glob("chaos/*.yaml")])
DOCS = {f.name if f.parent.name != "nexmark" else f"nexmark/{f.name}":
        yaml.safe_load(f.read_text()) for f in FILES}
NASTY: list[Any] = [0, -1, 1, 2**63, 10**12, math.inf, -math.inf, math.nan, 0.5, "",
                    "x", "round-robin", [], {}, True, None, "builtins:len"]
SWAPS: dict[str, list[Any]] = {
    "type": operator_names(),
    "function": [*BUILTIN_FUNCTIONS, "builtins:len", "os:getcwd", "math:sqrt"],
    "partition": ["forward", "hash", "broadcast", "round-robin"],
    "mode": ["multiset", "final-per-key", "ordered-per-key"],
}


def _paths(node: Any, at: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [at] if at else []
    if isinstance(node, dict):
        for k, v in node.items():
            out += _paths(v, (*at, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out += _paths(v, (*at, i))
    return out


@st.composite
def mutants(draw: st.DrawFn) -> tuple[str, Any]:
    name = draw(st.sampled_from(sorted(DOCS)))
    doc = copy.deepcopy(DOCS[name])
    for _ in range(draw(st.integers(1, 2))):
        paths = _paths(doc)
        path = draw(st.sampled_from(paths))
        parent = doc
        for part in path[:-1]:
            parent = parent[part]
        last = path[-1]
        how = draw(st.sampled_from(["value", "delete", "swap"]))
        if how == "delete":
            del parent[last]
        elif how == "swap" and last in SWAPS:
            parent[last] = draw(st.sampled_from(SWAPS[last]))
        else:
            parent[last] = draw(st.sampled_from(NASTY))
    return name, doc


def _small(topo: Topology) -> Topology:
    """The validated topology with few records, so a schedule takes milliseconds."""
    return topo.with_input(records=min(topo.input.records, 300))


@settings(max_examples=120, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(mutants())
def test_mutant_is_refused_in_one_line_or_runs(tmp_path_factory: Any,
                                               mutant: tuple[str, Any]) -> None:
    name, doc = mutant
    path = tmp_path_factory.mktemp("m") / Path(name).name
    path.write_text(yaml.safe_dump(doc, allow_unicode=True))
    try:
        config = load_config(path)
    except ConfigError as exc:
        line = str(exc)
        assert "\n" not in line and line.startswith(str(path))
        return
    if isinstance(config, Topology):
        # A topology that validates is one ftctl can verify: exactly-once holds under
        # checkpoint, whatever order the schedules deliver batches in.
        summary = Simulator(_small(config), PROTOCOLS["checkpoint"], {}).run_many(2, 0)
        assert summary.passed, (name, summary.violations)


@pytest.mark.parametrize("content", [
    bytes(range(256)), b"\x00\x01name: x", b"\xff\xfe\x00", b"name: [unclosed",
    b"a: &a [*a]", b"- 1\n- 2\n", b"name: x\noperators: 7\n",
])
def test_garbage_files_exit_2_in_one_line(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "bad.yaml"
    path.write_bytes(content)
    result = CliRunner().invoke(app, ["validate", str(path)])
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and str(path) in lines[0] and "Traceback" not in result.output


@pytest.mark.parametrize(("old", "new", "field"), [
    ("vocabulary: 1000", "vocabulary: 0", "vocabulary"),
    ("vocabulary: 1000", "vocabulary: 1000000000000", "vocabulary"),
    ("words_per_line: 8", "words_per_line: 100000000", "words_per_line"),
    # 2 x 10^8 lines of 8 words: 1.6 x 10^9 words, past what a run may generate
    ("records: 2000", "records: 200000000", "words_per_line"),
    ("records: 2000", "records: 2000000000", "records"),
    ("vocabulary: 1000}", "vocabulary: 1000, ms_per_record: .inf}", "ms_per_record"),
    ("vocabulary: 1000}", "vocabulary: 1000, ms_per_record: .nan}", "ms_per_record"),
])
def test_sizes_that_cannot_run_are_refused(tmp_path: Path, old: str, new: str,
                                           field: str) -> None:
    text = (ROOT / "topologies" / "wordcount.yaml").read_text()
    assert old in text
    path = tmp_path / "wc.yaml"
    path.write_text(text.replace(old, new))
    result = CliRunner().invoke(app, ["validate", str(path)])
    assert result.exit_code == 2
    assert field in result.stderr and len(result.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("command", [
    ["run"], ["sim", "-n", "1"], ["chaos", "--kill", "1"],
    ["compare", "protocols", "--kill", "1"],
])
def test_an_input_override_past_its_limit_is_one_line(command: list[str]) -> None:
    # Refused before anything starts: the limit is the file's, whoever gives the number.
    topology = str(ROOT / "topologies" / "wordcount.yaml")
    args = [*command[:2], topology, *command[2:]] if command[0] == "compare" else \
        [command[0], topology, *command[1:]]
    result = CliRunner().invoke(app, [*args, "--records", "2000000000"])
    assert result.exit_code == 2, result.output
    assert result.stderr.strip() == "error: --records: must be <= 1000000000, got 2000000000"


def test_an_override_is_checked_with_the_file() -> None:
    # 2 x 10^8 lines of 8 words is within the records limit but past the words limit,
    # which only the whole topology can tell.
    path = ROOT / "topologies" / "wordcount.yaml"
    with pytest.raises(ConfigError, match="1600000000 words") as caught:
        load_topology(path, records=200_000_000)
    assert caught.value.file == str(path) and "words_per_line" in str(caught.value.field)
    assert load_topology(path, records=100_000_000, seed=7).input.seed == 7
