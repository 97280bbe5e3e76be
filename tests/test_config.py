"""Topology and scenario files: loading, checks, and the config commands' messages."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from ftctl.cli import app
from ftctl.config.errors import ConfigError
from ftctl.config.load import load_scenario, load_topology

FIXTURES = Path(__file__).parent / "fixtures" / "config"
CHAOS = Path(__file__).parent.parent / "chaos"

GOOD = """\
name: wordcount
description: lines -> words -> count -> sink
input: {records: 200, seed: 7, batch: 10}
operators:
  - {name: lines, type: source.text, parallelism: 1}
  - {name: split, type: flat_map, function: split_words, parallelism: 2}
  - {name: count, type: count, parallelism: 2}
  - {name: out, type: sink}
edges:
  - {from: lines, to: split, partition: round-robin}
  - {from: split, to: count, partition: hash}
  - {from: count, to: out, partition: forward}
"""


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, list(args))
    assert "Traceback" not in result.output + result.stderr
    assert result.exception is None or isinstance(result.exception, SystemExit)
    return result.exit_code, result.stdout, result.stderr


def write(tmp_path: Path, text: str, name: str = "t.yaml") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


# ---------------------------------------------------------------- the CLI's one-line errors


@pytest.mark.parametrize(
    ("fixture", "message"),
    [
        ("unknown-field.yaml", "unknown-field.yaml:6: operators[1]: unknown field 'xyz'"),
        (
            "unknown-operator.yaml",
            "unknown-operator.yaml:4: operators[1].type: unknown operator 'foo' (known: avg, "
            "count, filter, flat_map, join, key_by, map, max, nexmark.winning_bids, reorder, "
            "sink, source.hashtags, source.nexmark, source.table, source.text, source.votes, sum, "
            "tail_avg, "
            "window, window_join)",
        ),
        (
            "wrong-type.yaml",
            "wrong-type.yaml:3: input.records: expected an integer, got 'abc'",
        ),
        ("missing-operator.yaml", "missing-operator.yaml:8: edges[1].to: no operator named 'x'"),
        ("cycle.yaml", "cycle.yaml:7: edges: cycle a -> b -> a"),
    ],
)
def test_validate_bad_file(fixture: str, message: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(FIXTURES)
    code, out, err = run("validate", fixture)
    assert code == 2
    assert err == f"error: {message}\n"
    assert out == ""


@pytest.mark.parametrize("where", ["type", "params", "edge", "top"])
def test_user_strings_with_control_characters_are_echoed_escaped(
        tmp_path: Path, where: str) -> None:
    doc = yaml.safe_load(GOOD)
    bad = "co\nunt\t"
    if where == "type":
        doc["operators"][2]["type"] = bad
    elif where == "params":
        doc["operators"][0]["params"] = {bad: 1}
    elif where == "edge":
        doc["edges"][1]["to"] = bad
    else:
        doc[bad] = 1
    code, _, err = run("validate", write(tmp_path, yaml.safe_dump(doc)))
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "t.yaml" in lines[0], err
    assert "co\\nunt\\t" in lines[0]  # escaped as repr escapes them


def test_installed_command_prints_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(FIXTURES)
    proc = subprocess.run(
        [sys.executable, "-m", "ftctl.cli", "validate", "unknown-operator.yaml", "cycle.yaml"],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "40"},
        check=False,
    )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 2
    assert lines[0].startswith("error: unknown-operator.yaml:4: operators[1].type: unknown ")
    assert lines[1] == "error: cycle.yaml:7: edges: cycle a -> b -> a"


def test_validate_missing_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    code, _, err = run("validate", "nope.yaml")
    assert code == 2
    assert err == "error: nope.yaml: no such file\n"


def test_validate_good_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    write(tmp_path, GOOD, "wc.yaml")
    code, out, err = run("validate", "wc.yaml")
    assert (code, err) == (0, "")
    assert out == "ok wc.yaml (topology wordcount: 4 operators, 6 instances)\n"


def test_validate_keeps_checking_after_a_bad_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    write(tmp_path, GOOD, "wc.yaml")
    code, out, err = run("validate", "nope.yaml", "wc.yaml")
    assert code == 2
    assert err == "error: nope.yaml: no such file\n"
    assert out.startswith("ok wc.yaml ")


def test_validate_shipped_scenarios() -> None:
    files = sorted(str(p) for p in CHAOS.glob("*.yaml"))
    assert any(f.endswith("single-kill.yaml") for f in files)
    assert any(f.endswith("rack-failure.yaml") for f in files)
    code, out, err = run("validate", *files)
    assert (code, err) == (0, "")
    assert "(scenario rack-failure: 2 faults)" in out


# ---------------------------------------------------------------- list and schema


def test_schema_topology_is_json() -> None:
    code, out, _ = run("schema", "topology")
    assert code == 0
    schema = json.loads(out)
    assert "operators" in schema["properties"]


def test_schema_scenario_to_file(tmp_path: Path) -> None:
    target = tmp_path / "scenario.json"
    code, _, _ = run("schema", "scenario", "-o", str(target))
    assert code == 0
    assert "faults" in json.loads(target.read_text())["properties"]


def test_list_operators() -> None:
    code, out, _ = run("list", "operators")
    assert code == 0
    assert "count" in out
    assert "source.text" in out


def test_list_operators_json() -> None:
    code, out, _ = run("list", "operators", "--json")
    assert code == 0
    names = {row["name"] for row in json.loads(out)}
    assert {"count", "source.text", "sink"} <= names


def test_list_faults_and_protocols_json() -> None:
    code, out, _ = run("list", "faults", "--json")
    assert code == 0
    assert "kill-group" in {row["type"] for row in json.loads(out)}
    code, out, _ = run("list", "protocols", "--json")
    assert code == 0
    declared = {row["name"]: row["guarantee"] for row in json.loads(out)}
    assert declared["checkpoint"] == "exactly-once"
    assert declared["none"] == "at-most-once (per topology)"


def test_list_topologies(tmp_path: Path) -> None:
    write(tmp_path, GOOD, "wc.yaml")
    code, out, _ = run("list", "topologies", "--dir", str(tmp_path), "--json")
    assert code == 0
    assert json.loads(out)[0]["description"] == "lines -> words -> count -> sink"


# ---------------------------------------------------------------- loader and checks


def error_of(tmp_path: Path, text: str) -> str:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_topology(path)
    return str(info.value).removeprefix(path)


def test_good_topology_fills_sink_mode(tmp_path: Path) -> None:
    topology = load_topology(write(tmp_path, GOOD))
    assert topology.operator("out").mode == "multiset"


def test_invalid_yaml_names_line(tmp_path: Path) -> None:
    text = "name: x\noperators:\n  - {name: a, type: source.text\n  - {name: b}\n"
    assert error_of(tmp_path, text) == ":4: invalid YAML: expected ',' or '}', but got '{'"


def test_top_level_must_be_mapping(tmp_path: Path) -> None:
    assert error_of(tmp_path, "- a\n") == ":1: expected a mapping at the top level, got a list"


def test_duplicate_key(tmp_path: Path) -> None:
    assert error_of(tmp_path, "name: a\nname: b\n") == ":2: invalid YAML: duplicate key 'name'"


def test_unknown_field_suggests(tmp_path: Path) -> None:
    text = GOOD.replace("type: count, parallelism", "type: count, paralelism")
    assert error_of(tmp_path, text) == (
        ":7: operators[2]: unknown field 'paralelism' (did you mean 'parallelism'?)"
    )


def test_missing_field(tmp_path: Path) -> None:
    assert error_of(tmp_path, GOOD.replace("name: wordcount\n", "")) == (
        ":1: missing required field 'name'"
    )


def _replace(old: str, new: str) -> str:
    assert old in GOOD
    return GOOD.replace(old, new)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            _replace("name: count,", "name: split,"),
            ":7: operators[2].name: duplicate operator name 'split' (also operators[1])",
        ),
        (
            _replace("function: split_words, ", ""),
            ":6: operators[1].function: required for flat_map (built-ins: split_words, "
            "identity, key_one, even_key, nexmark.* (ftctl list operators), or "
            "'module:function')",
        ),
        (
            _replace("split_words", "nope"),
            ":6: operators[1].function: unknown function 'nope' "
            "(built-ins: split_words, identity, key_one, even_key, nexmark.* (ftctl list "
            "operators))",
        ),
        (
            _replace("{name: out, type: sink}", "{name: out, type: sink, parallelism: 3}"),
            ":12: edges[2].partition: forward needs equal parallelism ('count' has 2, "
            "'out' has 3); use hash, round-robin or broadcast",
        ),
        (
            _replace("{from: lines, to: split", "{from: out, to: split")
            + "  - {from: lines, to: out}\n",
            ":10: edges[0].from: 'out' is a sink and has no output",
        ),
        (
            _replace("{from: split, to: count", "{from: split, to: lines"),
            ":11: edges[1].to: 'lines' is a source and takes no input",
        ),
        (
            _replace("  - {from: split, to: count, partition: hash}\n", ""),
            ":6: operators[1]: 'split' has no outgoing edge; its output would be lost",
        ),
        (
            _replace("type: count, parallelism: 2", "type: count, parallelism: 2, mode: multiset"),
            ":7: operators[2].mode: only sinks take a mode",
        ),
        (
            _replace("{name: out, type: sink}", "{name: out, type: sum}"),
            ":4: operators: no sink; add an operator of type 'sink'",
        ),
        (
            _replace("partition: hash}", "partition: hash, port: 1}"),
            ":11: edges[1].port: 'count' (count) has one input; the port must be 0",
        ),
        (
            _replace("records: 200", "records: 0"),
            ":3: input.records: must be >= 1, got 0",
        ),
        (
            _replace("batch: 10}", "batch: 10, rate_change: {at: 100, rate: 5}}"),
            ":3: input.rate_change: needs input.rate (the pace before the change)",
        ),
        (
            _replace("partition: hash}", "partition: hashed}"),
            ":11: edges[1].partition: expected 'forward', 'hash', 'broadcast' or "
            "'round-robin', got 'hashed'",
        ),
    ],
    ids=[
        "duplicate-name",
        "function-missing",
        "function-unknown",
        "forward-parallelism",
        "sink-output",
        "source-input",
        "dead-end",
        "mode-on-non-sink",
        "no-sink",
        "port-on-single-input",
        "below-minimum",
        "rate-change-without-rate",
        "bad-literal",
    ],
)
def test_graph_checks(tmp_path: Path, text: str, message: str) -> None:
    assert error_of(tmp_path, text) == message


def test_source_param_type(tmp_path: Path) -> None:
    text = _replace("type: source.text,", "type: source.text, params: {vocabulary: lots},")
    assert error_of(tmp_path, text) == (
        ":5: operators[0].params.vocabulary: expected an integer, got 'lots'"
    )


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    edits=st.lists(
        st.tuples(st.integers(0, len(GOOD) - 1), st.sampled_from(list("{}[]:,-&*!|>'\"# \n\tx0"))),
        min_size=1,
        max_size=4,
    )
)
def test_mangled_files_give_config_errors_only(
    tmp_path: Path, edits: list[tuple[int, str]]
) -> None:
    text = list(GOOD)
    for pos, char in edits:
        text[min(pos, len(text) - 1)] = char
    path = write(tmp_path, "".join(text))
    try:
        load_topology(path)
    except ConfigError as exc:
        assert "\n" not in str(exc)


def test_join_needs_both_ports(tmp_path: Path) -> None:
    text = """\
