"""``none``: no fault tolerance, the control every other protocol is compared with.

A failed instance comes back empty; nothing is replayed. A source commits before it
processes: with every batch it first persists the offset after that batch (its resume
point), reports it (by the contract the report waits until the write is durable, which a
send does not) and only then sends the batch, so a crash can lose a batch but never send it
twice. A restarted source resumes from that stored offset.

What this promises depends on the topology (``promise``). Where no operator keeps state,
a crash only loses what was in flight or not yet produced: at most once. A stateful
operator (count, window, join, ...) restarts empty, so after a crash it outputs values the
fault-free run never had (a running count starting again at 1): no delivery promise
there, only that the run finishes.
"""

from __future__ import annotations

from protocols.contract.actions import InstanceAction, Persist, Report
from protocols.contract.events import SourceReady, Started
from protocols.contract.logic import CoordinatorLogic, InstanceLogic
from protocols.contract.messages import SHARED_MESSAGES, Persisted
from protocols.contract.names import InstanceId
from protocols.contract.params import NoParams
from protocols.contract.spec import Guarantee, ProtocolSpec, fixed
from protocols.contract.view import ClusterView, GraphView

# Where a source keeps its resume offset in stable storage (overwritten with every batch).
OFFSET_REF = 0


class NoneInstance(InstanceLogic[NoParams]):
    """Batches in arrival order; a source persists its resume offset before each batch."""

    def on_started(self, ev: Started, now: float) -> list[InstanceAction]:
        core = self.cores[ev.slot]
        if core.is_source and ev.restored is not None:
            core.seek(self.resume_at(int(ev.restored), core.lo, core.hi))
        return []

    def resume_at(self, stored: int, lo: int, hi: int) -> int:
        """Where a restarted source reads on, given the offset it stored."""
        return max(lo, min(stored, hi))

    def on_source(self, ev: SourceReady, now: float) -> list[InstanceAction]:
        core = self.cores[ev.slot]
        start = core.offset
        more = core.source_next()
        # Commit before process: the offset is durable before the batch it covers leaves.
        # A send alone does not wait for the write (a crash could take it from the page
        # cache, and the replacement would resend from an older offset); a report does.
        acts: list[InstanceAction] = [
            Persist(ev.slot, OFFSET_REF, self.offset_to_store(start, core.offset)),
            Report(Persisted(OFFSET_REF), ev.slot)]
        acts += self.output(ev.slot)
        if not more:
            acts += self.finish(ev.slot)
        return acts

    def offset_to_store(self, start: int, end: int) -> int:
        """The resume offset persisted with the batch ``[start, end)``: its end."""
        return end


class NoneCoordinator(CoordinatorLogic[NoParams]):
    """The default restart (empty, ended inputs told again); a source from the offset it
    stored."""

    def restore_from(self, instance: InstanceId, view: ClusterView) -> int | None:
        """A source's stored resume offset, once it stored one; nothing for the others."""
        if self.graph.is_source(instance) and OFFSET_REF in view.stored(instance):
            return OFFSET_REF
        return None


def keeps_state(graph: GraphView) -> list[str]:
    """Operators of ``graph`` whose output after a restart depends on what a crash lost:
    those keeping state between batches, and sinks judged by their final value per key
    (losing a key's last records changes the value it ends with)."""
    eg = graph.execution
    modes = eg.topology.sink_modes()
    out: dict[str, None] = {}
    for iid, spec in eg.instances.items():
        if spec.is_source:
            continue
        if spec.is_sink:
            if modes.get(spec.op) == "final-per-key":
                out[spec.op] = None
        elif getattr(eg.make_operator(iid), "stateful", False):
            out[spec.op] = None
    return list(out)


def promise(params: NoParams, graph: GraphView) -> Guarantee:
    """At most once where nothing keeps state; elsewhere no delivery promise."""
    return Guarantee.NONE if keeps_state(graph) else Guarantee.AT_MOST_ONCE


SPEC: ProtocolSpec[NoParams] = ProtocolSpec(
    name="none",
    paper="-",
    description="no fault tolerance: a failed instance restarts empty, a source from the "
                "offset it persisted before each batch (the control); at-most-once only "
                "where no operator keeps state",
    params=NoParams,
    instance=NoneInstance,
    coordinator=NoneCoordinator,
    guarantee=fixed(Guarantee.AT_MOST_ONCE),  # on a topology not known yet
    guarantee_on=promise,
    messages=SHARED_MESSAGES,
    # Gated where it promises something: on stateful topologies its losses are expected.
    gate={"replica-chain": 50},
    # Its mutants live in protocols/none_mutants.py (found there by name): they subclass
    # the classes above.
)
