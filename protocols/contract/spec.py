"""``ProtocolSpec``: everything ftctl knows about one protocol, registered by name."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Generic, Literal

from protocols.contract.messages import Msg
from protocols.contract.params import P, ProtocolParams, RunShape, validate

if TYPE_CHECKING:
    from protocols.contract.logic import CoordinatorLogic, InstanceLogic
    from protocols.contract.view import GraphView


class Guarantee(StrEnum):
    """What a protocol promises about the visible output under the faults it tolerates."""

    AT_MOST_ONCE = "at-most-once"
    AT_LEAST_ONCE = "at-least-once"
    EXACTLY_ONCE = "exactly-once"
    # No delivery promise: a run is judged only on finishing (no stall, no crash). What
    # ``none`` declares where an operator keeps state and restarts empty.
    NONE = "none"


Need = Literal["peers", "timers", "routing", "capacity", "parallel"]


@dataclass(frozen=True, slots=True)
class Variant:
    """A named parameter set worth testing on its own (``aligned`` checkpointing)."""

    name: str
    params: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Mutant:
    """A planted bug: the protocol with one class (usually one method) replaced.

    The conformance kit runs it through the same schedules as the protocol; some schedule
    must violate the guarantee within ``budget`` seeds, or the tests are too weak.
    """

    name: str
    description: str
    instance: type | None = None  # replaces the spec's instance logic
    coordinator: type | None = None  # replaces the spec's coordinator logic
    params: Mapping[str, Any] = field(default_factory=dict)  # the variant it lives in
    budget: int = 200
    # The fault kinds the kit's schedules for it draw (``ftctl sim --faults`` names);
    # empty: crashes only. A bug in handling a bad stored object needs store faults.
    kinds: tuple[str, ...] = ()


@dataclass(frozen=True)
class ProtocolSpec(Generic[P]):
    """A protocol as the registry, the kernel, the CLI and the conformance kit see it.

    ``guarantee`` is a function of the params (replica-ring's ``semantics`` param chooses
    it); ``guarantee_on``, where given, narrows it per topology and is what a run on a known
    graph is judged against (``none``: at-most-once only without stateful operators).
    ``phases`` lists what ``DeclarePhase`` may name, so fault triggers can be refused
    when the protocol never enters a phase. ``needs`` tells the kit which topologies and
    hosts can run it. ``gate`` maps a topology stem to the schedules the registry gate runs.
    """

    name: str
    paper: str
    description: str
    params: type[P]
    instance: type[InstanceLogic[P]]
    coordinator: type[CoordinatorLogic[P]]
    guarantee: Callable[[P], Guarantee]
    guarantee_on: Callable[[P, GraphView], Guarantee] | None = None
    messages: tuple[type[Msg], ...] = ()
    phases: tuple[str, ...] = ()
    needs: frozenset[Need] = frozenset()
    variants: tuple[Variant, ...] = (Variant("default"),)
    mutants: tuple[Mutant, ...] = ()
    gate: Mapping[str, int] = field(default_factory=dict)
    # Params that set the protocol's own timers, each with the factor the conformance kit
    # scales its value by for a second run of every case: short enough that failures,
    # takeovers and restarts overlap live traffic (at the defaults they may all happen
    # after the input has ended). Empty: no timers, one timing.
    timings: Mapping[str, float] = field(default_factory=dict)
    # The protocol's fault model: groups of instances of which a fault leaves at least one
    # unit up (replica-ring: each ring; a ring with no replica left cannot take over).
    # Hosts narrow a strike that would kill a whole group and log ``fault-skipped``.
    spared: Callable[[GraphView], tuple[frozenset[str], ...]] | None = None
    # Phases whose holder does not count as up for ``spared`` until it leaves them
    # (replica-ring: ``reinstating``, a replica back in its ring but still waiting for its
    # record table holds no copy of any record; the paper assumes one replica fails at a
    # time, and a failure is not over before that table is in).
    unsettled: tuple[str, ...] = ()
    # What the protocol promises about a run's history beyond its output (replica-ring: a
    # live unit is never fenced for a suspicion of another generation): a run's events ->
    # breach kind -> count, empty when it holds. The simulator judges every run on it, so
    # the conformance kit and ``ftctl sim`` see a breach as a violation. The events are
    # the host's history records (``kind``, ``data``), which protocols do not import.
    checks: Callable[[Sequence[Any]], Mapping[str, int]] | None = None

    def guarantee_of(self, params: P, graph: GraphView | None = None) -> Guarantee:
        """What the protocol promises with ``params``; on ``graph``'s topology if given."""
        if graph is not None and self.guarantee_on is not None:
            return self.guarantee_on(params, graph)
        return self.guarantee(params)

    def default_params(self) -> P:
        return self.params()

    def resolve(self, given: Mapping[str, Any] | ProtocolParams,
                shape: RunShape | None = None) -> ProtocolParams:
        """The validated params for a run (raises ``ParamError`` naming the bad one);
        ``"auto"`` values are resolved for ``shape``."""
        params = given if isinstance(given, ProtocolParams) else validate(
            self.params, given, self.name)
        return params.for_run(shape or RunShape())


def fixed(g: Guarantee) -> Callable[[Any], Guarantee]:
    """A guarantee that does not depend on the params."""
    return lambda _params: g