name: j
operators:
  - {name: a, type: source.votes}
  - {name: b, type: source.votes}
  - {name: j, type: join}
  - {name: out, type: sink, mode: multiset}
edges:
  - {from: a, to: j, partition: hash}
  - {from: b, to: j, partition: hash}
  - {from: j, to: out}
"""
    assert error_of(tmp_path, text) == (
        ":5: operators[2]: join 'j' needs an edge on port 1 (right input)"
    )
    fixed = text.replace("{from: b, to: j, partition: hash}", "{from: b, to: j, port: 1}")
    # (final-per-key would be refused: a join's output order depends on its inputs.)
    assert load_topology(write(tmp_path, fixed)).operator("out").mode == "multiset"


# ---------------------------------------------------------------- scenarios

SCENARIO = """\
name: s
seed: 3
faults:
  - {type: kill-task, at: 3.0, target: random}
  - type: delay
    every: 2.0
    count: 3
    target: "count[1]"
    duration: 0.5
    params: {ms: 20}
"""


def scenario_error(tmp_path: Path, text: str) -> str:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_scenario(path)
    return str(info.value).removeprefix(path)


def test_good_scenario_fills_params(tmp_path: Path) -> None:
    scenario = load_scenario(write(tmp_path, SCENARIO))
    assert scenario.seed == 3
    delay = scenario.faults[1]
    assert delay.params == {"peer": None, "ms": 20.0, "jitter_ms": 0.0}
    target = delay.parsed_target()
    assert (target.kind, target.operator, target.index) == ("instance", "count", 1)


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        (
            "at: 3.0, target",
            "at: 3.0, every: 1, target",
            ":4: faults[0]: give exactly one of 'at', 'every', 'trigger', 'during' or 'after' "
            "(got 'at' and 'every')",
        ),
        ("{ms: 20}", "{ms: fast}", ":10: faults[1].params.ms: expected a number, got 'fast'"),
        ("{ms: 20}", "{msec: 20}", ":10: faults[1].params: unknown field 'msec'"),
        (
            "type: kill-task,",
            "type: kill-task, window: 1,",
            (":4: faults[0].window: only kill-group takes a window, not kill-task"),
        ),
        (  # a stall of no time is no fault: refused before any run, not mid-schedule
            "{type: kill-task, at: 3.0, target: random}",
            "{type: clock-stall, at: 3.0, target: random}",
            ":4: faults[0]: clock-stall needs a duration (how long it lasts)",
        ),
        (
            "target: random",
            "target: two words",
            (
                ":4: faults[0].target: expected an instance like count[1], an operator, a selector "
                "like rack=a, or random, got 'two words'"
            ),
        ),
    ],
)
def test_scenario_errors(tmp_path: Path, old: str, new: str, message: str) -> None:
    assert old in SCENARIO
    assert scenario_error(tmp_path, SCENARIO.replace(old, new)) == message


RELATIVE = SCENARIO.replace("{type: kill-task,", "{id: kill-a, type: kill-task,") + """\
  - type: kill-task
    after: {fault: kill-a, delay: 2s}
    target: random
