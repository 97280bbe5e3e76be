"""Runs gate cases and judges them: guarantee held, and no regression against the baseline."""

from __future__ import annotations

import json
import multiprocessing
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from ftctl.config.load import load_topology
from ftctl.gate.baseline import regressions
from ftctl.gate.suite import GateCase, GateSuite
from ftctl.lifetime import tied_environment
from ftctl.sim.runner import Simulator
from ftctl.sim.spread import tied_to_parent
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


def _median_fault_metric(run: dict[str, Any], key: str) -> float | None:
    values = [float(v) for f in run.get("recovery") or []
              if isinstance(v := f.get(key), int | float)]
    return statistics.median(values) if values else None


def run_spark_case(case: GateCase, repeat: int) -> CaseResult:
    """Runs ``ftctl chaos --json`` ``repeat`` times; metrics are medians over the runs."""
    runs: list[dict[str, Any]] = []
    failures: list[str] = []
    for _ in range(repeat):
        # Tied to the gate: killed, it takes the run with it (the run's own watchdog
        # then takes down the run's cluster).
        proc = subprocess.run(_chaos_command(case), capture_output=True, text=True,
                              env=tied_environment())
        try:
            runs.append(json.loads(proc.stdout))
        except json.JSONDecodeError:
            tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
            failures.append(f"chaos exited {proc.returncode}: {tail}")
    if failures and not runs:
        return CaseResult(case.name, False, {}, reasons=failures, details="\n".join(failures))
    held = all(bool(r.get("passed")) for r in runs) and not failures
    violations: dict[str, int] = {}
    for r in runs:
        for k, v in (r.get("anomalies") or {}).items():
            violations[k] = violations.get(k, 0) + int(v)
    metrics: dict[str, float] = {}
    for metric in ("detection_s", "restart_s", "recovery_s"):
        per_run = [m for r in runs if (m := _median_fault_metric(r, metric)) is not None]
        if per_run:
            metrics[metric] = round(statistics.median(per_run), 3)
    details = "\n".join(failures + [f"run {r.get('run_id')}" for r in runs])
    return CaseResult(case.name, held, metrics, violations, details=details)


def measure(case: GateCase, suite: GateSuite) -> CaseResult:
    """Run one case; its guarantee and metrics, not yet judged against a baseline."""
    started = time.perf_counter()
    if case.host == "sim":
        result = run_sim_case(case)
    else:
        result = run_spark_case(case, case.repeat or suite.repeat)
    result.seconds = time.perf_counter() - started
    return result


def judge(result: CaseResult, case: GateCase, suite: GateSuite,
          baseline: dict[str, float] | None) -> CaseResult:
    if not result.guarantee_held:
        kinds = ", ".join(f"{k}={v}" for k, v in sorted(result.violations.items())) or "failed"
        result.reasons.append(f"guarantee broken: {kinds}")
    if baseline:
        tolerance = case.tolerance if case.tolerance is not None else suite.tolerance
        result.reasons += regressions(result.metrics, baseline, tolerance, suite.slack)
    return result


def measure_all(cases: Sequence[GateCase], suite: GateSuite, jobs: int,
                done: Callable[[GateCase], None] | None = None) -> list[CaseResult]:
    """Every case's ``measure``, in case order. Simulation cases, each a pure function of
    its inputs, are spread over ``jobs`` spawned processes (a CPU each); Spark cases run
    here after them, one at a time, as each starts a cluster's worth of processes."""
    sims = [c for c in cases if c.host == "sim"]
    out: dict[str, CaseResult] = {}
    if jobs > 1 and len(sims) > 1:
        ctx = multiprocessing.get_context("spawn")
        with ctx.Pool(min(jobs, len(sims)), initializer=tied_to_parent,
                      initargs=(os.getpid(),)) as pool:
            results = pool.imap(partial(measure, suite=suite), sims)
            for case, result in zip(sims, results, strict=True):
                out[case.name] = result
                if done is not None:
                    done(case)
    for case in cases:
        if case.name not in out:
            out[case.name] = measure(case, suite)
            if done is not None:
                done(case)
    return [out[c.name] for c in cases]

