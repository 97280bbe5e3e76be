"""Re-verify a stored run from its recorded outputs, without running anything again."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ftctl.config.checks import check_topology
from ftctl.config.topology import Topology
from ftctl.results import RunStore
from ftctl.runtime.graph import ExecutionGraph
from ftctl.verify.checker import Verdict, verify
from ftctl.verify.golden import Producer, golden_for
from protocols.contract.spec import Guarantee
from protocols.contract.view import GraphView
from protocols.registry import get_protocol

# What must agree between a stored verdict and a fresh one.
_COUNTS = ("lost", "duplicated", "unexpected", "reordered", "output_records", "golden_records")


@dataclass
class Reverification:
    verdict: Verdict
    stored: dict[str, Any] | None
    status: str

    @property
    def matches_stored(self) -> bool:
        if self.stored is None:
            return False
        if bool(self.stored.get("complete")) != self.verdict.complete:
            return False
        fresh = {s.sink: s.to_json() for s in self.verdict.sinks}
        old = {s["sink"]: s for s in self.stored.get("sinks", [])}
        if fresh.keys() != old.keys():
            return False
        return all(fresh[k][c] == old[k].get(c) for k in fresh for c in _COUNTS)

    @property
    def passed(self) -> bool:
        """The fresh verdict, and the stored oracle result if there was one."""
        oracle = (self.stored or {}).get("oracle")
        return self.verdict.passed and (oracle is None or bool(oracle.get("passed")))


def stored_topology(run: RunStore) -> Topology:
    cfg = run.read_config()
    topo = Topology.model_validate(cfg["topology"])
    return check_topology(topo, file=str(run.path / "config.json"))


def reverify(run: RunStore, produce: Producer,
             guarantee: Guarantee | None = None) -> Reverification:
    """Judge a stored run's outputs against golden (from the cache, else ``produce``); an
    unfinished run never passes."""
    cfg = run.read_config()
    topo = stored_topology(run)
    if cfg.get("engine"):  # an engine's run (ftctl/engines): judged exactly-once
        declared = Guarantee.EXACTLY_ONCE
    else:
        info = get_protocol(cfg["protocol"])
        declared = info.guarantee_of(info.resolve(cfg.get("params") or {}),
                                     GraphView(ExecutionGraph(topo)))
    status = run.status()
    complete = status == "complete"
    verdict = verify(topo.sink_modes(), golden_for(topo, produce), run.read_outputs(),
                     guarantee or declared, complete=complete)
    return Reverification(verdict, run.read_verdict(), status)
