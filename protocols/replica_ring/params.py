"""Parameters of ``replica-ring`` and the behaviour they select.

``variant=faithful`` runs the protocol as the paper writes it; ``fixed`` closes the flaws
listed in docs/protocols.md (F1, F3, F4, F5, F6, F8); ``without`` leaves single fixes out so
each flaw can be shown alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Literal, Self

from pydantic import Field, field_validator, model_validator

from protocols.contract.params import ProtocolParams, RunShape
from protocols.contract.spec import Guarantee
from protocols.contract.view import GraphView


class Flaw(StrEnum):
    """Flaws of the paper's protocol that the fixed variant closes."""

    ACK_BEFORE_SYNC = "F1"  # ack sent before the record reached the colleagues
    SINK_NO_DEDUP = "F3"  # the last hop has no record table to deduplicate with
    EMPTY_TABLE_ON_REINSTATE = "F4"  # a reinstated replica starts without records
    ORIGIN_COPY_DIES = "F5"  # the origin frees its copy when the receiver acks
    NO_RING_WALK = "F6"  # a dead successor stalls the takeover
    NO_FENCE = "F8"  # a falsely suspected replica keeps sending


class Variant(StrEnum):
    FAITHFUL = "faithful"
    FIXED = "fixed"


CLUSTER_TIMING = {"ping_every": 0.5, "ping_timeout": 5.0, "retry_every": 0.5}


class ReplicaRingParams(ProtocolParams):
    """``--param`` keys of ``replica-ring`` (validated; errors name the field)."""

    semantics: Guarantee = Field(
        default=Guarantee.EXACTLY_ONCE,
        description="at-most-once runs no records; at-least-once re-fetches a dead "
        "replica's pending tuples; exactly-once also drops tuples whose id is known.")
    replicas: int | None = Field(
        default=None, ge=2, le=64,
        description="Replicas per ring operator; omitted: each operator's parallelism. "
        "When given, every ring operator must have exactly this parallelism.")
    variant: Variant = Field(
        default=Variant.FIXED,
        description="faithful: the paper's protocol, flaws included; fixed: flaws closed.")
    without: frozenset[Flaw] = Field(
        default=frozenset(),
        description="Fixes to leave out of the fixed variant, e.g. F1,F3.")
    # The defaults suit the simulation's time scale; a run on a real cluster that leaves
    # them unset takes CLUSTER_TIMING instead (``for_run``).
    ping_every: float = Field(default=0.05, gt=0, description="Ping period, seconds "
                              "(unset on a cluster: 0.5).")
    ping_timeout: float = Field(
        default=0.15, gt=0, description="A ping unanswered this long suspects the successor "
        "(unset on a cluster: 5.0).")
    retry_every: float = Field(default=0.05, gt=0, description="Resend period of unacked "
                               "sends (unset on a cluster: 0.5).")
    reinstate_after: float | None = Field(
        default=1.0, gt=0, description="Seconds from detection to restarting the dead "
        "replica; omitted (never): the taker keeps the slot.")
    state: Literal["refuse"] = Field(
        default="refuse",
        description="Stateful operators (count, sum, max) are refused: tuple records carry "
        "no operator state, so a taker would continue from zero.")

    def for_run(self, shape: RunShape) -> Self:
        """On a real cluster (no nominal duration), timing params (when the user set none) take
        ``CLUSTER_TIMING``: on Spark a ping travels through the driver's event loop and a
        loaded executor's Python stalls for seconds (2 s timeouts still suspected live
        replicas on this 2-core machine), and every false suspicion is a takeover.
        Crashes are found sooner anyway: the host sees the task's connection drop."""
        if shape.nominal_duration is not None or self.model_fields_set & CLUSTER_TIMING.keys():
            return self  # the simulation, or a user who chose the timing
        return self.model_copy(update=CLUSTER_TIMING)

    @field_validator("semantics")
    @classmethod
    def _delivery(cls, v: Guarantee) -> Guarantee:
        if v is Guarantee.NONE:  # no delivery promise: not a semantics the ring offers
            raise ValueError("'at-most-once', 'at-least-once' or 'exactly-once'")
        return v

    @field_validator("without", mode="before")
    @classmethod
    def _split(cls, v: object) -> object:
        if isinstance(v, str):
            return frozenset(p.strip() for p in v.split(",") if p.strip())
        return v

    @model_validator(mode="after")
    def _check(self) -> ReplicaRingParams:
        if self.ping_timeout <= self.ping_every:
            raise ValueError(f"ping_timeout ({self.ping_timeout}) must exceed ping_every "
                             f"({self.ping_every}): a ping needs a period to be answered")
        if self.without and self.variant is Variant.FAITHFUL:
            raise ValueError("without= removes fixes from variant=fixed; faithful has none")
        return self

    def check(self, graph: GraphView) -> list[str]:
        """The topology's scope (stateful, windowed and single-replica operators are
        refused), one line naming the operator."""
        from protocols.replica_ring.scope import check_topology

        why = check_topology(graph.execution.topology, self)
        return [] if why is None else [why]

    def policy(self, mutants: frozenset[str] = frozenset()) -> Policy:
        return Policy.of(self, mutants)


@dataclass(frozen=True)
class Policy:
    """What a replica does, derived once from the params (and planted mutants)."""

    semantics: Guarantee
    records: bool  # run the record machinery (not under at-most-once)
    dedup: bool  # exactly-once: refuse a tuple whose id is in the record table
    ack_after_sync: bool  # F1: ack only once every colleague has the record
    idempotent_sink: bool  # F3: the sink emits a uid once
    table_transfer: bool  # F4: the stand-in hands its records to a reinstated replica
    purge_on_delete: bool  # F5: step (8) waits for the receiver's delete, not its ack
    ring_walk: bool  # F6: walk past dead successors; take every slot the dead unit hosted
    fence: bool  # F8: stop a suspect before its slot is rerouted
    mutants: frozenset[str]

    @classmethod
    def of(cls, p: ReplicaRingParams, mutants: frozenset[str] = frozenset()) -> Policy:
        amo = p.semantics is Guarantee.AT_MOST_ONCE
        eo = p.semantics is Guarantee.EXACTLY_ONCE

        def fix(flaw: Flaw, mutant: str) -> bool:
            return p.variant is Variant.FIXED and flaw not in p.without and mutant not in mutants

        return cls(
            semantics=p.semantics,
            records=not amo or "amo-records" in mutants,
            dedup=eo,
            ack_after_sync=fix(Flaw.ACK_BEFORE_SYNC, "ack-before-sync"),
            idempotent_sink=eo and fix(Flaw.SINK_NO_DEDUP, "sink-no-dedup"),
            table_transfer=fix(Flaw.EMPTY_TABLE_ON_REINSTATE, "no-table-transfer"),
            purge_on_delete=fix(Flaw.ORIGIN_COPY_DIES, "origin-purges-on-ack"),
            ring_walk=fix(Flaw.NO_RING_WALK, "no-ring-walk"),
            fence=fix(Flaw.NO_FENCE, "no-fence"),
            mutants=mutants,
        )

    @property
    def amo(self) -> bool:
        return self.semantics is Guarantee.AT_MOST_ONCE

    def has(self, mutant: str) -> bool:
        return mutant in self.mutants