"""


def test_after_reads_delays_with_units(tmp_path: Path) -> None:
    after = load_scenario(write(tmp_path, RELATIVE)).faults[2].after
    assert after is not None and (after.fault, after.phase, after.delay) == ("kill-a", None, 2.0)
    ms = RELATIVE.replace("delay: 2s", "delay: 250ms")
    after = load_scenario(write(tmp_path, ms)).faults[2].after
    assert after is not None and after.delay == 0.25


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ("fault: kill-a,", "fault: kill-b,",
         ":12: faults[2].after.fault: no fault has id 'kill-b' (ids: kill-a)"),
        ("{id: kill-a, type: kill-task, at: 3.0,", "{id: kill-a, type: kill-task, "
         "after: {fault: kill-c},",
         ":4: faults[0].after.fault: no fault has id 'kill-c' (ids: kill-a)"),
        ("{id: kill-a, type: kill-task, at: 3.0,", "{id: kill-a, type: kill-task, "
         "after: {fault: kill-a},",
         ":4: faults[0].after.fault: faults follow each other in a cycle (kill-a -> kill-a), "
         "so none of them would ever strike; start the chain with a fault timed by 'at' or "
         "a phase"),
        ("  - type: kill-task\n    after", "  - id: kill-a\n    type: kill-task\n    after",
         ":11: faults[2].id: 'kill-a' is already the id of faults[0]; ids must be unique"),
        ("delay: 2s", "delay: 2 fortnights",
         ":12: faults[2].after.delay: expected seconds like 2, 2s or 500ms, got "
         "'2 fortnights'"),
        ("delay: 2s", "delay: .inf", ":12: faults[2].after.delay: expected a finite number, "
         "got inf"),
        ("delay: 2s}", "delay: 2s, phase: snapshotting}",
         ":12: faults[2].after: give exactly one of 'fault' (a fault's id) or 'phase'"),
        ("at: 3.0, target", "at: .nan, target", ":4: faults[0].at: expected a finite number, "
         "got nan"),
        ("count: 3", "count: 1000000000", ":7: faults[1].count: must be <= 10000, got "
         "1000000000"),
    ],
)
def test_relative_timing_errors(tmp_path: Path, old: str, new: str, message: str) -> None:
    assert old in RELATIVE
    assert scenario_error(tmp_path, RELATIVE.replace(old, new)) == message


def test_a_cycle_of_two_is_refused(tmp_path: Path) -> None:
    text = RELATIVE.replace("{id: kill-a, type: kill-task, at: 3.0,",
                            "{id: kill-a, type: kill-task, after: {fault: kill-b},")
    text = text.replace("  - type: kill-task\n    after", "  - id: kill-b\n    type: kill-task\n"
                        "    after")
    assert scenario_error(tmp_path, text).startswith(
        ":4: faults[0].after.fault: faults follow each other in a cycle (kill-a -> kill-b -> "
        "kill-a)")


TOPOLOGIES = Path(__file__).resolve().parent.parent / "topologies"


def test_a_loaded_topology_is_frozen() -> None:
    """Nothing changes a loaded topology in place: its input, operators, their params'
    owners and its edges refuse assignment; overrides make a copy."""
    from pydantic import ValidationError

    topo = load_topology(TOPOLOGIES / "wordcount.yaml")
    with pytest.raises(ValidationError, match="frozen"):
        topo.input.records = 5
    with pytest.raises(ValidationError, match="frozen"):
        topo.input = topo.input
    with pytest.raises(ValidationError, match="frozen"):
        topo.operators[0].parallelism = 3
    with pytest.raises(ValidationError, match="frozen"):
        topo.edges[0].partition = "hash"
    before = topo.model_dump()
    bigger = topo.with_input(records=7000, rate=50.0, seed=9)
    assert (bigger.input.records, bigger.input.rate, bigger.input.seed) == (7000, 50.0, 9)
    assert bigger.input.batch == topo.input.batch and bigger.operators == topo.operators
    assert topo.model_dump() == before
    assert topo.with_input() is topo and topo.with_input(seed=None) is topo
    with pytest.raises(ValidationError):
        topo.with_input(records=0)  # validated like the file


def test_run_and_chaos_overrides_leave_the_topology_file_alone() -> None:
    """``ftctl chaos`` sizes a copy: the loaded topology keeps its own input."""
    from ftctl.run.chaos import DEFAULT_RECORDS, TARGET_SECONDS, size_input
    from ftctl.runtime.graph import ExecutionGraph

    topo = load_topology(TOPOLOGIES / "wordcount.yaml")
    before = topo.model_dump()
    sized = size_input(topo, None, None)
    assert topo.model_dump() == before
    assert sized.input.records == max(topo.input.records, DEFAULT_RECORDS)
    graph = ExecutionGraph(sized)
    per_source = max(hi - lo for lo, hi in map(graph.source_range, graph.sources))
    assert sized.input.rate == round(per_source / TARGET_SECONDS, 3)
    assert size_input(topo, 800, 10.0).input.model_dump(include={"records", "rate"}) == {
        "records": 800, "rate": 10.0}
