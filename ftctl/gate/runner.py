"""Runs gate cases and judges them: guarantee held, and no regression against the baseline."""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field

from ftctl.config.load import load_topology
from ftctl.gate.baseline import regressions
from ftctl.gate.suite import GateCase, GateSuite
from ftctl.sim.runner import Simulator
from protocols.registry import get_protocol


@dataclass
class CaseResult:
    name: str
    guarantee_held: bool
    metrics: dict[str, float]
    violations: dict[str, int] = field(default_factory=dict)
    reasons: list[str] = field(default_factory=list)
    details: str = ""
    seconds: float = 0.0

    @property
    def passed(self) -> bool:
        return not self.reasons

    def to_json(self) -> dict[str, object]:
        return {"name": self.name, "passed": self.passed, "guarantee_held": self.guarantee_held,
                "metrics": self.metrics, "violations": self.violations,
                "reasons": self.reasons, "seconds": round(self.seconds, 3)}


def run_sim_case(case: GateCase) -> CaseResult:
    topo = load_topology(case.topology)
    sim = Simulator(topo, get_protocol(case.protocol), dict(case.params), case.expect)
    summary = sim.run_many(case.schedules, case.seed)
    details = ""
    if summary.first_failure is not None:
        bad = summary.first_failure
        details = (f"schedule {bad.seed}: {bad.verdict.totals()}; reproduce: ftctl sim "
                   f"{case.topology} -p {case.protocol} --seed {bad.seed}")
    return CaseResult(case.name, summary.passed, summary.medians(),
                      dict(summary.violations), details=details)


def _chaos_command(case: GateCase) -> list[str]:
    cmd = [sys.executable, "-m", "ftctl.cli", "chaos", str(case.topology),
           "--protocol", case.protocol, "--json"]
    if case.scenario is not None:
        cmd += ["--scenario", str(case.scenario)]
    if case.kill is not None:
        cmd += ["--kill", str(case.kill)]
    for opt, value in (("--records", case.records), ("--rate", case.rate),
                       ("--workers", case.workers), ("--seed", case.seed)):
        if value is not None:
            cmd += [opt, str(value)]
    for k, v in case.params.items():
        cmd += ["--param", f"{k}={v}"]
    return cmd


def run_spark_case(case: GateCase, repeat: int) -> CaseResult:
    """Runs ``ftctl chaos --json`` ``repeat`` times; metrics are medians over the runs."""
    runs: list[dict[str, object]] = []
    failures: list[str] = []
    for _ in range(repeat):
        proc = subprocess.run(_chaos_command(case), capture_output=True, text=True)
        try:
            runs.append(json.loads(proc.stdout.strip().splitlines()[-1]))
        except (json.JSONDecodeError, IndexError):
            tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
            failures.append(f"chaos exited {proc.returncode}: {tail}")
    if failures and not runs:
        return CaseResult(case.name, False, {}, reasons=failures, details="\n".join(failures))
    held = all(bool(r.get("passed")) for r in runs) and not failures
    violations: dict[str, int] = {}
    for r in runs:
        for k, v in dict(r.get("violations") or {}).items():  # type: ignore[call-overload]
            violations[k] = violations.get(k, 0) + int(v)
    metrics: dict[str, float] = {}
    for metric in ("recovery_s", "detection_s"):
        values = [float(v) for r in runs if isinstance(v := r.get(metric), int | float)]
        if values:
            metrics[metric] = round(statistics.median(values), 3)
    return CaseResult(case.name, held, metrics, violations, details="\n".join(failures))


def run_case(case: GateCase, suite: GateSuite, baseline: dict[str, float] | None) -> CaseResult:
    started = time.perf_counter()
    if case.host == "sim":
        result = run_sim_case(case)
    else:
        result = run_spark_case(case, case.repeat or suite.repeat)
    result.seconds = time.perf_counter() - started
    if not result.guarantee_held:
        kinds = ", ".join(f"{k}={v}" for k, v in sorted(result.violations.items())) or "failed"
        result.reasons.append(f"guarantee broken: {kinds}")
    if baseline:
        result.reasons += regressions(result.metrics, baseline, suite.tolerance, suite.slack)
    return result
