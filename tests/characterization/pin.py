"""What the characterization tests pin: per gate-like case and seed, a digest of the sim's
trace (host events excluded, so a history rename does not count as a behaviour change),
of the visible outputs, and the schedule summary.

Regenerate (only for an intended behaviour change, saying why in the commit):

    FTCTL_REGENERATE=1 python -m pytest tests/characterization -q
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from ftctl.config.load import load_topology
from ftctl.sim.runner import Simulator
from protocols.registry import get_protocol

ROOT = Path(__file__).resolve().parents[2]
PINNED = Path(__file__).with_name("sim_traces.json")
SEEDS = range(1, 7)

# (name, topology, protocol, params): the gate's sim cases plus the variants they skip.
CASES: list[tuple[str, str, str, dict[str, Any]]] = [
    ("wordcount-none", "wordcount", "none", {}),
    ("wordcount-checkpoint", "wordcount", "checkpoint", {}),
    ("wordcount-checkpoint-aligned", "wordcount", "checkpoint", {"alignment": "aligned"}),
    ("diamond-checkpoint", "diamond", "checkpoint", {}),
    ("windowed-checkpoint", "windowed", "checkpoint", {}),
    ("sharder-checkpoint", "sharder", "checkpoint", {}),
    ("wordcount-causal", "wordcount", "causal", {}),
    ("wordcount-causal-noclocks", "wordcount", "causal", {"clocks": "off"}),
    ("sharder-causal", "sharder", "causal", {}),
    ("diamond-lineage", "diamond", "lineage", {}),
    ("windowed-lineage", "windowed", "lineage", {}),
]


def digest(lines: list[str] | dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(lines, sort_keys=True, default=str).encode()).hexdigest()[:16]


def observe(topology: str, protocol: str, params: dict[str, Any]) -> dict[str, Any]:
    sim = Simulator(load_topology(ROOT / "topologies" / f"{topology}.yaml"),
                    get_protocol(protocol), params)
    seeds = {}
    for seed in SEEDS:
        out = sim.run_one(seed, trace=True)
        trace = [line for line in out.result.trace if " EVENT " not in line]
        seeds[str(seed)] = {"trace": digest(trace), "outputs": digest(out.result.outputs),
                            "events": out.result.stats.events,
                            "passed": out.verdict.passed}
    summary = sim.run_many(len(SEEDS), seed=100)
    return {"seeds": seeds, "medians": summary.medians(), "failing": summary.failing_seeds}
