"""Runs the conformance kit: guarantee cases over seeded schedules, then every mutant.

A mutant counts as caught on a schedule (topology, seed) where the unmodified protocol
holds its guarantee and the mutant does not: the planted bug, not a weakness the protocol
already has, made the difference. Seeds are tried in order, each on every topology, so the
reported seed is the smallest that catches the mutant.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ftctl.config.load import load_topology
from ftctl.conformance.cases import (
    BUNDLED_TOPOLOGIES,
    MAX_SIM_RECORDS,
    GuaranteeCase,
    accepts,
    all_faults_cases,
    correlated_cases,
    guarantee_cases,
    guarantee_of,
    mutant_kinds,
    phase_cases,
    timing_overlays,
    too_large,
    topologies,
)
from ftctl.conformance.clocks import clock_cases
from ftctl.sim.faults import CRASH_ONLY, FaultKind
from ftctl.sim.runner import Simulator
from protocols.contract.spec import Guarantee, Mutant
from protocols.mutants import mutants_of
from protocols.registry import get_protocol

Progress = Callable[[str], None]  # called once per schedule run, with what is running


@dataclass
class CaseResult:
    case: GuaranteeCase
    schedules: int
    failures_injected: int
    failing_seeds: list[int]
    violations: dict[str, int]
    seconds: float = 0.0
    error: str | None = None  # the topology or protocol could not run at all

    @property
    def passed(self) -> bool:
        return not self.failing_seeds and self.error is None

    @property
    def untested(self) -> bool:
        """Schedules ran but not one of them struck: nothing was tested, so it cannot
        be said to hold (and the kit fails, as for a broken guarantee)."""
        return self.error is None and self.schedules > 0 and self.failures_injected == 0

    @property
    def checks(self) -> str:
        """What a schedule is judged on: the delivery property of the guarantee, or, with
        no delivery promise (``none`` on a stateful topology), only that the run finished."""
        return "completion" if self.case.guarantee is Guarantee.NONE else "delivery"

    def reproduce(self) -> str | None:
        if not self.failing_seeds:
            return None
        extra = "".join(f" --param {k}={v}" for k, v in self.case.params.items())
        if self.case.kinds != CRASH_ONLY:
            extra += f" --faults {','.join(self.case.kinds)}"
        if self.case.during is not None:
            extra += f" --during {self.case.during}"
        return (f"ftctl sim {_shown(self.case.topology)} -p {self.case.protocol}{extra} "
                f"--seed {self.failing_seeds[0]}")

    def to_json(self) -> dict[str, Any]:
        return {"kind": "guarantee", "case": self.case.name, "protocol": self.case.protocol,
                "variant": self.case.variant.name, "topology": self.case.topology.stem,
                "guarantee": self.case.guarantee.value, "checks": self.checks,
                "faults": list(self.case.kinds),
                "schedules": self.schedules,
                "failures_injected": self.failures_injected, "passed": self.passed,
                "untested": self.untested,
                "violating_schedules": len(self.failing_seeds),
                "first_violating_seed": self.failing_seeds[0] if self.failing_seeds else None,
                "violations": self.violations, "reproduce": self.reproduce(),
                "error": self.error, "seconds": round(self.seconds, 3)}


@dataclass
class MutantResult:
    protocol: str
    mutant: Mutant
    schedules: int = 0  # runs made until caught (or all of them)
    topology: Path | None = None
    seed: int | None = None
    timings: dict[str, Any] = field(default_factory=dict)  # the timer params it was caught at
    kinds: tuple[FaultKind, ...] = CRASH_ONLY  # what the catching schedule drew
    violations: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0
    during: str | None = None  # caught by the phase-triggered schedules of this phase

    @property
    def qualified(self) -> str:
        return f"{self.protocol}/{self.mutant.name}"

    @property
    def caught(self) -> bool:
        return self.seed is not None

    def reproduce(self) -> str | None:
        if self.topology is None:
            return None
        extra = "".join(f" --param {k}={v}" for k, v in self.timings.items())
        if self.kinds != CRASH_ONLY:
            extra += f" --faults {','.join(self.kinds)}"
        if self.during is not None:
            extra += f" --during {self.during}"
        return f"ftctl sim {_shown(self.topology)} -p {self.qualified}{extra} --seed {self.seed}"

    def to_json(self) -> dict[str, Any]:
        return {"kind": "mutant", "mutant": self.qualified, "protocol": self.protocol,
                "description": self.mutant.description, "caught": self.caught,
                "topology": self.topology.stem if self.topology else None, "seed": self.seed,
                "timings": self.timings or None, "faults": list(self.kinds),
                "during": self.during,
                "violations": self.violations, "schedules": self.schedules,
                "reproduce": self.reproduce(), "seconds": round(self.seconds, 3)}


def _shown(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


@dataclass
class KitReport:
    cases: list[CaseResult] = field(default_factory=list)
    mutants: list[MutantResult] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)  # topology -> why left out
    seconds: float = 0.0

    @property
    def passed(self) -> bool:
        return (all(c.passed and not c.untested for c in self.cases)
                and all(m.caught for m in self.mutants))

    def to_json(self) -> dict[str, Any]:
        return {"passed": self.passed, "seconds": round(self.seconds, 3),
                "guarantees_broken": sum(not c.passed for c in self.cases),
                "cases_without_faults": [c.case.name for c in self.cases if c.untested],
                "mutants_survived": [m.qualified for m in self.mutants if not m.caught],
                "topologies_skipped": self.skipped,
                "cases": [c.to_json() for c in self.cases],
                "mutants": [m.to_json() for m in self.mutants]}


class Kit:
    """Runs cases and mutants, sharing simulators and the protocols' verdicts per seed."""

    def __init__(self, topology_dir: Path = BUNDLED_TOPOLOGIES, first_seed: int = 1,
                 progress: Progress | None = None, max_records: int = MAX_SIM_RECORDS):
        self.topology_dir = topology_dir
        self.max_records = max_records  # larger topologies are listed as skipped
        self.first_seed = first_seed
        self.progress = progress
        self._sims: dict[tuple[str, str, Path, tuple[FaultKind, ...], str | None],
                         Simulator] = {}
        self._broken: dict[Path, str] = {}  # topologies whose simulator cannot be built
        # A simulator of a topology past this many records holds its golden output and
        # its batches (gigabytes for a million events): only the last one is kept, or
        # a protocol's cases over the Nexmark files outgrew the machine's memory.
        self.keep_records = MAX_SIM_RECORDS
        # (protocol, params, topology, kinds, seed, phase-triggered on) -> the protocol held
        self._holds: dict[tuple[str, str, Path, tuple[FaultKind, ...], int, str | None],
                          bool] = {}

    @property
    def where(self) -> tuple[Path, int]:
        """The topologies the cases are drawn from: a directory, and the largest input."""
        return self.topology_dir, self.max_records

    def topologies(self) -> list[Path]:
        return topologies(self.topology_dir, self.max_records)

    def _sim(self, protocol: str, params: dict[str, Any], topology: Path,
             kinds: tuple[FaultKind, ...] = CRASH_ONLY, during: str | None = None) -> Simulator:
        key = (protocol, repr(sorted(params.items())), topology, kinds, during)
        sim = self._sims.get(key)
        if sim is None:
            info = get_protocol(protocol)  # a mutant declares its protocol's guarantee
            judged = guarantee_of(info, params, topology)
            topo = load_topology(topology)
            if topo.input.records > self.keep_records:
                self._sims = {k: s for k, s in self._sims.items()
                              if s.graph.topology.input.records <= self.keep_records}
            sim = Simulator(topo, info, params, judged, kinds=kinds, during=during)
            self._sims[key] = sim
        return sim

    def _tick(self, what: str) -> None:
        if self.progress is not None:
            self.progress(what)

    def run_case(self, case: GuaranteeCase, n: int) -> CaseResult:
        """``n`` seeded schedules of ``case`` (of the kinds it draws)."""
        import time

        started = time.perf_counter()
        result = CaseResult(case, 0, 0, [], {})
        crash_only = case.kinds == CRASH_ONLY
        try:
            sim = self._sim(case.protocol, case.params, case.topology, case.kinds,
                            case.during)
        except Exception as exc:  # a topology the host cannot run: reported, not a crash
            result.error = self._broken[case.topology] = f"{type(exc).__name__}: {exc}"
            self._tick(case.name)
            return result
        key = repr(sorted(case.params.items()))
        for seed in range(self.first_seed, self.first_seed + n):
            try:
                outcome = sim.run_one(seed)
            except Exception as exc:  # a crash of the host or protocol is a broken case
                result.error = f"seed {seed}: {type(exc).__name__}: {exc}"
                break
            result.schedules += 1
            stats = outcome.result.stats
            result.failures_injected += stats.failures if crash_only else stats.injected
            # a run stopped safely on a bad stored object is no violation (nor a pass)
            held = outcome.verdict.passed or outcome.verdict.stopped_safely
            # what mutants are judged against
            self._holds[(case.protocol, key, case.topology, case.kinds, seed, case.during)] = held
            if not held:
                result.failing_seeds.append(seed)
                for k, v in outcome.verdict.totals().items():
                    result.violations[k] = result.violations.get(k, 0) + v
            self._tick(case.name)
        result.seconds = time.perf_counter() - started
        return result

    def _protocol_holds(self, protocol: str, params: dict[str, Any], topology: Path,
                        seed: int, kinds: tuple[FaultKind, ...] = CRASH_ONLY,
                        during: str | None = None) -> bool:
        key = (protocol, repr(sorted(params.items())), topology, kinds, seed, during)
        if key not in self._holds:
            sim = self._sim(protocol, params, topology, kinds, during)
            verdict = sim.run_one(seed).verdict
            self._holds[key] = verdict.passed or verdict.stopped_safely
        return self._holds[key]

    def run_mutant(self, protocol: str, mutant: Mutant, n: int,
                   only: list[Path] | None = None,
                   kinds: list[tuple[FaultKind, ...]] | None = None) -> MutantResult:
        """Seeds in order, each on every topology (or ``only`` these) at each of the
        protocol's timings, drawing crashes (or the kinds the mutant declares,
        ``Mutant.kinds``), then the correlated kinds (``mutant_kinds``; or only ``kinds``),
        then, for a mutant declaring no kinds, on each phase-triggered case, until one
        catches it."""
        import time

        started = time.perf_counter()
        qualified = f"{protocol}/{mutant.name}"
        variant = dict(mutant.params)
        result = MutantResult(protocol, mutant)
        runs: list[tuple[Path, dict[str, Any], tuple[FaultKind, ...], str | None]] = [
            (topology, timing, k, None) for topology in only or self.topologies()
            for timing in timing_overlays(protocol, variant)
            # a mutant of the store faults' handling draws them (``Mutant.kinds``)
            for k in mutant_kinds(protocol, timing, mutant.kinds)
            if kinds is None or k in kinds]
        # crashes first within a seed: the catches pinned before the other kinds ran
        runs.sort(key=lambda r: r[2] != CRASH_ONLY)
        # A bug in what a protocol does while in a phase (or in its phase declarations)
        # shows where a crash strikes in the phase: the phase-triggered schedules too.
        if not mutant.kinds and (kinds is None or CRASH_ONLY in kinds):
            runs += [(c.topology, {}, CRASH_ONLY, c.during)
                     for c in phase_cases(protocol, *self.where)
                     if only is None or c.topology in only]
        for seed in range(self.first_seed, self.first_seed + n):
            for topology, timing, drawn, during in runs:
                params = {**variant, **timing}
                if topology in self._broken or not accepts(protocol, params, topology):
                    continue  # reported with the guarantee cases, or out of scope
                try:
                    sim = self._sim(qualified, params, topology, drawn, during)
                except Exception as exc:  # the topology cannot run: no verdict either way
                    self._broken[topology] = f"{type(exc).__name__}: {exc}"
                    continue
                result.schedules += 1
                self._tick(qualified)
                try:
                    verdict = sim.run_one(seed).verdict
                    if verdict.passed or verdict.stopped_safely:
                        continue
                    violations = dict(verdict.totals())
                except Exception as exc:
                    # The planted bug crashed the run: caught, when the protocol itself
                    # runs this schedule without crashing.
                    violations = {f"crashed ({type(exc).__name__})": 1}
                try:
                    if not self._protocol_holds(protocol, params, topology, seed, drawn,
                                                during):
                        continue  # the protocol breaks here too: no evidence against the mutant
                except Exception:
                    continue
                result.topology, result.seed, result.timings = topology, seed, timing
                result.kinds, result.during = drawn, during
                result.violations = violations
                result.seconds = time.perf_counter() - started
                return result
        result.seconds = time.perf_counter() - started
        return result

    def run(self, protocols: list[str], n: int, mutants: bool = True) -> KitReport:
        import time

        started = time.perf_counter()
        report = KitReport(skipped={p.stem: f"{n:,} records: too large to simulate"
                                    for p, n in too_large(self.topology_dir,
                                                          self.max_records).items()})
        for protocol in protocols:
            for case in guarantee_cases(protocol, *self.where):
                report.cases.append(self.run_case(case, n))
            for case in all_faults_cases(protocol, *self.where):
                report.cases.append(self.run_case(case, case.schedules_for(n)))
            for case in correlated_cases(protocol, *self.where):
                report.cases.append(self.run_case(case, case.schedules_for(n)))
            for case in phase_cases(protocol, *self.where):
                report.cases.append(self.run_case(case, n))
            for case in clock_cases(protocol, *self.where):
                report.cases.append(self.run_case(case, case.schedules_for(n)))
            if mutants:
                for m in mutants_of(protocol):
                    report.mutants.append(self.run_mutant(protocol, m, n))
        report.seconds = time.perf_counter() - started
        return report

    def planned_runs(self, protocols: list[str], n: int, mutants: bool = True) -> int:
        """Most schedule runs ``run`` makes (mutants usually stop well before theirs)."""
        tops = len(self.topologies())
        total = 0
        for p in protocols:
            total += len(guarantee_cases(p, *self.where)) * n
            total += sum(c.schedules_for(n) for c in all_faults_cases(p, *self.where))
            total += sum(c.schedules_for(n) for c in correlated_cases(p, *self.where))
            phases = len(phase_cases(p, *self.where))
            total += phases * n
            total += sum(c.schedules_for(n) for c in clock_cases(p, *self.where))
            if mutants:
                for m in mutants_of(p):
                    total += n * (tops * sum(len(mutant_kinds(p, t, m.kinds))
                                             for t in timing_overlays(p, dict(m.params)))
                                  + (0 if m.kinds else phases))
        return total
