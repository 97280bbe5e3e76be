"""Property-based fuzzing of chaos-scenario files through the command line.

Scenarios are drawn from scratch (every field, valid and invalid values, ids and `after`
chains, unknown keys), as mostly valid schedules of every fault type and timing, and as
mutants of the bundled files. For each: `ftctl validate`
exits 0, or 2 with one line naming the file and no traceback; a file that validates runs
through `ftctl sim` on wordcount without a crash: exit 0 or 1 with its JSON summary, or 2
with one line (a scenario can be well-formed yet not fit the topology or the protocol:
an instance wordcount lacks, a trigger checkpoint never enters).
"""

from __future__ import annotations

import copy
import math
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from ftctl.config.scenario import FAULT_TYPES
from tests.cli_fuzz import FUZZ_SETTINGS, runs, validates

pytestmark = pytest.mark.sim

ROOT = Path(__file__).resolve().parent.parent
WORDCOUNT = str(ROOT / "topologies" / "wordcount.yaml")
BUNDLED = {p.name: yaml.safe_load(p.read_text()) for p in sorted((ROOT / "chaos").glob("*.yaml"))}

NASTY: list[Any] = [0, -1, 1, 2.5, 2**63, 10**12, math.inf, -math.inf, math.nan, "", "x",
                    "2s", "500ms", [], {}, True, None]
TIMES = st.one_of(st.sampled_from(NASTY), st.floats(0.0, 30.0, allow_nan=False),
                  st.integers(1, 4))
TARGETS = st.sampled_from(["random", "count", "count[1]", "split[0]", "lines[0]", "out[0]",
                           "count[9]", "nosuch", "rack=a", "rack=z", "worker=w1",
                           "worker=w7", "two words", "", 7, None])
IDS = st.sampled_from(["a", "b", "c", "1x", ""])
PHASES = st.sampled_from(["recovering", "snapshotting", "draining", "x y"])
PARAMS = st.dictionaries(
    st.sampled_from(["ms", "jitter_ms", "probability", "factor", "peer", "mode",
                     "distribution", "min", "max", "scale", "timeout", "bogus"]),
    st.one_of(TIMES, TARGETS, st.sampled_from(["all", "progressive", "uniform", "paper"])),
    max_size=3)
AFTER = st.fixed_dictionaries({}, optional={"fault": IDS, "phase": PHASES,
                                            "delay": TIMES, "bogus": TIMES})
FAULT = st.fixed_dictionaries(
    {"type": st.sampled_from([*FAULT_TYPES, "bogus"])},
    optional={"id": IDS, "at": TIMES, "every": TIMES, "count": TIMES,
              "trigger": st.sampled_from(["during-checkpoint", "during-recovery", "nope"]),
              "after": st.one_of(AFTER, TIMES), "target": TARGETS, "window": TIMES,
              "duration": TIMES, "params": PARAMS, "optional": st.booleans(), "bogus": TIMES})


@st.composite
def drawn(draw: st.DrawFn) -> Any:
    doc: dict[str, Any] = {"name": draw(st.sampled_from(["s", "bad name", ""])),
                           "faults": draw(st.lists(FAULT, max_size=4))}
    if draw(st.booleans()):
        doc["seed"] = draw(st.one_of(st.integers(0, 9), st.sampled_from(NASTY)))
    return doc


@st.composite
def plausible(draw: st.DrawFn) -> Any:
    """Scenarios most of which validate: one timing each, targets and params of the kind
    the type takes, ids that `after` chains refer to (cycles and dangling ids included)."""
    faults = []
    n = draw(st.integers(1, 4))
    for i in range(n):
        kind = draw(st.sampled_from(sorted(FAULT_TYPES)))
        fault: dict[str, Any] = {"type": kind, "id": f"f{i}",
                                 "target": draw(st.sampled_from(
                                     ["random", "count", "split[1]", "rack=a", "worker=w0"]))}
        when = draw(st.sampled_from(["at", "every", "trigger", "after-fault", "after-phase"]))
        if when == "at":
            fault["at"] = draw(st.floats(0.0, 30.0))
        elif when == "every":
            fault.update(every=draw(st.floats(0.5, 20.0)), count=draw(st.integers(1, 3)))
        elif when == "trigger":
            fault.update(trigger=draw(st.sampled_from(["during-checkpoint", "during-recovery"])),
                         count=draw(st.integers(1, 2)))
        else:
            anchor = ({"fault": f"f{draw(st.integers(0, n))}"} if when == "after-fault"
                      else {"phase": draw(st.sampled_from(["recovering", "snapshotting"]))})
            fault["after"] = {**anchor, "delay": draw(st.sampled_from([0, 0.5, "2s", "300ms"]))}
        if FAULT_TYPES[kind].takes_duration and draw(st.booleans()):
            fault["duration"] = draw(st.floats(0.1, 5.0))
        if FAULT_TYPES[kind].takes_window:
            fault["window"] = draw(st.floats(0.1, 3.0))
        faults.append(fault)
    return {"name": "plausible", "seed": draw(st.integers(0, 9)), "faults": faults}


@st.composite
def mutant(draw: st.DrawFn) -> Any:
    doc = copy.deepcopy(BUNDLED[draw(st.sampled_from(sorted(BUNDLED)))])
    faults = doc["faults"]
    for _ in range(draw(st.integers(1, 2))):
        fault = faults[draw(st.integers(0, len(faults) - 1))]
        key = draw(st.sampled_from([*sorted(fault), "after", "id"]))
        if draw(st.booleans()) and key in fault:
            del fault[key]
        else:
            fault[key] = draw(st.one_of(TIMES, TARGETS, AFTER, IDS))
    return doc


@settings(FUZZ_SETTINGS, max_examples=90)
@given(st.one_of(drawn(), mutant(), plausible()))
def test_a_scenario_is_refused_in_one_line_or_runs_in_the_sim(tmp_path: Path, doc: Any) -> None:
    path = tmp_path / "fuzzed.yaml"
    path.write_text(yaml.safe_dump(doc, allow_unicode=True))
    if not validates(path, doc):
        return
    summary = runs(["sim", WORDCOUNT, "-p", "checkpoint", "-n", "1", "--json",
                    "--scenario", str(path), "--label", "rack=a", "--label", "rack=b"], doc)
    assert summary is None or summary["faults"] == doc["name"]
