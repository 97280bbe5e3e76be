"""Every protocol ftctl knows, by name, and what a ``--protocol`` name runs.

An entry is a ``ProtocolSpec`` (contract v2, ``protocols/contract``). Register a new
protocol by adding its spec: ``"falkirk": falkirk.SPEC``. A name is either a registered
protocol (``checkpoint``) or one of its shipped mutants (``checkpoint/commit-early``,
``protocols/mutants.py``); ``resolve`` is the one place that tells them apart.
"""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

from protocols.causal.spec import SPEC as CAUSAL
from protocols.checkpoint.spec import SPEC as CHECKPOINT
from protocols.contract.spec import ProtocolSpec
from protocols.falkirk.spec import SPEC as FALKIRK
from protocols.lineage.spec import SPEC as LINEAGE
from protocols.none import SPEC as NONE
from protocols.progressive import spec as progressive
from protocols.replica_ring.spec import SPEC as REPLICA_RING

Protocol = ProtocolSpec[Any]

PROTOCOLS: dict[str, Protocol] = {
    "none": NONE,
    "checkpoint": CHECKPOINT,
    "lineage": LINEAGE,
    "causal": CAUSAL,
    "falkirk": FALKIRK,
    "replica-ring": REPLICA_RING,
    "progressive": progressive.SPEC,
}


class UnknownProtocol(KeyError):
    """A protocol or mutant name nobody registered or ships; ``str`` is the one-line reason
    (a KeyError subclass, so callers that caught KeyError keep working)."""

    def __str__(self) -> str:
        return str(self.args[0])


class Resolved(NamedTuple):
    spec: Protocol
    # A mutant's variant params (``aligned-no-block`` lives in ``alignment=aligned``),
    # to be overlaid by the user's; empty for a registered protocol.
    params: dict[str, Any]


def split_name(name: str) -> tuple[str, str | None]:
    """``"checkpoint/commit-early"`` -> ``("checkpoint", "commit-early")``; no ``/``: no mutant."""
    protocol, sep, mutant = name.partition("/")
    return protocol, (mutant if sep else None)


def registered(name: str) -> Protocol:
    """The registry entry named exactly ``name`` (a mutant name is not one)."""
    try:
        return PROTOCOLS[name]
    except KeyError:
        raise UnknownProtocol(
            f"unknown protocol {name!r} (known: {', '.join(PROTOCOLS)})") from None


def resolve(name: str) -> Resolved:
    """What ``name`` runs: a registered protocol, or ``protocol/mutant``, the protocol's entry
    with the mutant's classes planted and named ``name`` (raises ``UnknownProtocol``)."""
    protocol, mutant_name = split_name(name)
    if mutant_name is None:
        return Resolved(registered(name), {})
    from protocols.mutants import get_mutant  # imports this module: bound late

    _, mutant = get_mutant(name)
    base = registered(protocol)
    spec = dataclasses.replace(base, name=name, instance=mutant.instance or base.instance,
                               coordinator=mutant.coordinator or base.coordinator)
    return Resolved(spec, dict(mutant.params))


def get_protocol(name: str) -> Protocol:
    """The spec ``name`` runs (``resolve`` without the mutant's variant params)."""
    return resolve(name).spec
