"""What the kit and the gate run, derived from the protocol registry and the bundled topologies.

A protocol declares ``variants`` (named parameter sets worth testing on their own) and
``gate`` (``{"topology" or "topology/variant": schedules}``) on its registry entry; one
declaring no gate is gated on every bundled topology with ``DEFAULT_GATE_SCHEDULES``.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from ftctl.config.errors import ConfigError
from ftctl.sim.faults import ALL_KINDS, CRASH_ONLY, NEIGHBOUR_KINDS, STAGED_KINDS, FaultKind
from protocols.contract.spec import Guarantee, Variant
from protocols.registry import PROTOCOLS, get_protocol

if TYPE_CHECKING:
    from ftctl.config.topology import Topology

BUNDLED_TOPOLOGIES = Path(__file__).resolve().parents[2] / "topologies"
DEFAULT_GATE_SCHEDULES = 50
# Topologies sized for a Spark figure (hundreds of thousands of records) take minutes per
# simulated schedule; the kit leaves them out and says so.
MAX_SIM_RECORDS = 20_000
# Besides its crash schedules, each guarantee case runs this share of them again (at least
# one) drawing every fault kind: pauses past the hang timeout, partitions, delays, slow
# units, node losses, and the store's faults (``ALL_KINDS``). A separate case set, so
# the crash cases' seeds and pins stay valid.
# As many as the crash schedules: a third missed bugs that only other kinds reach.
ALL_FAULTS_SHARE = 1
ALL_FAULTS_SUFFIX = "+all-faults"
# Correlated failures (ftctl/sim/correlated.py), each a case set of its own drawing only
# them: a protocol with timers runs its short-timing cases with an instance and its ring
# neighbour lost together or in turn (its takeovers overlap live tuples only there); a
# protocol that plans on capacity runs every case with nodes returning one at a time.
NEIGHBOURS_SUFFIX = "+neighbours"
STAGED_SUFFIX = "+staged-capacity"
KIND_SUFFIXES: dict[tuple[FaultKind, ...], str] = {
    ALL_KINDS: ALL_FAULTS_SUFFIX, NEIGHBOUR_KINDS: NEIGHBOURS_SUFFIX,
    STAGED_KINDS: STAGED_SUFFIX}
# Crashes with the clock faults a protocol tolerates (ftctl/conformance/clocks.py).
CLOCK_SUFFIX = "+clock"
# A protocol with timers (``ProtocolSpec.timings``) runs every case again with them scaled
# down, a case named with this suffix.
SHORT_TIMINGS_SUFFIX = "@short-timings"
# Phase-triggered cases (``phase_cases``) are named with this and the phase, and run on
# this topology where the protocol accepts it.
DURING_SUFFIX = "~during-"
PHASE_TOPOLOGY = "wordcount"


def variants_of(protocol: str) -> tuple[Variant, ...]:
    spec = get_protocol(protocol)
    own = getattr(spec, "variants", None)
    if own:
        return tuple(own)
    return (Variant("default"),)


def read_topology(path: Path) -> Topology:
    """``path`` loaded once per version of the file, for reading only: listing the kit's
    cases asks about each topology for every protocol, variant and timing (thousands of
    loads of the same twenty files, most of pytest's collection time before)."""
    st = path.stat()
    return _read_topology(path.resolve(), st.st_mtime_ns, st.st_size)


@functools.lru_cache(maxsize=256)
def _read_topology(path: Path, mtime_ns: int, size: int) -> Topology:
    from ftctl.config.load import load_topology

    return load_topology(path)


def guarantee_of(spec: Any, params: Mapping[str, Any], topology: Path | None = None) -> Guarantee:
    """The guarantee ``spec`` declares for ``params`` (a function of them where it says so),
    on ``topology`` when given (``none`` promises at-most-once only without stateful operators)."""
    from ftctl.runtime.graph import ExecutionGraph
    from protocols.contract.view import GraphView

    graph = GraphView(ExecutionGraph(read_topology(topology))) if topology else None
    return Guarantee(spec.guarantee_of(spec.resolve(dict(params)), graph))


def _yaml_files(directory: Path) -> list[Path]:
    """Topology files in ``directory`` and one level of sub-directories (``joins/``, whose
    keyed joins and windows after a fan-in break what the flat topologies cannot)."""
    return sorted(directory.glob("*.yaml")) + sorted(directory.glob("*/*.yaml"))


def topologies(directory: Path = BUNDLED_TOPOLOGIES,
               max_records: int = MAX_SIM_RECORDS) -> list[Path]:
    """The topologies the kit simulates: every one in ``directory`` and its sub-directories
    but those with more than ``max_records`` input records. Cases are named by file stem,
    so stems must be unique."""
    large = too_large(directory, max_records)
    out = [p for p in _yaml_files(directory) if p not in large]
    stems = [p.stem for p in out]
    clash = sorted({s for s in stems if stems.count(s) > 1})
    if clash:
        raise ConfigError(str(directory), None, f"two topologies named {clash[0]!r} "
                          "(the kit names cases by file stem)")
    return out


def topology_named(stem: str, directory: Path = BUNDLED_TOPOLOGIES) -> Path:
    """The kit's topology whose file is ``{stem}.yaml`` (at the top or one level down)."""
    for p in topologies(directory):
        if p.stem == stem:
            return p
    return directory / f"{stem}.yaml"


def too_large(directory: Path = BUNDLED_TOPOLOGIES,
              max_records: int = MAX_SIM_RECORDS) -> dict[Path, int]:
    """Topologies left out of the kit, with their input size."""
    out = {}
    for p in _yaml_files(directory):
        records = read_topology(p).input.records
        if records > max_records:
            out[p] = records
    return out


@dataclass(frozen=True)
class GuaranteeCase:
    """One protocol variant on one topology, judged against its declared guarantee."""

    protocol: str
    variant: Variant
    topology: Path
    guarantee: Guarantee
    schedules: int = 0  # for the gate; the kit takes N from the user
    kinds: tuple[FaultKind, ...] = CRASH_ONLY  # what the schedules draw
    timings: tuple[tuple[str, Any], ...] = ()  # timer params overlaid (short timings)
    during: str | None = None  # a phase-triggered case: a crash while this phase is open

    @property
    def name(self) -> str:
        """``{topology}-{protocol}[-{variant}]``: the gate's case names (crash schedules);
        ``@short-timings`` for the case with the protocol's timers scaled down, then
        ``+all-faults`` for the case drawing every fault kind (``+clock``: crashes and
        clock faults)."""
        suffix = "" if self.variant.name == "default" else f"-{self.variant.name}"
        timing = SHORT_TIMINGS_SUFFIX if self.timings else ""
        clock = any(k.startswith("clock-") for k in self.kinds)
        faults = "" if self.kinds == CRASH_ONLY else KIND_SUFFIXES.get(
            self.kinds, CLOCK_SUFFIX if clock else ALL_FAULTS_SUFFIX)
        during = f"{DURING_SUFFIX}{self.during}" if self.during else ""
        return f"{self.topology.stem}-{self.protocol}{suffix}{timing}{faults}{during}"

    def schedules_for(self, n: int) -> int:
        """Schedules the kit runs for this case when each crash case runs ``n``."""
        return n if self.kinds == CRASH_ONLY else max(1, n // ALL_FAULTS_SHARE)

    @property
    def params(self) -> dict[str, Any]:
        return {**self.variant.params, **dict(self.timings)}


def short_timings(protocol: str, params: Mapping[str, Any]) -> dict[str, Any]:
    """The timer params of ``protocol`` (or of a mutant, ``protocol/mutant``) scaled down
    by the factors it declares (``ProtocolSpec.timings``) from their values under
    ``params``; empty when it has no timers."""
    spec = get_protocol(protocol.partition("/")[0])
    factors: Mapping[str, float] = getattr(spec, "timings", None) or {}
    if not factors:
        return {}
    base = spec.params.model_validate(dict(params))
    # six significant digits: a value a user can type back (--param ping_every=0.002)
    return {k: float(f"{getattr(base, k) * f:.6g}") for k, f in factors.items()
            if getattr(base, k) is not None}


def timing_overlays(protocol: str, params: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The timings the kit runs ``protocol`` at: its defaults ({}), then the short ones."""
    short = short_timings(protocol, params)
    return [{}, short] if short else [{}]


def accepts(protocol: str, params: Mapping[str, Any], topology: Path) -> bool:
    """Whether ``protocol`` with ``params`` runs ``topology`` (``ProtocolParams.check``:
    replica-ring refuses stateful operators and single replicas)."""
    from ftctl.sim.runner import refusals

    spec = get_protocol(protocol)
    return not refusals(spec.resolve(dict(params)), read_topology(topology))


def guarantee_cases(protocol: str, directory: Path = BUNDLED_TOPOLOGIES,
                    max_records: int = MAX_SIM_RECORDS) -> list[GuaranteeCase]:
    """Every variant of ``protocol`` on every topology in ``directory`` it accepts, at
    each of its timings (``timing_overlays``)."""
    spec = get_protocol(protocol)
    return [GuaranteeCase(protocol, v, t, guarantee_of(spec, v.params, t),
                          timings=tuple(sorted(timing.items())))
            for v in variants_of(protocol) for timing in timing_overlays(protocol, v.params)
            for t in topologies(directory, max_records) if accepts(protocol, v.params, t)]


def all_faults_cases(protocol: str, directory: Path = BUNDLED_TOPOLOGIES,
                     max_records: int = MAX_SIM_RECORDS) -> list[GuaranteeCase]:
    """``guarantee_cases`` again, their schedules drawing every fault kind (the store's
    too: a run the protocol stops safely on a bad object holds)."""
    return [replace(c, kinds=ALL_KINDS)
            for c in guarantee_cases(protocol, directory, max_records)]


def correlated_kinds(protocol: str, timings: Mapping[str, Any]) -> list[tuple[FaultKind, ...]]:
    """The correlated kinds ``protocol`` (or ``protocol/mutant``) is run with at
    ``timings`` (the timer params overlaid; empty: its defaults)."""
    spec = get_protocol(protocol.partition("/")[0])
    out = [NEIGHBOUR_KINDS] if timings else []
    if "capacity" in (getattr(spec, "needs", None) or ()):
        out.append(STAGED_KINDS)
    return out


def correlated_cases(protocol: str, directory: Path = BUNDLED_TOPOLOGIES,
                     max_records: int = MAX_SIM_RECORDS) -> list[GuaranteeCase]:
    """``guarantee_cases`` again for each of their ``correlated_kinds``."""
    return [replace(c, kinds=k) for c in guarantee_cases(protocol, directory, max_records)
            for k in correlated_kinds(protocol, dict(c.timings))]


def mutant_kinds(protocol: str, timings: Mapping[str, Any],
                 declared: Sequence[str] = ()) -> list[tuple[FaultKind, ...]]:
    """What a mutant's schedules draw at ``timings``, in the order tried for each seed:
    crashes (the pinned catches), or the kinds the mutant declares (``Mutant.kinds``: a
    bug in handling a bad stored object needs store faults), then the correlated kinds.
    (Every kind at once caught no shipped mutant the others miss, and would double the
    search.)"""
    first = cast(tuple[FaultKind, ...], tuple(declared)) or CRASH_ONLY
    return [first, *correlated_kinds(protocol, timings)]


def phase_cases(protocol: str, directory: Path = BUNDLED_TOPOLOGIES,
                max_records: int = MAX_SIM_RECORDS) -> list[GuaranteeCase]:
    """One case per phase ``protocol`` enters (``chaos.plan.phases_of``): its first
    variant on one topology it accepts (wordcount where it can), each schedule with a
    crash at an opening of the phase (``ftctl/sim/phase_faults.py``)."""
    from chaos.plan import phases_of

    first = variants_of(protocol)[0]
    cases = [c for c in guarantee_cases(protocol, directory, max_records)
             if c.variant == first and not c.timings]
    if not cases:
        return []
    base = next((c for c in cases if c.topology.stem == PHASE_TOPOLOGY), cases[0])
    return [replace(base, during=phase) for phase in phases_of(get_protocol(protocol))]


def gate_of(protocol: str, directory: Path = BUNDLED_TOPOLOGIES) -> dict[str, int]:
    own = getattr(get_protocol(protocol), "gate", None)
    if own:
        return dict(own)
    return {t.stem: DEFAULT_GATE_SCHEDULES for t in topologies(directory)}


def gate_cases(directory: Path = BUNDLED_TOPOLOGIES) -> list[GuaranteeCase]:
    """The registry's simulation gate: each protocol's ``gate`` entries, in registry order."""
    out = []
    for protocol in PROTOCOLS:
        by_name = {v.name: v for v in variants_of(protocol)}
        spec = get_protocol(protocol)
        for key, schedules in gate_of(protocol, directory).items():
            stem, _, variant = key.partition("/")
            v = by_name[variant or "default"]
            topology = topology_named(stem, directory)
            out.append(GuaranteeCase(protocol, v, topology,
                                     guarantee_of(spec, v.params, topology), schedules))
    return out
