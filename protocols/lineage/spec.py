"""``lineage`` as the registry and the conformance kit see it (contract v2)."""

from __future__ import annotations

from protocols.contract.actions import PURGING, RECOVERING, REPLAYING
from protocols.contract.messages import SHARED_MESSAGES
from protocols.contract.params import NoParams
from protocols.contract.spec import Guarantee, ProtocolSpec, fixed
from protocols.lineage.coordinator import LineageCoordinator
from protocols.lineage.instance import LineageInstance
from protocols.lineage.mutants import MUTANTS
from protocols.shared.logged import MESSAGES

SPEC: ProtocolSpec[NoParams] = ProtocolSpec(
    name="lineage",
    paper="000 (baseline)",
    description="purge the failed instances' downstream, recompute it from the sources and "
                "full payload logs; sinks suppress already-visible records by identity",
    params=NoParams,
    instance=LineageInstance,
    coordinator=LineageCoordinator,
    guarantee=fixed(Guarantee.EXACTLY_ONCE),
    messages=(*SHARED_MESSAGES, *MESSAGES),
    phases=(RECOVERING, REPLAYING, PURGING),
    mutants=MUTANTS,
    gate={"diamond": 100},
)
